"""A class of 30 students answering at once (one thread each), on SQLite and on PostgreSQL: the
teacher's view must show exactly the shares and most common wrong answers of the plan the test
drew, counted here by the test itself."""

from __future__ import annotations

import csv
import io
import threading
from collections import Counter

import numpy as np

from attnviz.classroom import Student
from tests.classroom.conftest import LESSONS
from tests.conftest import SEED

STUDENTS = 30
EXERCISES = [ex for ids in LESSONS.values() for ex in ids]
WRONG = ("A", "B", "C")  # wrong answers, the likeliest one different per exercise


def plan(rng: np.random.Generator) -> dict[str, list[tuple[str, int, str, bool]]]:
    """Per nickname, in the order sent: (exercise, seed, first answer, right first time).
    Some skip an exercise; every fifth also does a second variant of one, after the first."""
    out = {}
    for i in range(STUDENTS):
        nick = f"student {i:02d}"
        rows = []
        for j in rng.permutation(len(EXERCISES)):
            if rng.random() < 0.1:
                continue  # not reached
            right = bool(rng.random() < (0.2, 0.5, 0.8, 0.35)[j])
            answer = "right" if right else str(rng.choice(WRONG, p=np.roll((0.6, 0.3, 0.1), j)))
            rows.append((EXERCISES[j], 100 * i + int(j), answer, right))
        if i % 5 == 0 and rows:
            ex, seed, _, right = rows[0]
            rows.append((ex, seed + 50, "right" if not right else "A", not right))  # counts for nothing
        out[nick] = rows
    return out


def expected(sent: dict) -> tuple[dict, dict]:
    """Per exercise (students, right, most common wrong, its count) and per student (answered, right),
    from each student's first record of an exercise; ties between wrong answers go to text order."""
    per_exercise, per_student = {}, {}
    firsts = {nick: {} for nick in sent}
    for nick, rows in sent.items():
        for ex, _, answer, right in rows:
            firsts[nick].setdefault(ex, (answer, right))
        per_student[nick] = (len(firsts[nick]), sum(r for _, r in firsts[nick].values()))
    for ex in EXERCISES:
        got = [f[ex] for f in firsts.values() if ex in f]
        wrong = Counter(a for a, r in got if not r)
        top = sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0]))[:1] or [(None, 0)]
        per_exercise[ex] = (len(got), sum(r for _, r in got), *top[0])
    return per_exercise, per_student


def test_thirty_students_at_once_and_the_teachers_view(db):
    sent = plan(np.random.default_rng(SEED))
    info = db.create_class("a class of 30", lessons=LESSONS)
    start, errors = threading.Barrier(STUDENTS), []

    def student(nick: str) -> None:
        try:
            start.wait()
            me = db.join(info.code, nick)
            assert db.join(info.code, nick) == me == Student(info.code, nick)  # a reload: the same student
            for ex, seed, answer, right in sent[nick]:
                db.record_answer(
                    info.code, me, ex, seed, answer, right=right, attempts=1 if right else 2, seconds=30.0
                )
        except BaseException as e:  # reported by the main thread
            errors.append((nick, e))

    threads = [threading.Thread(target=student, args=(nick,)) for nick in sent]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    per_exercise, per_student = expected(sent)
    view = db.class_view(info.teacher_token)
    got = {
        e.exercise_id: (e.students, e.right_first, e.common_wrong, e.common_wrong_count)
        for e in view.exercises
    }
    assert got == per_exercise
    for e in view.exercises:
        assert e.share_right == e.right_first / e.students
    assert {p.nickname: (p.answered, p.right_first) for p in view.students} == per_student
    assert len({e.common_wrong for e in view.exercises}) > 1, (
        "the plan should not make one answer win everywhere"
    )
    stored = list(csv.DictReader(io.StringIO(db.class_csv(info.teacher_token).removeprefix("\ufeff"))))
    assert Counter(
        (r["nickname"], r["exercise_id"], int(r["seed"]), r["first_answer"]) for r in stored
    ) == Counter((nick, ex, seed, answer) for nick, rows in sent.items() for ex, seed, answer, _ in rows)
