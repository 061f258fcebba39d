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
    "ended",
)
# How an exercise ended, from `right_first` and `shown` (None: stored before `shown` was recorded).
ENDED = {True: "right first time", False: "right on a later try", None: "answer shown"}
BOM = "\ufeff"  # so a spreadsheet reads the file as UTF-8 ("Chloé", not "ChloÃ©")
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
    """One student: exercises answered, how many of them right the first time, whether the
    teacher removed them (their answers kept), and the exercise they are trying now with its wrong
    tries so far (None: none unfinished)."""

    nickname: str
    answered: int
    right_first: int
    removed: bool = False
    working_on: str | None = None
    wrong_tries: int = 0


@dataclass(frozen=True)
class Progress:
    """One exercise a student stored, as the student may read it back (never the answer's text)."""

    exercise_id: str
    seed: int
    right_first: bool
    attempts: int
    shown: bool | None


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
    joining_open: bool = True


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
    students: Sequence[tuple[int, str, bool, str | None, int | None]], firsts: Iterable[First]
) -> tuple[StudentProgress, ...]:
    """Per student `(id, nickname, removed, working on, wrong tries)`: exercises answered, right first
    time, what they are on. A removed student is listed only while answers of theirs are kept."""
    answered, right = Counter(), Counter()
    for f in firsts:
        answered[f.student_id] += 1
        right[f.student_id] += f.right
    return tuple(
        StudentProgress(nick, answered[sid], right[sid], removed, working, tries or 0)
        for sid, nick, removed, working, tries in students
        if not removed or answered[sid]
    )


def ended(right_first: bool, shown: bool | None) -> str:
    """How an exercise ended, in words ("" for a record stored before that was kept)."""
    if right_first:
        return ENDED[True]
    if shown is None:
        return ""
    return ENDED[None] if shown else ENDED[False]


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
    """Rows in `CSV_COLUMNS` order, the last being `shown` (the CSV's `ended` is said from it and
    `right_first_time`) → CSV text with a byte-order mark and a header (times as ISO 8601 UTC)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for *row, shown in rows:
        cells = [v.isoformat() if isinstance(v, datetime) else _cell(v) for v in row]
        writer.writerow([*cells, ended(row[CSV_COLUMNS.index("right_first_time")], shown)])
    return BOM + out.getvalue()
