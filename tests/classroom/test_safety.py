"""What a class code, a teacher token and the limits allow — each rule on SQLite and PostgreSQL.

A refused call must name the field and what is allowed, and leave every stored row as it was
(checked by comparing the whole CSV and the raw tables before and after)."""

from __future__ import annotations

import hmac
import inspect
import math
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from attnviz import classroom
from attnviz.classroom import AccessDenied, AlreadyStored, ClassDB, ClassError, RateLimited, Student
from attnviz.classroom import store as store_module
from attnviz.lessons.core import MAX_SEED
from tests.classroom.conftest import LESSONS

GOOD = {
    "exercise_id": "basics.scores",
    "seed": 3,
    "answer": "(2, 4)",
    "right": False,
    "attempts": 2,
    "seconds": 9.5,
}


def snapshot(db: ClassDB) -> tuple:
    with db.engine.connect() as c:
        return tuple(
            tuple(map(tuple, c.execute(text(f"SELECT * FROM {t} ORDER BY id"))))
            for t in ("classes", "students", "answers")
        )


def record(db: ClassDB, code: str, student: Student, **fields) -> None:
    f = GOOD | fields
    db.record_answer(
        code,
        student,
        f["exercise_id"],
        f["seed"],
        f["answer"],
        right=f["right"],
        attempts=f["attempts"],
        seconds=f["seconds"],
    )


def refused(db: ClassDB, error: type, field: str, call) -> ClassError:
    """`call()` raises `error` naming `field`, and nothing stored changes."""
    before = snapshot(db)
    with pytest.raises(error) as e:
        call()
    assert e.value.field == field and e.value.allowed, e.value
    assert snapshot(db) == before
    return e.value


@pytest.fixture
def two_classes(db):
    a, b = db.create_class("A", lessons=LESSONS), db.create_class("B", lessons=LESSONS)
    ada, bo = db.join(a.code, "Ada"), db.join(b.code, "Bo")
    record(db, a.code, ada)
    record(db, b.code, bo, answer="secret of B")
    return a, b, ada, bo


# -- a class code -------------------------------------------------------------------------------


def test_only_join_record_and_links_take_a_class_code():
    """A new public function taking a class code must be added here after checking it returns
    nothing of another student's."""
    takes_code = {
        name
        for name in classroom.__all__
        if callable(obj := getattr(classroom, name))
        and not inspect.isclass(obj)
        and "code" in inspect.signature(obj).parameters
    }
    methods = {
        n
        for n, f in inspect.getmembers(ClassDB, inspect.isfunction)
        if not n.startswith("_") and "code" in inspect.signature(f).parameters
    }
    # `returning`: the code and nickname it was given, or None — for another browser None whether or not
    # the nickname is in the class (tests/classroom/test_teacher_control.py). `instance_seed`: a number in
    # 0 … MAX_SEED, an HMAC keyed by the teacher hash (tests/classroom/test_instances.py), nothing stored
    assert takes_code == {
        "instance_seed", "join", "progress", "record_answer", "record_try", "returning", "student_link"
    }  # fmt: skip
    assert methods == {"join", "progress", "record_answer", "record_try", "returning"}


def test_progress_reads_back_only_that_students_own_records_and_no_answer_text(db, two_classes):
    a, _, ada, _ = two_classes
    cy = db.join(a.code, "Cy")
    record(db, a.code, cy, seed=4, answer="Cy's secret")
    mine = db.progress(a.code, ada)
    assert [(p.exercise_id, p.seed, p.right_first, p.attempts) for p in mine] == [
        ("basics.scores", 3, False, 2)
    ]
    assert "secret" not in repr(mine) and "(2, 4)" not in repr(mine)
    refused(db, ClassError, "student", lambda: db.progress(a.code, Student("ZZZZZZ", "Ada")))


def test_what_a_class_code_returns_is_only_what_the_student_sent(db, two_classes):
    a, _, _, _ = two_classes
    cy = db.join(a.code, "Cy")
    assert cy == Student(a.code, "Cy") and vars(cy) == {"code": a.code, "nickname": "Cy"}
    assert record(db, a.code, cy, seed=4) is None


def test_a_student_cannot_write_into_another_class(db, two_classes):
    _, b, ada, _ = two_classes
    refused(db, ClassError, "student", lambda: record(db, b.code, ada, seed=9))
    forged = Student(b.code, "Ada")  # Ada never joined B
    refused(db, AccessDenied, "student", lambda: record(db, b.code, forged, seed=9))


def test_an_unknown_or_malformed_code_reads_and_writes_nothing(db, two_classes):
    unknown = "".join(secrets.choice("ABCDEFGH") for _ in range(6))
    refused(db, AccessDenied, "code", lambda: db.join(unknown, "Eve"))
    for bad in ("", "ABC", "ABCDEFG", "ABC10O", 123456, None):
        refused(db, AccessDenied, "code", lambda bad=bad: db.join(bad, "Eve"))
    refused(db, AccessDenied, "code", lambda: record(db, unknown, Student(unknown, "Ada")))


# -- the teacher token --------------------------------------------------------------------------


def test_a_wrong_teacher_token_reads_nothing_and_says_so(db, two_classes):
    a, _, _, _ = two_classes
    near = a.teacher_token[:-1] + ("A" if a.teacher_token[-1] != "A" else "B")
    for wrong in (near, secrets.token_urlsafe(32), a.code, "", "x" * 10_000, None):
        for read in (db.class_view, db.class_csv):
            error = refused(db, AccessDenied, "teacher_token", lambda read=read, wrong=wrong: read(wrong))
            assert "teacher link" in str(error)
            assert not (isinstance(wrong, str) and wrong and wrong in str(error))  # never echoed


def test_the_token_is_compared_in_constant_time_on_its_hash(db, two_classes, monkeypatch):
    a, _, _, _ = two_classes
    seen, compare = [], hmac.compare_digest

    def spy(x, y):
        seen.append((x, y))
        return compare(x, y)

    monkeypatch.setattr(store_module.hmac, "compare_digest", spy)
    db.class_view(a.teacher_token)
    assert seen == [(store_module.token_hash(a.teacher_token),) * 2]


def test_a_teacher_sees_only_their_class(db, two_classes):
    a, b, _, _ = two_classes
    view = db.class_view(a.teacher_token)
    assert [s.nickname for s in view.students] == ["Ada"]
    assert "secret of B" not in db.class_csv(a.teacher_token) and "Bo" not in db.class_csv(a.teacher_token)
    assert "secret of B" in db.class_csv(b.teacher_token)


# -- expiry -------------------------------------------------------------------------------------


def test_an_expired_class_refuses_writes_and_reads_then_is_purged(open_db, clock):
    db = open_db(ttl_days=1)
    old = db.create_class("old", lessons=LESSONS)
    ada = db.join(old.code, "Ada")
    record(db, old.code, ada)
    clock.advance(86_400 - 1)
    record(db, old.code, ada, seed=4)  # still running a second before its end
    clock.advance(1)
    refused(db, AccessDenied, "code", lambda: db.join(old.code, "Bo"))
    refused(db, AccessDenied, "code", lambda: record(db, old.code, ada, seed=5))
    for read in (db.class_view, db.class_csv):
        assert "ended" in str(
            refused(db, AccessDenied, "teacher_token", lambda read=read: read(old.teacher_token))
        )
    new = db.create_class("new", lessons=LESSONS)  # creating a class purges the expired ones
    assert snapshot(db)[1:] == ((), ())
    assert [row[1] for row in snapshot(db)[0]] == [new.code]
    assert db.purge_expired() == 0


def test_purge_deletes_only_expired_classes(open_db, clock):
    db = open_db(ttl_days=2)
    first = db.create_class("first", lessons=LESSONS)
    record(db, first.code, db.join(first.code, "Ada"))
    clock.advance(86_400)
    second = db.create_class("second", lessons=LESSONS)
    record(db, second.code, db.join(second.code, "Bo"))
    clock.advance(86_400)
    assert db.purge_expired() == 1
    assert db.class_view(second.teacher_token).students[0].answered == 1
    assert [row[1] for row in snapshot(db)[0]] == [second.code] and len(snapshot(db)[2]) == 1


# -- bounds and the rate ------------------------------------------------------------------------


def test_students_per_class_are_bounded(open_db):
    db = open_db(students=3)
    info = db.create_class("c", lessons=LESSONS)
    for nick in ("a", "b", "c"):
        db.join(info.code, nick)
    error = refused(db, ClassError, "nickname", lambda: db.join(info.code, "d"))
    assert "3" in str(error)
    assert db.join(info.code, "b") == Student(info.code, "b")  # a student already in still gets back in


def test_answers_per_student_are_bounded(open_db):
    db = open_db(answers=3)
    info = db.create_class("c", lessons=LESSONS)
    me = db.join(info.code, "a")
    for seed in range(3):
        record(db, info.code, me, seed=seed)
    refused(db, ClassError, "answers", lambda: record(db, info.code, me, seed=99))
    record(db, info.code, db.join(info.code, "b"), seed=99)  # another student's allowance is their own


def test_live_classes_are_bounded(open_db, clock):
    db = open_db(classes=2, ttl_days=1)
    db.create_class("a", lessons=LESSONS)
    db.create_class("b", lessons=LESSONS)
    refused(db, ClassError, "classes", lambda: db.create_class("c", lessons=LESSONS))
    clock.advance(86_400)
    db.create_class("c", lessons=LESSONS)  # the expired two are purged first


def test_answers_are_rate_limited_per_student(open_db, clock):
    db = open_db(rate=2.0, burst=3)
    info = db.create_class("c", lessons=LESSONS)
    me, other = db.join(info.code, "a"), db.join(info.code, "b")
    for seed in range(3):
        record(db, info.code, me, seed=seed)
    error = refused(db, RateLimited, "answers", lambda: record(db, info.code, me, seed=3))
    assert error.retry_after == pytest.approx(0.5)
    record(db, info.code, other, seed=3)  # not the other student's allowance
    clock.advance(0.25)
    assert refused(
        db, RateLimited, "answers", lambda: record(db, info.code, me, seed=3)
    ).retry_after == pytest.approx(0.25)
    clock.advance(0.25)
    record(db, info.code, me, seed=3)
    clock.advance(3600)  # refills up to the burst, no further
    for seed in range(4, 7):
        record(db, info.code, me, seed=seed)
    refused(db, RateLimited, "answers", lambda: record(db, info.code, me, seed=7))


def test_the_bounds_hold_under_concurrent_writers(open_db):
    """Threads racing past a bound: exactly the bound gets in (the class and student rows are locked)."""
    db = open_db(students=5, burst=4, rate=1e-9)
    info = db.create_class("c", lessons=LESSONS)
    start = threading.Barrier(12)

    def attempt(call):
        start.wait()
        try:
            call()
            return "ok"
        except ClassError as e:
            return type(e).__name__

    with ThreadPoolExecutor(12) as pool:
        joined = list(pool.map(attempt, [lambda i=i: db.join(info.code, f"s{i}") for i in range(12)]))
    assert sorted(joined) == ["ClassError"] * 7 + ["ok"] * 5
    me = db.join(info.code, next(f"s{i}" for i, r in enumerate(joined) if r == "ok"))
    with ThreadPoolExecutor(12) as pool:
        sent = list(pool.map(attempt, [lambda i=i: record(db, info.code, me, seed=i) for i in range(12)]))
    assert sorted(sent) == ["RateLimited"] * 8 + ["ok"] * 4
    assert len(snapshot(db)[2]) == 4


# -- malformed and repeated submissions ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("exercise_id", "basics.masks"),  # well formed, not this class's
        ("exercise_id", "Basics Scores"),
        ("exercise_id", 3),
        ("seed", -1),
        ("seed", MAX_SEED + 1),
        ("seed", "3"),
        ("seed", True),
        ("seed", 2.0),
        ("answer", "x" * 201),
        ("answer", ""),
        ("answer", "   "),
        ("answer", "a\x00b"),
        ("answer", ["(2, 4)"]),
        ("right", "yes"),
        ("right", 1),
        ("right", None),
        ("attempts", 0),
        ("attempts", 1.5),
        ("attempts", 1_001),
        ("seconds", -1),
        ("seconds", math.nan),
        ("seconds", math.inf),
        ("seconds", "9"),
        ("seconds", 86_401),
    ],
)
def test_a_malformed_submission_is_refused_naming_its_field(db, two_classes, field, value):
    a, _, ada, _ = two_classes
    error = refused(db, ClassError, field, lambda: record(db, a.code, ada, **({"seed": 7} | {field: value})))
    assert field in str(error) and "allowed" in str(error)


def test_a_right_first_answer_is_one_attempt(db, two_classes):
    a, _, ada, _ = two_classes
    refused(db, ClassError, "attempts", lambda: record(db, a.code, ada, seed=7, right=True, attempts=2))
    record(db, a.code, ada, seed=7, right=True, attempts=1)


def test_a_repeated_submission_is_refused_and_the_first_kept(db, two_classes):
    a, _, ada, _ = two_classes
    for changed in ({}, {"answer": "(4, 2)", "right": True, "attempts": 1}):
        error = refused(
            db, AlreadyStored, "exercise_id", lambda changed=changed: record(db, a.code, ada, **changed)
        )
        assert "stored already" in str(error)
    assert ',"(2, 4)",False,2,' in db.class_csv(a.teacher_token)


@pytest.mark.parametrize("nickname", ["", "   ", "x" * 41, "a\nb", "a\x00b", "tab\there", 42, None])
def test_a_bad_nickname_is_refused(db, two_classes, nickname):
    a, _, _, _ = two_classes
    refused(db, ClassError, "nickname", lambda: db.join(a.code, nickname))


def test_a_nickname_of_forty_characters_of_any_script_is_accepted(db, two_classes):
    a, _, _, _ = two_classes
    nick = "Ωμέγα-名前-😀" * 3 + "x" * 10
    assert len(nick) == 40 and db.join(a.code, nick).nickname == nick
