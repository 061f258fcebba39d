"""What the class database accepts: codes, nicknames, submissions, and the limits on them.

Every check here runs before the database is touched, and refuses with a `ClassError` (a
`attnviz.errors.SpecError`) that names the field, the value received and what is allowed.
Nothing in this module knows about SQL.
"""

from __future__ import annotations

import math
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from attnviz.errors import SpecError
from attnviz.lessons.core import MAX_SEED

# Class codes: typed by students from a projector, so no 0/O and 1/I to confuse.
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
MAX_NAME = 80  # a class's name, characters
MAX_NICKNAME = 40
MAX_ANSWER = 200  # a first answer as text, characters
MAX_ATTEMPTS = 1_000
MAX_SECONDS = 86_400.0  # one exercise's time, a day at most
MAX_TOKEN = 100  # a teacher token is 43 characters; longer input is refused before it is hashed
MAX_LESSONS, MAX_EXERCISES = 8, 100  # per class
ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")  # lesson and exercise ids
ENV_TTL = "ATTNVIZ_CLASS_TTL_DAYS"


class ClassError(SpecError):
    """A refused class operation: `field` got `value`; `allowed` says what would be accepted."""


class AccessDenied(ClassError):
    """An unknown or expired class code or teacher token: nothing is read or written."""


class AlreadyStored(ClassError):
    """The same first answer (student, exercise, seed) sent again: the stored one stays."""


class RateLimited(ClassError):
    """Answers sent faster than a student's allowance; `retry_after` seconds until the next fits."""

    def __init__(self, field: str, value: Any, allowed: str, *, retry_after: float):
        super().__init__(field, value, allowed)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Limits:
    """The bounds on what one class can store, and how fast.

    Attributes:
        students: students per class.
        answers: stored answers per student.
        rate: answers per second a student's allowance refills by.
        burst: answers a student may send at once (the allowance's size).
        classes: classes alive at once on the server.
        ttl_days: a class's lifetime; after it, writes are refused and the class is purged.
        join_rate, join_burst: new students per second a class's joining allowance refills by, and
            how many may join at once (a class arriving together; a script filling the seats waits).
        created_per_visitor: classes one visitor (browser) may create per `creation_window_s`.
        created_per_server: classes the whole server (every replica) creates per `creation_window_s`.
        creation_window_s: the window of both creation limits, in seconds.
    """

    students: int = 200
    answers: int = 500
    rate: float = 2.0
    burst: int = 10
    classes: int = 1_000
    ttl_days: float = 30.0
    join_rate: float = 0.2
    join_burst: int = 60
    created_per_visitor: int = 3
    created_per_server: int = 60
    creation_window_s: float = 3_600.0

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, with `ttl_days` from `ATTNVIZ_CLASS_TTL_DAYS` when it is set."""
        text = os.environ.get(ENV_TTL, "").strip()
        if not text:
            return cls()
        try:
            days = float(text)
        except ValueError:
            days = math.nan
        if not 0 < days <= 365:
            raise ClassError(ENV_TTL, text, "a number of days in (0, 365]")
        return cls(ttl_days=days)


def _text(field: str, value: Any, limit: int, *, newlines: bool = False) -> str:
    """`value` as text of 1 … `limit` characters without control characters (tab and newline
    allowed where `newlines`): PostgreSQL refuses NUL, and a nickname is shown on one line."""
    allowed = f"text of 1 … {limit} characters" + ("" if newlines else " on one line")
    if not isinstance(value, str):
        raise ClassError(field, value, allowed)
    text = value if newlines else value.strip()  # an answer is kept as typed, a nickname trimmed
    ok = set("\t\n") if newlines else set()
    # A name also refuses invisible and direction-changing characters (U+200B, U+202E: category Cf),
    # so two nicknames that look the same in the teacher's table are the same text.
    refused = ("Cc", "Cs") if newlines else ("Cc", "Cs", "Cf")
    if not newlines:
        allowed += ", without invisible or direction-changing characters"
    bad = any(unicodedata.category(c) in refused and c not in ok for c in text)
    if bad or not text.strip() or len(text) > limit:
        raise ClassError(field, value, allowed)
    return text


def check_code(code: Any) -> str:
    """A class code as stored: upper case, spaces and dashes dropped (`"ab-c 234"` → `"ABC234"`)."""
    allowed = f"{CODE_LENGTH} characters from {ALPHABET}"
    if not isinstance(code, str):
        raise AccessDenied("code", code, allowed)
    cleaned = re.sub(r"[\s-]", "", code).upper()
    if len(cleaned) != CODE_LENGTH or any(c not in ALPHABET for c in cleaned):
        raise AccessDenied("code", code, allowed)
    return cleaned


def check_nickname(nickname: Any) -> str:
    """A nickname trimmed of surrounding spaces, otherwise as given (never interpreted)."""
    return _text("nickname", nickname, MAX_NICKNAME)


def check_name(name: Any) -> str:
    return _text("name", name, MAX_NAME)


def check_token(token: Any) -> str:
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN:
        raise AccessDenied("teacher_token", token, "the token of a teacher link", value_text="(hidden)")
    return token


def check_lessons(lessons: Any) -> list[list]:
    """`{lesson id: exercise ids}` → `[[lesson, [ids, …]], …]` (JSON-ready, order kept)."""
    allowed = f"a mapping of up to {MAX_LESSONS} lesson ids to their exercise ids ({ID.pattern}, unique)"
    if not isinstance(lessons, Mapping) or not 0 < len(lessons) <= MAX_LESSONS:
        raise ClassError("lessons", lessons, allowed)
    out, seen = [], set()
    for lesson, ids in lessons.items():
        if not isinstance(lesson, str) or not ID.fullmatch(lesson):
            raise ClassError("lessons", lesson, allowed)
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not ids:
            raise ClassError(f"lessons[{lesson!r}]", ids, "a non-empty list of exercise ids")
        for ex in ids:
            if not isinstance(ex, str) or not ID.fullmatch(ex) or ex in seen:
                raise ClassError(f"lessons[{lesson!r}]", ex, allowed)
            seen.add(ex)
        out.append([lesson, list(ids)])
    if len(seen) > MAX_EXERCISES:
        raise ClassError("lessons", len(seen), f"at most {MAX_EXERCISES} exercises in a class")
    return out


def _integer(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or not low <= value <= high:
        raise ClassError(field, value, f"an integer in {low:,} … {high:,}")
    return int(value)


def check_seed(seed: Any) -> int:
    """A lesson seed (`attnviz.lessons.MAX_SEED` at most)."""
    return _integer("seed", seed, 0, MAX_SEED)


@dataclass(frozen=True)
class Submission:
    """One student's graded exercise, checked: what `record_answer` stores."""

    exercise_id: str
    seed: int
    answer: str
    right: bool
    attempts: int
    seconds: float
    shown: bool = False


def check_submission(exercise_id, seed, answer, right, attempts, seconds, shown=False) -> Submission:
    """Each field's type and range (whether the class has the exercise is the database's check).

    `right` is whether the first answer was right; `attempts` the answers given until right
    (or until the reveal), so a right first answer is one attempt; `shown` whether the exercise
    ended with the answer shown rather than right on a later try.
    """
    if not isinstance(shown, bool) or (shown and right is True):
        raise ClassError(
            "shown", shown, "True or False (the answer shown), False when the first answer was right"
        )
    if not isinstance(exercise_id, str) or not ID.fullmatch(exercise_id):
        raise ClassError("exercise_id", exercise_id, f"an exercise id of this class ({ID.pattern})")
    seed = check_seed(seed)
    answer = _text("answer", answer, MAX_ANSWER, newlines=True)
    if not isinstance(right, bool):
        raise ClassError("right", right, "True or False (whether the first answer was right)")
    attempts = _integer("attempts", attempts, 1, MAX_ATTEMPTS)
    if right and attempts != 1:
        raise ClassError("attempts", attempts, "1 when the first answer was right")
    if isinstance(seconds, bool) or not isinstance(seconds, Real) or not 0 <= seconds <= MAX_SECONDS:
        raise ClassError("seconds", seconds, f"a number of seconds in 0 … {MAX_SECONDS:,.0f}")
    return Submission(exercise_id, seed, answer, right, attempts, float(seconds), shown)


def check_try(exercise_id: Any, wrong_tries: Any) -> tuple[str, int]:
    """An unfinished exercise's id and its wrong tries so far (`ClassDB.record_try`)."""
    if not isinstance(exercise_id, str) or not ID.fullmatch(exercise_id):
        raise ClassError("exercise_id", exercise_id, f"an exercise id of this class ({ID.pattern})")
    return exercise_id, _integer("wrong_tries", wrong_tries, 1, MAX_ATTEMPTS)
