"""A class's own instances of the lessons (issue 46, point 4): the seed a class's exercises are drawn
from is an HMAC of the link's seed keyed by the class's stored teacher hash — not the public seed, not a
function of the class code and the seed alone — on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from sqlalchemy import update

from attnviz import classroom
from attnviz.classroom import AccessDenied, ClassError
from attnviz.classroom import models as m
from attnviz.classroom.instances import instance_seed
from attnviz.lessons.core import MAX_SEED
from tests.classroom.conftest import LESSONS

SEEDS = range(200)


def hmac_fold(teacher_token: str, seed: int) -> int:
    """The instance as the design states it, computed here with hashlib and hmac alone."""
    key = hashlib.sha256(teacher_token.encode()).digest()
    mac = hmac.new(key, b"attnviz lesson instance " + str(seed).encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:8], "big") % (MAX_SEED + 1)


def test_the_instance_is_the_teacher_keyed_hmac_of_the_seed_and_rarely_the_public_seed(db):
    info = db.create_class("A", lessons=LESSONS)
    drawn = [instance_seed(db, info.code, s) for s in SEEDS]
    assert drawn == [hmac_fold(info.teacher_token, s) for s in SEEDS]
    assert all(0 <= d <= MAX_SEED for d in drawn) and len(set(drawn)) >= len(SEEDS) - 1
    assert sum(d != s for d, s in zip(drawn, SEEDS, strict=True)) >= len(SEEDS) - 2
    assert drawn == [instance_seed(db, info.code.lower(), s) for s in SEEDS]  # the same class, read again


def test_two_classes_with_the_same_seed_get_different_instances(db):
    a, b = db.create_class("A", lessons=LESSONS), db.create_class("B", lessons=LESSONS)
    same = sum(instance_seed(db, a.code, s) == instance_seed(db, b.code, s) for s in SEEDS)
    assert same <= 2


def test_the_code_and_the_seed_alone_do_not_give_the_instance(db):
    """The same code and seed with another teacher hash stored give another instance: the instance is
    keyed by the hash, which no student sees."""
    info = db.create_class("A", lessons=LESSONS)
    before = [instance_seed(db, info.code, s) for s in SEEDS]
    other = hashlib.sha256(b"another teacher token").hexdigest()
    with db.engine.begin() as c:
        c.execute(update(m.Class).where(m.Class.code == info.code).values(teacher_hash=other))
    after = [instance_seed(db, info.code, s) for s in SEEDS]
    assert sum(x == y for x, y in zip(before, after, strict=True)) <= 2


def test_no_running_class_or_a_bad_seed_gives_no_instance_and_says_which_field(db, clock):
    info = db.create_class("A", lessons=LESSONS)
    for code, seed, error, field in (
        ("ZZZZZZ", 1, AccessDenied, "code"),
        ("abc", 1, ClassError, "code"),
        (info.code, MAX_SEED + 1, ClassError, "seed"),
        (info.code, -1, ClassError, "seed"),
        (info.code, "1", ClassError, "seed"),
    ):
        with pytest.raises(error) as e:
            instance_seed(db, code, seed)
        assert e.value.field == field and e.value.allowed
    clock.advance(10**8)  # the class has ended
    with pytest.raises(AccessDenied) as e:
        instance_seed(db, info.code, 1)
    assert e.value.field == "code"


def test_the_module_function_reads_the_default_database(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNVIZ_CLASS_DB", f"sqlite:///{tmp_path / 'classes.sqlite'}")
    try:
        info = classroom.create_class("A", lessons=LESSONS)
        assert classroom.instance_seed(info.code, 7) == hmac_fold(info.teacher_token, 7)
    finally:
        classroom.default_db().close()
