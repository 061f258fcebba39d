"""The class database's API on SQLite and PostgreSQL: create, join, record, the teacher's view and
CSV, checked against what the test wrote (counted here, not by the library)."""

from __future__ import annotations

import csv
import hashlib
import io

import pytest
from sqlalchemy import text

from attnviz import classroom
from attnviz.classroom import ClassDB, ClassError, Student
from attnviz.classroom.db import ENV_URL, default_url
from attnviz.classroom.rules import ALPHABET, ENV_TTL, Limits
from attnviz.classroom.view import BOM
from tests.classroom.conftest import LESSONS


def raw(db: ClassDB, sql: str) -> list[tuple]:
    with db.engine.connect() as c:
        return [tuple(r) for r in c.execute(text(sql))]


def rows(csv_text: str) -> list[dict]:
    assert csv_text.startswith(BOM)  # a spreadsheet reads it as UTF-8
    return list(csv.DictReader(io.StringIO(csv_text.removeprefix(BOM))))


def test_a_new_class_has_a_typable_code_and_a_token_stored_only_as_its_hash(db, clock):
    info = db.create_class("Group B", lessons=LESSONS)
    assert len(info.code) == 6 and set(info.code) <= set(ALPHABET) and not set(info.code) & set("0O1I")
    assert len(info.teacher_token) >= 43  # 32 random bytes, URL-safe base64
    assert info.lessons == tuple((k, tuple(v)) for k, v in LESSONS.items())
    assert (info.expires_at.timestamp() - clock.now) == pytest.approx(30 * 86_400)
    [(code, stored_hash)] = raw(db, "SELECT code, teacher_hash FROM classes")
    assert code == info.code and stored_hash == hashlib.sha256(info.teacher_token.encode()).hexdigest()
    assert info.teacher_token not in repr(info) and info.teacher_token not in str(
        raw(db, "SELECT * FROM classes")
    )


def test_codes_differ_between_classes(db):
    codes = {db.create_class(f"c{i}", lessons=LESSONS).code for i in range(20)}
    assert len(codes) == 20


def test_the_same_nickname_is_the_same_student_and_is_stored_as_given(db):
    info = db.create_class("c", lessons=LESSONS)
    odd = "<b>Ada</b> '); DROP TABLE students; -- 😀"
    first = db.join(info.code, f"  {odd}  ")
    again = db.join(info.code.lower(), odd)  # a reload, the code typed in lower case
    assert first == again == Student(info.code, odd)
    assert raw(db, "SELECT nickname FROM students") == [(odd,)]
    db.record_answer(info.code, again, "basics.scores", 1, "=1+1", right=False, attempts=2, seconds=3.5)
    assert db.class_view(info.teacher_token).students[0].nickname == odd


def test_nicknames_differ_by_case(db):
    info = db.create_class("c", lessons=LESSONS)
    db.join(info.code, "ada")
    db.join(info.code, "Ada")
    assert sorted(raw(db, "SELECT nickname FROM students")) == [("Ada",), ("ada",)]


def test_the_teacher_view_counts_each_students_first_record_of_an_exercise(db):
    info = db.create_class("c", lessons=LESSONS)
    a, b, c = (db.join(info.code, n) for n in ("a", "b", "c"))
    db.record_answer(info.code, a, "basics.scores", 1, "x", right=False, attempts=3, seconds=10)
    db.record_answer(
        info.code, a, "basics.scores", 2, "right", right=True, attempts=1, seconds=5
    )  # a later variant
    db.record_answer(info.code, b, "basics.scores", 3, "y", right=False, attempts=2, seconds=8)
    db.record_answer(info.code, c, "basics.scores", 4, "right", right=True, attempts=1, seconds=4)
    db.record_answer(info.code, c, "basics.softmax", 4, "y", right=False, attempts=2, seconds=4)
    view = db.class_view(info.teacher_token)
    stats = {e.exercise_id: e for e in view.exercises}
    assert [e.exercise_id for e in view.exercises] == [ex for ids in LESSONS.values() for ex in ids]
    scores = stats["basics.scores"]
    assert (scores.students, scores.right_first, scores.share_right) == (3, 1, pytest.approx(1 / 3))
    assert (scores.common_wrong, scores.common_wrong_count) == ("x", 1)  # a tie between x and y: text order
    assert (stats["basics.softmax"].share_right, stats["basics.softmax"].common_wrong) == (0.0, "y")
    assert stats["basics.scaling"].students == 0 and stats["basics.scaling"].share_right is None
    assert [(p.nickname, p.answered, p.right_first) for p in view.students] == [
        ("a", 1, 0),
        ("b", 1, 0),
        ("c", 2, 1),
    ]
    assert (view.code, view.name, view.lessons) == (info.code, "c", info.lessons)


def defused(cell: str) -> str:
    return cell if cell[0] not in "=+-@" or cell == "-0.5" else "'" + cell


def test_the_csv_holds_every_record_as_written_with_formulas_defused(db):
    info = db.create_class("c", lessons=LESSONS)
    sent = [
        ("=HYPERLINK(1)", "basics.scores", 11, "-0.5", False, 4, 12.25),  # a number stays a number
        ("+Cy", "basics.scores", 13, "-1+2", False, 2, 1.0),
        ("Bo", "basics.scores", 12, "(2, 4)", True, 1, 3.0),
        ("=HYPERLINK(1)", "circuits.induction", 11, "L1.H2\nL0.H1", False, 2, 60.0),
    ]
    for nick, ex, seed, answer, right, attempts, seconds in sent:
        student = db.join(info.code, nick)
        db.record_answer(
            info.code, student, ex, seed, answer, right=right, attempts=attempts, seconds=seconds
        )
    got = rows(db.class_csv(info.teacher_token))
    assert [
        (
            r["nickname"],
            r["exercise_id"],
            int(r["seed"]),
            r["first_answer"],
            r["right_first_time"] == "True",
            int(r["attempts"]),
            float(r["seconds"]),
        )
        for r in got
    ] == [(defused(n), e, s, defused(a), r, at, sec) for n, e, s, a, r, at, sec in sent]
    assert all(r["answered_at"].endswith("+00:00") for r in got)


def test_the_default_database_lives_in_the_users_data_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_URL, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_url() == f"sqlite:///{tmp_path / 'data' / 'attnviz' / 'classes.sqlite'}"
    assert (tmp_path / "data" / "attnviz").stat().st_mode & 0o077 == 0  # private to the user
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG rule: only an absolute path counts
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        default_url() == f"sqlite:///{tmp_path / 'home' / '.local' / 'share' / 'attnviz' / 'classes.sqlite'}"
    )


def test_the_module_functions_use_the_url_in_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_URL, f"sqlite:///{tmp_path / 'env.sqlite'}")
    info = classroom.create_class("c", lessons=LESSONS)
    me = classroom.join(info.code, "Ada")
    classroom.record_answer(info.code, me, "basics.scores", 5, "x", right=False, attempts=2, seconds=1.0)
    assert classroom.class_view(info.teacher_token).students[0].answered == 1
    assert "Ada,basics.scores,5,x" in classroom.class_csv(info.teacher_token)
    assert (tmp_path / "env.sqlite").exists()
    classroom.default_db().close()


@pytest.mark.parametrize(
    "bad",
    ["not a url", "sqlite://", "sqlite:///:memory:", "nosuchdb+driver://host/db"],
)
def test_a_bad_database_url_names_the_setting(bad):
    with pytest.raises(ClassError) as e:
        ClassDB(bad)
    assert e.value.field == ENV_URL


def test_a_password_in_a_refused_url_is_not_shown():
    with pytest.raises(ClassError) as e:
        ClassDB("nosuchdb+driver://user:s3cret@host/db")
    assert "s3cret" not in str(e.value)


@pytest.mark.parametrize(("text", "days"), [("", 30.0), ("7", 7.0), ("0.5", 0.5)])
def test_the_lifetime_of_a_class_comes_from_the_environment(monkeypatch, text, days):
    monkeypatch.setenv(ENV_TTL, text)
    assert Limits.from_env().ttl_days == days


@pytest.mark.parametrize("text", ["abc", "0", "-3", "400", "nan"])
def test_a_bad_lifetime_names_its_setting(monkeypatch, text):
    monkeypatch.setenv(ENV_TTL, text)
    with pytest.raises(ClassError) as e:
        Limits.from_env()
    assert e.value.field == ENV_TTL and "365" in e.value.allowed


@pytest.mark.parametrize(
    ("name", "lessons", "field"),
    [
        ("", LESSONS, "name"),
        ("x" * 81, LESSONS, "name"),
        ("c", {}, "lessons"),
        ("c", {"Basics!": ["a"]}, "lessons"),
        ("c", {"basics": "basics.scores"}, "lessons['basics']"),
        ("c", {"basics": ["a", "a"]}, "lessons['basics']"),
        ("c", {"basics": ["a"], "more": ["a"]}, "lessons['more']"),
        ("c", {"basics": [f"e{i}" for i in range(101)]}, "lessons"),
    ],
)
def test_a_bad_class_is_refused_naming_the_field(db, name, lessons, field):
    with pytest.raises(ClassError) as e:
        db.create_class(name, lessons=lessons)
    assert e.value.field == field
    assert raw(db, "SELECT count(*) FROM classes") == [(0,)]


def test_the_csv_says_how_each_exercise_ended_and_opens_as_utf8_in_a_spreadsheet(db):
    info = db.create_class("c", lessons=LESSONS)
    chloe = db.join(info.code, "Chloé")
    for seed, right, attempts, shown in ((1, True, 1, False), (2, False, 3, False), (3, False, 2, True)):
        db.record_answer(
            info.code,
            chloe,
            "basics.scores",
            seed,
            "k1",
            right=right,
            attempts=attempts,
            seconds=1.0,
            shown=shown,
        )
    text_ = db.class_csv(info.teacher_token)
    assert text_.encode("utf-8").startswith(b"\xef\xbb\xbf")  # the byte-order mark Excel reads
    got = rows(text_)
    assert [(r["nickname"], r["seed"], r["ended"]) for r in got] == [
        ("Chloé", "1", "right first time"),
        ("Chloé", "2", "right on a later try"),
        ("Chloé", "3", "answer shown"),
    ]
    with pytest.raises(ClassError) as e:
        db.record_answer(
            info.code, chloe, "basics.scores", 4, "k1", right=True, attempts=1, seconds=1.0, shown=True
        )
    assert e.value.field == "shown"
