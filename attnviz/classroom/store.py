"""The class database: create a class, join it, record answers, and the teacher's view.

What each key allows (docs/security.md, "Classes"):
- the **class code** lets a student join under a nickname and write that student's answers;
  no call taking a code returns anything of another student's;
- the **teacher token** (only its SHA-256 is stored) reads the class's view and CSV;
- every write is bounded (students per class, answers per student, a token-bucket allowance
  per student, live classes per server) and a class expires after `Limits.ttl_days`;
- the teacher token also closes and reopens joining and removes a student (their answers kept
  or deleted); joining and creating are limited per visitor, per class and per server
  (`attnviz.classroom.admission`).

Writes lock what they read before writing (the class row when joining, the student row when
recording; PostgreSQL `FOR UPDATE`, SQLite's `BEGIN IMMEDIATE`), so the bounds hold under
concurrent writers in several threads or server replicas.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from attnviz.classroom import models as m
from attnviz.classroom.admission import check_creation, check_new_student, take_allowance, visitor_hash
from attnviz.classroom.db import default_url, make_engine, migrate, serialise, writing
from attnviz.classroom.rules import (
    ALPHABET,
    CODE_LENGTH,
    AccessDenied,
    AlreadyStored,
    ClassError,
    Limits,
    check_code,
    check_lessons,
    check_name,
    check_nickname,
    check_submission,
    check_token,
    check_try,
)
from attnviz.classroom.view import (
    ClassView,
    First,
    Progress,
    answers_csv,
    exercise_stats,
    student_progress,
)

Lessons = tuple[tuple[str, tuple[str, ...]], ...]
HIDDEN = "(hidden)"  # a token is never echoed into a message or a log


@dataclass(frozen=True)
class ClassInfo:
    """A new class: `code` for the students, `teacher_token` for the teacher (shown once: only
    its hash is stored), `expires_at` in UTC."""

    code: str
    name: str
    teacher_token: str
    expires_at: datetime
    lessons: Lessons

    def __repr__(self) -> str:  # keeps the token out of logs and tracebacks
        return f"ClassInfo(code={self.code!r}, name={self.name!r}, teacher_token={HIDDEN!r}, ...)"


@dataclass(frozen=True)
class Student:
    """A student of a class, as `join` returned them: the handle `record_answer` takes."""

    code: str
    nickname: str


def token_hash(token: str) -> str:
    """SHA-256 hex of a teacher token (a 256-bit random token needs no slow password hash)."""
    return hashlib.sha256(token.encode()).hexdigest()


def lessons_of(stored: list) -> Lessons:
    return tuple((lesson, tuple(ids)) for lesson, ids in stored)


def exercise_ids(lessons: Lessons) -> tuple[str, ...]:
    return tuple(ex for _, ids in lessons for ex in ids)


class ClassDB:
    """The class database at `url` (default: `ATTNVIZ_CLASS_DB`, else SQLite in the user's data
    folder), migrated to the newest schema when opened. Safe to share between threads.

    Args:
        url: an SQLAlchemy URL.
        limits: the bounds (default: `Limits.from_env()`).
        clock: seconds since the epoch (tests pass a clock they move).
    """

    def __init__(
        self, url: str | None = None, *, limits: Limits | None = None, clock: Callable[[], float] = time.time
    ):
        self.url = url or default_url()
        self.limits = limits or Limits.from_env()
        self._clock = clock
        self.engine = make_engine(self.url)
        migrate(self.engine)
        # The teacher's view reads several tables: on PostgreSQL one snapshot for all of them
        # (SQLite's read transaction is one snapshot already).
        pg = self.engine.dialect.name == "postgresql"
        reader = self.engine.execution_options(isolation_level="REPEATABLE READ") if pg else self.engine
        self._read = sessionmaker(reader)
        self._write = sessionmaker(writing(self.engine))
        self.purge_expired()

    def close(self) -> None:
        """Close the pool's connections (a later call opens new ones)."""
        self.engine.dispose()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    # -- the teacher ------------------------------------------------------------------------------

    def create_class(
        self, name: str, *, lessons: Mapping[str, Sequence[str]], visitor: str | None = None
    ) -> ClassInfo:
        """A new class of `lessons` (`{lesson id: exercise ids}`, the only exercises it records),
        created by `visitor` (a key of the browser asking; None: not limited per visitor).

        Raises:
            RateLimited: this visitor's or the server's creations in `Limits.creation_window_s`.
            ClassError: a bad name or lessons, or `Limits.classes` live classes already.
        """
        name, stored = check_name(name), check_lessons(lessons)
        creator = visitor_hash(visitor)
        token, now = secrets.token_urlsafe(32), self.now()
        expires = now + timedelta(days=self.limits.ttl_days)
        with self._write.begin() as s:
            serialise(s.connection(), "create")  # the count and the code's uniqueness hold
            self._purge(s, now)
            check_creation(s, self.limits, creator, now)
            live = s.scalar(select(func.count()).select_from(m.Class))
            if live >= self.limits.classes:
                raise ClassError(
                    "classes", live, f"at most {self.limits.classes:,} live classes on this server"
                )
            code = self._new_code(s)
            s.add(
                m.Class(
                    code=code,
                    name=name,
                    lessons=stored,
                    teacher_hash=token_hash(token),
                    created_at=now,
                    expires_at=expires,
                    creator=creator,
                )
            )
        return ClassInfo(code, name, token, expires, lessons_of(stored))

    def class_view(self, teacher_token: str) -> ClassView:
        """Per exercise the share right first time and the most common wrong answer; per student
        their progress.

        Raises:
            AccessDenied: the token is no class's, or its class has expired.
        """
        with self._read.begin() as s:
            cls = self._teacher_class(s, teacher_token)
            students = s.execute(
                select(
                    m.Student.id,
                    m.Student.nickname,
                    m.Student.removed_at.is_not(None),
                    m.Student.working_on,
                    m.Student.wrong_tries,
                )
                .where(m.Student.class_id == cls.id)
                .order_by(m.Student.id)
            ).all()
            firsts = self._firsts(s, cls.id)
            lessons = lessons_of(cls.lessons)
            return ClassView(
                cls.code,
                cls.name,
                lessons,
                cls.created_at,
                cls.expires_at,
                exercise_stats(exercise_ids(lessons), firsts),
                student_progress([tuple(r) for r in students], firsts),
                cls.joining_open,
            )

    def set_joining(self, teacher_token: str, *, open_: bool) -> None:
        """Close (`open_=False`) or reopen the class to new students; those in it stay and answer.

        Raises:
            AccessDenied: the token is no running class's.
        """
        if not isinstance(open_, bool):
            raise ClassError("open_", open_, "True (take new students) or False")
        with self._write.begin() as s:
            self._teacher_class(s, teacher_token, lock=True).joining_open = open_

    def remove_student(self, teacher_token: str, nickname: str, *, keep_answers: bool) -> None:
        """Remove `nickname` from the class: their seat is free and the nickname cannot join again;
        their stored answers stay in the view and the CSV (`keep_answers`) or are deleted.

        Raises:
            AccessDenied: the token is no running class's.
            ClassError: no student of the class has this nickname.
        """
        if not isinstance(keep_answers, bool):
            raise ClassError("keep_answers", keep_answers, "True (keep their answers) or False (delete them)")
        with self._write.begin() as s:
            cls = self._teacher_class(s, teacher_token, lock=True)
            row = s.scalar(
                select(m.Student).where(
                    m.Student.class_id == cls.id,
                    m.Student.nickname == check_nickname(nickname),
                    m.Student.removed_at.is_(None),
                )
            )
            if row is None:
                raise ClassError("nickname", nickname, "the nickname of a student in this class")
            row.removed_at = self.now()
            if not keep_answers:
                s.execute(delete(m.Answer).where(m.Answer.student_id == row.id))

    def class_csv(self, teacher_token: str) -> str:
        """Every stored answer of the class as CSV (`view.CSV_COLUMNS`), oldest first."""
        with self._read.begin() as s:
            cls = self._teacher_class(s, teacher_token)
            a = m.Answer
            rows = s.execute(
                select(
                    m.Student.nickname,
                    a.exercise_id,
                    a.seed,
                    a.answer,
                    a.right_first,
                    a.attempts,
                    a.seconds,
                    a.answered_at,
                    a.shown,
                )
                .join(m.Student, m.Student.id == a.student_id)
                .where(m.Student.class_id == cls.id)
                .order_by(a.id)
            ).all()
        return answers_csv(rows)

    def purge_expired(self) -> int:
        """Delete the classes that have expired, with their students and answers; how many."""
        with self._write.begin() as s:
            return self._purge(s, self.now())

    # -- the students -----------------------------------------------------------------------------

    def join(self, code: str, nickname: str, *, visitor: str | None = None) -> Student:
        """The student `nickname` (trimmed) of the class `code`, added if new: the same nickname
        in the same class is the same student, so a reload loses nothing. `visitor` is a key of
        the browser joining (None: not limited per visitor); `admission` says who may join.

        Raises:
            AccessDenied: no running class has this code, or the teacher removed this nickname.
            RateLimited: new students faster than the class's joining allowance.
            ClassError: a bad nickname; a new one when joining is closed, the class has
                `Limits.students`, or this visitor joined it under another nickname.
        """
        code, nickname = check_code(code), check_nickname(nickname)
        key, now = visitor_hash(visitor), self.now()
        with self._write.begin() as s:
            self._purge(s, now)
            cls = self._running_class(s, code, now, lock=True)  # joins to one class queue up
            known = s.scalar(
                select(m.Student).where(m.Student.class_id == cls.id, m.Student.nickname == nickname)
            )
            if known is not None and known.removed_at is not None:
                raise AccessDenied(
                    "nickname", nickname, "a nickname the teacher has not removed from this class"
                )
            if known is None:
                check_new_student(s, self.limits, cls, nickname, key, now)
                burst = float(self.limits.burst)
                s.add(
                    m.Student(
                        class_id=cls.id,
                        nickname=nickname,
                        joined_at=now,
                        allowance=burst,
                        allowance_at=now,
                        visitor=key,
                    )
                )
        return Student(code, nickname)

    def returning(self, code: str, nickname: str, *, visitor: str) -> Student | None:
        """Student `nickname` of `code` if the browser `visitor` joined as them (a reload), else None."""
        code, nickname, key = check_code(code), check_nickname(nickname), visitor_hash(visitor)
        with self._read.begin() as s:
            who = select(m.Student.visitor, m.Student.removed_at).where(m.Student.nickname == nickname)
            row = s.execute(who.where(m.Student.class_id == self._running_class(s, code, self.now()).id))
            same = key is not None and tuple(row.first() or ()) == (key, None)
        return Student(code, nickname) if same else None

    def progress(self, code: str, student: Student) -> tuple[Progress, ...]:
        """What `student` has stored in the class `code` (theirs only, never an answer's text): per
        exercise and seed, right first time, the attempts and whether the answer was shown — what a
        student coming back needs to see their steps done.

        Raises:
            AccessDenied: no running class has this code, or `student` is not in it.
        """
        code = check_code(code)
        if not isinstance(student, Student) or student.code != code:
            raise ClassError("student", student, f"the Student that join({code!r}, nickname) returned")
        with self._read.begin() as s:
            cls = self._running_class(s, code, self.now())
            a = m.Answer
            rows = s.execute(
                select(a.exercise_id, a.seed, a.right_first, a.attempts, a.shown)
                .join(m.Student, m.Student.id == a.student_id)
                .where(
                    m.Student.class_id == cls.id,
                    m.Student.nickname == student.nickname,
                    m.Student.removed_at.is_(None),
                )
                .order_by(a.id)
            ).all()
        return tuple(Progress(*r) for r in rows)

    def record_answer(
        self,
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
        """Store `student`'s graded exercise: the first answer (as text), whether it was right,
        the attempts until right, the seconds it took and whether it ended with the answer shown.
        Nothing is stored when it is refused.

        Raises:
            AccessDenied: no running class has this code, or `student` has not joined it.
            AlreadyStored: this student's answer to this exercise and seed is stored already.
            RateLimited: answers faster than `Limits.rate` per second after a burst of `Limits.burst`.
            ClassError: a malformed field (named), or `Limits.answers` stored for this student.
        """
        code = check_code(code)
        if not isinstance(student, Student) or student.code != code:
            raise ClassError("student", student, f"the Student that join({code!r}, nickname) returned")
        sub = check_submission(exercise_id, seed, answer, right, attempts, seconds, shown)
        now = self.now()
        with self._write.begin() as s:
            cls = self._running_class(s, code, now)
            ids = exercise_ids(lessons_of(cls.lessons))
            if sub.exercise_id not in ids:
                raise ClassError(
                    "exercise_id", sub.exercise_id, f"one of this class's exercises: {', '.join(ids)}"
                )
            row = self._student_row(s, cls, student)
            self._check_new(s, row, sub)
            take_allowance(row, self.limits, now)
            if row.working_on == sub.exercise_id:  # it ended: no longer stuck on it
                row.working_on, row.wrong_tries, row.working_at = None, None, now
            s.add(
                m.Answer(
                    student_id=row.id,
                    exercise_id=sub.exercise_id,
                    seed=sub.seed,
                    answer=sub.answer,
                    right_first=sub.right,
                    attempts=sub.attempts,
                    seconds=sub.seconds,
                    answered_at=now,
                    shown=sub.shown,
                )
            )

    def record_try(self, code: str, student: Student, exercise_id: str, wrong_tries: int) -> None:
        """Note that `student` is on `exercise_id` after `wrong_tries` wrong tries (the teacher's live
        view shows a stuck student before they finish; cleared when the exercise is stored). Spends
        one answer of the student's allowance; returns nothing. Raises as `record_answer`."""
        code = check_code(code)
        if not isinstance(student, Student) or student.code != code:
            raise ClassError("student", student, f"the Student that join({code!r}, nickname) returned")
        exercise_id, tries = check_try(exercise_id, wrong_tries)
        now = self.now()
        with self._write.begin() as s:
            cls = self._running_class(s, code, now)
            if exercise_id not in exercise_ids(lessons_of(cls.lessons)):
                raise ClassError("exercise_id", exercise_id, "one of this class's exercises")
            row = self._student_row(s, cls, student)
            take_allowance(row, self.limits, now)
            row.working_on, row.wrong_tries, row.working_at = exercise_id, tries, now

    # -- inside a transaction ---------------------------------------------------------------------

    def _student_row(self, s: Session, cls: m.Class, student: Student) -> m.Student:
        """The joined, not removed, student's row, locked for this transaction."""
        row = s.scalar(
            select(m.Student)
            .where(
                m.Student.class_id == cls.id,
                m.Student.nickname == student.nickname,
                m.Student.removed_at.is_(None),
            )
            .with_for_update()
        )
        if row is None:
            raise AccessDenied("student", student.nickname, "a nickname that joined this class")
        return row

    def _new_code(self, s: Session) -> str:
        for _ in range(20):  # 32**6 ≈ 1e9 codes for at most Limits.classes: a clash is rare
            code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
            if s.scalar(select(m.Class.id).where(m.Class.code == code)) is None:
                return code
        raise ClassError("code", None, "a free class code: none found in 20 draws, try again")

    def _running_class(self, s: Session, code: str, now: datetime, *, lock: bool = False) -> m.Class:
        query = select(m.Class).where(m.Class.code == code)
        cls = s.scalar(query.with_for_update() if lock else query)
        if cls is None:
            raise AccessDenied("code", code, "the code of a running class (ask your teacher)")
        if cls.expires_at <= now:
            raise AccessDenied(
                "code", code, f"a running class; this one ended on {cls.expires_at:%Y-%m-%d %H:%M} UTC"
            )
        return cls

    def _teacher_class(self, s: Session, token: str, *, lock: bool = False) -> m.Class:
        allowed = "the token of a running class's teacher link"
        digest = token_hash(check_token(token))
        query = select(m.Class).where(m.Class.teacher_hash == digest)
        cls = s.scalar(query.with_for_update() if lock else query)
        # The lookup compares hashes, which a guesser cannot steer; the final comparison is constant-time.
        if cls is None or not hmac.compare_digest(cls.teacher_hash, digest):
            raise AccessDenied("teacher_token", token, allowed, value_text=HIDDEN)
        if cls.expires_at <= self.now():
            raise AccessDenied(
                "teacher_token",
                token,
                f"{allowed}; class {cls.code} ended on {cls.expires_at:%Y-%m-%d} and is deleted",
                value_text=HIDDEN,
            )
        return cls

    def _check_new(self, s: Session, row: m.Student, sub) -> None:
        a = m.Answer
        same = select(a.id).where(
            a.student_id == row.id, a.exercise_id == sub.exercise_id, a.seed == sub.seed
        )
        if s.scalar(same) is not None:
            raise AlreadyStored(
                "exercise_id",
                f"{sub.exercise_id} (seed {sub.seed})",
                "one first answer per exercise and seed: this one is stored already",
            )
        count = s.scalar(select(func.count()).select_from(a).where(a.student_id == row.id))
        if count >= self.limits.answers:
            raise ClassError("answers", count, f"at most {self.limits.answers} answers per student")

    def _firsts(self, s: Session, class_id: int) -> list[First]:
        """Each student's first record of each exercise (the lowest id, whatever the seed)."""
        a = m.Answer
        first_ids = (
            select(func.min(a.id))
            .join(m.Student, m.Student.id == a.student_id)
            .where(m.Student.class_id == class_id)
            .group_by(a.student_id, a.exercise_id)
        )
        rows = s.execute(
            select(a.student_id, a.exercise_id, a.answer, a.right_first).where(a.id.in_(first_ids))
        )
        return [First(*r) for r in rows]

    def _purge(self, s: Session, now: datetime) -> int:
        # Students and answers go with their class (ON DELETE CASCADE).
        result = s.execute(
            delete(m.Class).where(m.Class.expires_at <= now).execution_options(synchronize_session=False)
        )
        return result.rowcount
