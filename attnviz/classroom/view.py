"""What a teacher sees of a class: per exercise and per student, and the CSV of every answer.

Pure functions over rows the store has read; a student's *first* record of an exercise (the
lowest id, whatever its seed) is the one that counts as "right first time".
"""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

CSV_COLUMNS = (
    "nickname",
    "exercise_id",
    "seed",
    "first_answer",
    "right_first_time",
    "attempts",
    "seconds",
    "answered_at",
)
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run a cell starting with these


@dataclass(frozen=True)
class ExerciseStats:
    """One exercise across the class.

    Attributes:
        exercise_id: the exercise.
        students: students who answered it.
        right_first: of those, how many were right the first time.
        share_right: `right_first / students` (None while nobody answered).
        common_wrong: the most common wrong first answer (ties: the first in text order), or None.
        common_wrong_count: how many gave it.
    """

    exercise_id: str
    students: int
    right_first: int
    share_right: float | None
    common_wrong: str | None
    common_wrong_count: int


@dataclass(frozen=True)
class StudentProgress:
    """One student: exercises answered and how many of them right the first time."""

    nickname: str
    answered: int
    right_first: int


@dataclass(frozen=True)
class ClassView:
    """The teacher's view of a class; exercises in the class's order, students in joining order."""

    code: str
    name: str
    lessons: tuple[tuple[str, tuple[str, ...]], ...]
    created_at: datetime
    expires_at: datetime
    exercises: tuple[ExerciseStats, ...]
    students: tuple[StudentProgress, ...]


@dataclass(frozen=True)
class First:
    """A student's first record of an exercise."""

    student_id: int
    exercise_id: str
    answer: str
    right: bool


def exercise_stats(exercise_ids: Sequence[str], firsts: Iterable[First]) -> tuple[ExerciseStats, ...]:
    """Per exercise: students who answered, right first time, and the most common wrong answer."""
    by_exercise: dict[str, list[First]] = defaultdict(list)
    for f in firsts:
        by_exercise[f.exercise_id].append(f)
    out = []
    for ex in exercise_ids:
        mine = by_exercise[ex]
        right = sum(f.right for f in mine)
        wrong = Counter(f.answer for f in mine if not f.right)
        common = min(wrong.items(), key=lambda item: (-item[1], item[0]), default=(None, 0))
        share = right / len(mine) if mine else None
        out.append(ExerciseStats(ex, len(mine), right, share, common[0], common[1]))
    return tuple(out)


def student_progress(
    students: Sequence[tuple[int, str]], firsts: Iterable[First]
) -> tuple[StudentProgress, ...]:
    """Per student `(id, nickname)`: exercises answered, right first time."""
    answered, right = Counter(), Counter()
    for f in firsts:
        answered[f.student_id] += 1
        right[f.student_id] += f.right
    return tuple(StudentProgress(nick, answered[sid], right[sid]) for sid, nick in students)


def _cell(value):
    """A text cell a spreadsheet shows as text: one starting like a formula (and not a plain
    number such as -0.5) gets a leading `'` (OWASP's advice against CSV injection; nicknames
    and answers are whatever was typed)."""
    if not isinstance(value, str) or not value.startswith(FORMULA):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def answers_csv(rows: Iterable[Sequence]) -> str:
    """Rows in `CSV_COLUMNS` order → CSV text with a header (times as ISO 8601 UTC)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([v.isoformat() if isinstance(v, datetime) else _cell(v) for v in row])
    return out.getvalue()
