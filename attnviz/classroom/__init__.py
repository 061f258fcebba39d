"""Classes, students and their graded answers, in a real database (issue 32 §2).

A teacher creates a class and gets a short code for the students and a private token for
themselves; students join with the code and a nickname (no account) and each graded exercise is
stored; the teacher's view shows, per exercise, the share right the first time and the most
common wrong answer, per student their progress, and a CSV of everything. No Streamlit here.

    from attnviz import classroom
    info = classroom.create_class("Year 2, group B", lessons={"basics": ["basics.scores", "basics.scaling"]})
    me = classroom.join(info.code, "Ada")
    classroom.record_answer(info.code, me, "basics.scores", 7, "(0.2, 0.5)", right=False, attempts=2, seconds=41.0)
    classroom.class_view(info.teacher_token).exercises[0].share_right   # 0.0

The functions here use one `ClassDB` per process for the URL in `ATTNVIZ_CLASS_DB` (default:
SQLite in the user's data folder); `ClassDB(url, limits=..., clock=...)` opens another.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from attnviz.classroom import instances
from attnviz.classroom.db import ENV_URL, default_url
from attnviz.classroom.links import qr_svg, student_link, teacher_link
from attnviz.classroom.rules import ENV_TTL, AccessDenied, AlreadyStored, ClassError, Limits, RateLimited
from attnviz.classroom.store import ClassDB, ClassInfo, Student
from attnviz.classroom.view import ClassView, ExerciseStats, Progress, StudentProgress

_OPEN: dict[str, ClassDB] = {}
_LOCK = threading.Lock()


def default_db() -> ClassDB:
    """This process's database for the current `ATTNVIZ_CLASS_DB` (opened, and migrated, once)."""
    url = default_url()
    with _LOCK:
        if url not in _OPEN:
            _OPEN[url] = ClassDB(url)
        return _OPEN[url]


def create_class(name: str, *, lessons: Mapping[str, Sequence[str]], visitor: str | None = None) -> ClassInfo:
    """`ClassDB.create_class` on `default_db()`."""
    return default_db().create_class(name, lessons=lessons, visitor=visitor)


def join(code: str, nickname: str, *, visitor: str | None = None) -> Student:
    """`ClassDB.join` on `default_db()`."""
    return default_db().join(code, nickname, visitor=visitor)


def returning(code: str, nickname: str, *, visitor: str) -> Student | None:
    """`ClassDB.returning` on `default_db()`."""
    return default_db().returning(code, nickname, visitor=visitor)


def instance_seed(code: str, seed: int) -> int:
    """`attnviz.classroom.instances.instance_seed` on `default_db()`: the seed class `code`'s exercises of
    sheet `seed` are drawn from (keyed by its teacher hash, so only the server computes it)."""
    return instances.instance_seed(default_db(), code, seed)


def progress(code: str, student: Student) -> tuple[Progress, ...]:
    """`ClassDB.progress` on `default_db()`."""
    return default_db().progress(code, student)


def set_joining(teacher_token: str, *, open_: bool) -> None:
    """`ClassDB.set_joining` on `default_db()`."""
    default_db().set_joining(teacher_token, open_=open_)


def remove_student(teacher_token: str, nickname: str, *, keep_answers: bool) -> None:
    """`ClassDB.remove_student` on `default_db()`."""
    default_db().remove_student(teacher_token, nickname, keep_answers=keep_answers)


def record_answer(
    code: str,
    student: Student,
    exercise_id: str,
    seed: int,
    answer: str,
    *,
    right: bool,
    attempts: int,
    seconds: float,
    shown: bool = False,
) -> None:
    """`ClassDB.record_answer` on `default_db()`."""
    default_db().record_answer(
        code, student, exercise_id, seed, answer, right=right, attempts=attempts, seconds=seconds, shown=shown
    )


def record_try(code: str, student: Student, exercise_id: str, wrong_tries: int) -> None:
    """`ClassDB.record_try` on `default_db()`."""
    default_db().record_try(code, student, exercise_id, wrong_tries)


def class_view(teacher_token: str) -> ClassView:
    """`ClassDB.class_view` on `default_db()`."""
    return default_db().class_view(teacher_token)


def class_csv(teacher_token: str) -> str:
    """`ClassDB.class_csv` on `default_db()`."""
    return default_db().class_csv(teacher_token)


__all__ = [
    "ENV_TTL",
    "ENV_URL",
    "AccessDenied",
    "AlreadyStored",
    "ClassDB",
    "ClassError",
    "ClassInfo",
    "ClassView",
    "ExerciseStats",
    "Limits",
    "Progress",
    "RateLimited",
    "Student",
    "StudentProgress",
    "class_csv",
    "class_view",
    "create_class",
    "default_db",
    "instance_seed",
    "join",
    "progress",
    "qr_svg",
    "record_answer",
    "record_try",
    "remove_student",
    "returning",
    "set_joining",
    "student_link",
    "teacher_link",
]
