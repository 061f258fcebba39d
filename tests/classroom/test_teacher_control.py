"""The teacher controls their class, and one visitor cannot fill it or the server (issue 46, points 2
and 22) — on SQLite and PostgreSQL, each state read back from the database (a second `ClassDB` on
the same URL plays another replica)."""

from __future__ import annotations

import csv
import io
import threading

import pytest
from sqlalchemy import text

from attnviz.classroom import AccessDenied, ClassError, RateLimited, Student
from attnviz.classroom.db import make_engine, migrate
from attnviz.classroom.view import BOM
from tests.classroom.conftest import LESSONS
from tests.classroom.test_safety import record, refused


def csv_rows(db, token) -> list[dict]:
    return list(csv.DictReader(io.StringIO(db.class_csv(token).removeprefix(BOM))))


def test_closed_joining_refuses_new_nicknames_on_every_replica_and_reopens(open_db):
    one, other = open_db(), open_db()  # two servers on one database
    info = one.create_class("c", lessons=LESSONS)
    one.join(info.code, "Ada")
    one.set_joining(info.teacher_token, open_=False)
    assert other.class_view(info.teacher_token).joining_open is False
    error = refused(other, ClassError, "code", lambda: other.join(info.code, "Bot"))
    assert "closed" in str(error)
    assert other.join(info.code, "Ada") == Student(info.code, "Ada")  # a student in the class comes back
    other.set_joining(info.teacher_token, open_=True)
    one.join(info.code, "Bo")
    assert [s.nickname for s in one.class_view(info.teacher_token).students] == ["Ada", "Bo"]


@pytest.mark.parametrize("keep", [True, False])
def test_a_removed_student_frees_their_seat_and_cannot_come_back(open_db, keep):
    db = open_db(students=2)
    info = db.create_class("c", lessons=LESSONS)
    bot, ada = db.join(info.code, "Bot"), db.join(info.code, "Ada")
    record(db, info.code, bot, answer="spam")
    record(db, info.code, ada, seed=5, right=True, attempts=1)
    refused(db, ClassError, "nickname", lambda: db.join(info.code, "Bo"))  # full
    db.remove_student(info.teacher_token, "Bot", keep_answers=keep)
    assert db.join(info.code, "Bo") == Student(info.code, "Bo")  # the seat is free
    refused(db, AccessDenied, "nickname", lambda: db.join(info.code, "Bot"))
    refused(db, AccessDenied, "student", lambda: record(db, info.code, bot, seed=9))
    view = db.class_view(info.teacher_token)
    answers = [r["nickname"] for r in csv_rows(db, info.teacher_token)]
    if keep:
        assert [(s.nickname, s.removed, s.answered) for s in view.students] == [
            ("Bot", True, 1), ("Ada", False, 1), ("Bo", False, 0),
        ]  # fmt: skip
        assert answers == ["Bot", "Ada"] and view.exercises[0].common_wrong == "spam"
    else:
        assert [s.nickname for s in view.students] == ["Ada", "Bo"]
        assert answers == ["Ada"] and view.exercises[0].students == 1
    refused(
        db, ClassError, "nickname", lambda: db.remove_student(info.teacher_token, "Bot", keep_answers=True)
    )
    refused(db, AccessDenied, "teacher_token", lambda: db.remove_student("x" * 43, "Ada", keep_answers=True))


def test_one_visitor_joins_a_class_under_one_nickname(db):
    info = db.create_class("c", lessons=LESSONS)
    db.join(info.code, "Ada", visitor="browser-1")
    error = refused(db, ClassError, "nickname", lambda: db.join(info.code, "Ada2", visitor="browser-1"))
    assert "one browser joins a class once" in str(error)
    assert db.join(info.code, "Ada", visitor="browser-1") == Student(info.code, "Ada")
    db.join(info.code, "Bo", visitor="browser-2")
    other = db.create_class("d", lessons=LESSONS)
    db.join(other.code, "Ada", visitor="browser-1")  # another class is another seat
    with db.engine.connect() as c:
        stored = c.execute(text("SELECT visitor FROM students")).scalars().all()
    assert "browser-1" not in stored and all(v is None or len(v) == 64 for v in stored)  # hashes only


def test_only_the_browser_that_joined_comes_back_without_joining(open_db):
    """`returning`: a reload or a restart of the browser that joined (on any replica), never another
    browser, a nickname nobody joined under, nor one the teacher removed."""
    one, other = open_db(), open_db()
    info = one.create_class("c", lessons=LESSONS)
    one.join(info.code, "Ada", visitor="browser-1")
    one.join(info.code, "Bo")  # joined without a visitor key: nobody comes back by a link
    assert other.returning(info.code, "Ada", visitor="browser-1") == Student(info.code, "Ada")
    for nickname, browser in (("Ada", "browser-2"), ("Cy", "browser-1"), ("Bo", "browser-1")):
        assert other.returning(info.code, nickname, visitor=browser) is None
    one.remove_student(info.teacher_token, "Ada", keep_answers=True)
    assert other.returning(info.code, "Ada", visitor="browser-1") is None
    with one.engine.connect() as c:
        assert sorted(c.execute(text("SELECT nickname FROM students")).scalars()) == [
            "Ada",
            "Bo",
        ]  # none added


def test_joining_is_rate_limited_per_class_and_refills(open_db, clock):
    db = open_db(join_burst=3, join_rate=0.5)
    info, other = db.create_class("c", lessons=LESSONS), db.create_class("d", lessons=LESSONS)
    for nick in "abc":
        db.join(info.code, nick)
    error = refused(db, RateLimited, "code", lambda: db.join(info.code, "d"))
    assert error.retry_after == pytest.approx(2.0)
    db.join(info.code, "a")  # coming back costs nothing
    db.join(other.code, "d")  # another class's allowance is its own
    clock.advance(2.0)
    db.join(info.code, "d")
    refused(db, RateLimited, "code", lambda: db.join(info.code, "e"))


def test_the_join_limit_holds_under_concurrent_joiners(open_db):
    db = open_db(join_burst=5, join_rate=1e-9)
    info = db.create_class("c", lessons=LESSONS)
    outcomes, start = [], threading.Barrier(12)

    def join(i):
        start.wait()
        try:
            db.join(info.code, f"s{i}", visitor=f"v{i}")
            outcomes.append("in")
        except RateLimited:
            outcomes.append("limited")

    threads = [threading.Thread(target=join, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["in"] * 5 + ["limited"] * 7
    assert len(db.class_view(info.teacher_token).students) == 5


def test_class_creation_is_limited_per_visitor_and_per_server(open_db, clock):
    one, other = open_db(created_per_visitor=2, created_per_server=3, creation_window_s=600), None
    other = open_db(created_per_visitor=2, created_per_server=3, creation_window_s=600)
    one.create_class("a", lessons=LESSONS, visitor="tab-1")
    clock.advance(60)
    other.create_class("b", lessons=LESSONS, visitor="tab-1")
    error = refused(
        other, RateLimited, "classes", lambda: one.create_class("c", lessons=LESSONS, visitor="tab-1")
    )
    assert "one browser" in str(error) and error.retry_after == pytest.approx(540)
    other.create_class("c", lessons=LESSONS, visitor="tab-2")
    error = refused(
        one, RateLimited, "classes", lambda: one.create_class("d", lessons=LESSONS, visitor="tab-3")
    )
    assert "this server" in str(error)
    clock.advance(541)  # the first creation left the window
    one.create_class("d", lessons=LESSONS, visitor="tab-1")


def test_a_database_of_the_first_schema_upgrades_with_its_classes_kept(url, open_db):
    engine = make_engine(url)
    try:
        migrate(engine, "0001")
        with engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO classes (id, code, name, lessons, teacher_hash, created_at, expires_at) "
                    "VALUES (1, 'ABCDEF', 'old', :lessons, :hash, :now, :later)"
                ),
                {
                    "lessons": '[["basics", ["basics.scores"]]]',
                    "hash": "0" * 64,
                    "now": "2027-01-15 08:00:00+00:00",
                    "later": "2027-02-14 08:00:00+00:00",
                },
            )
    finally:
        engine.dispose()
    db = open_db()  # migrates to the newest schema
    with db.engine.connect() as c:
        assert c.execute(text("SELECT joining_open, join_allowance FROM classes")).one() == (True, None)
    student = db.join("ABCDEF", "Ada")
    db.record_answer("ABCDEF", student, "basics.scores", 1, "k2", right=False, attempts=1, seconds=1.0)


@pytest.mark.parametrize("hidden", ["\u202e", "\u200b", "\u2066", "\ufeff"])
def test_names_refuse_invisible_and_direction_changing_characters(db, hidden):
    info = db.create_class("c", lessons=LESSONS)
    error = refused(db, ClassError, "nickname", lambda: db.join(info.code, f"Ada{hidden}x"))
    assert "invisible or direction-changing" in str(error)
    refused(db, ClassError, "name", lambda: db.create_class(f"Year{hidden}2", lessons=LESSONS))


def test_a_student_stuck_on_wrong_tries_shows_until_the_exercise_is_stored(db):
    """Issue 46, point 12: the live view counted only finished exercises."""
    info = db.create_class("c", lessons=LESSONS)
    ada, bo = db.join(info.code, "Ada"), db.join(info.code, "Bo")
    db.record_try(info.code, ada, "basics.softmax", 1)
    db.record_try(info.code, ada, "basics.softmax", 4)
    view = {s.nickname: s for s in db.class_view(info.teacher_token).students}
    assert (view["Ada"].working_on, view["Ada"].wrong_tries, view["Ada"].answered) == ("basics.softmax", 4, 0)
    assert view["Bo"].working_on is None
    db.record_answer(info.code, ada, "basics.softmax", 3, "0.1", right=False, attempts=5, seconds=60.0)
    (ada_now,) = [s for s in db.class_view(info.teacher_token).students if s.nickname == "Ada"]
    assert (ada_now.working_on, ada_now.answered) == (None, 1)
    refused(db, ClassError, "exercise_id", lambda: db.record_try(info.code, bo, "modern.tiles", 1))
    refused(db, ClassError, "wrong_tries", lambda: db.record_try(info.code, bo, "basics.softmax", 0))
    refused(
        db,
        AccessDenied,
        "student",
        lambda: db.record_try(info.code, Student(info.code, "Eve"), "basics.softmax", 1),
    )
