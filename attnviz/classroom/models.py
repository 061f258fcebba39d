"""The class database's tables: classes, their students, and the students' graded answers.

SQLAlchemy 2 declarative models; the migrations under `migrations/versions/` create exactly
this schema (tests/classroom/test_migrations.py compares them on SQLite and PostgreSQL).
A class owns its students and a student their answers: deleting a class deletes both. A student the
teacher removed stays as a row marked `removed_at` (their nickname cannot join again, their seat is
free), with or without their answers.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, MetaData, String, UniqueConstraint, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Constraint names fixed here, so a migration can name what it alters on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator):
    """A moment in UTC: aware datetimes in and out, whether the backend keeps the zone
    (PostgreSQL's timestamptz) or not (SQLite stores the UTC wall time)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a naive datetime would be stored without its zone: {value!r}")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Class(Base):
    """A class: its code (what students type), the hash of its teacher token, its exercises, whether
    it takes new students, the allowance that rate-limits joining (a token bucket; None: full), and
    a hash of the visitor who created it (what limits one visitor's classes)."""

    __tablename__ = "classes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(6), unique=True)
    name: Mapped[str] = mapped_column(String(80))
    lessons: Mapped[list] = mapped_column(JSON)  # [[lesson id, [exercise ids, …]], …]
    teacher_hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 hex of the token
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    joining_open: Mapped[bool] = mapped_column(server_default=true())
    join_allowance: Mapped[float | None] = mapped_column(Float)  # joins that may happen now
    join_allowance_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    creator: Mapped[str | None] = mapped_column(String(64))  # SHA-256 hex of the visitor's key


class Student(Base):
    """A nickname in a class, the allowance that rate-limits their answers (a token bucket), the hash
    of the visitor (browser) that joined with it, and when the teacher removed them (None: in class)."""

    __tablename__ = "students"
    __table_args__ = (UniqueConstraint("class_id", "nickname"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    nickname: Mapped[str] = mapped_column(String(40))
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime)
    allowance: Mapped[float] = mapped_column(Float)  # answers that may be sent now
    allowance_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when `allowance` was counted
    visitor: Mapped[str | None] = mapped_column(String(64))  # SHA-256 hex of the visitor's key
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The exercise they are on and its wrong tries so far, until it ends (a stuck student shows).
    working_on: Mapped[str | None] = mapped_column(String(64))
    wrong_tries: Mapped[int | None] = mapped_column(Integer)
    working_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Answer(Base):
    """One graded exercise of one student: the first answer, whether it was right, attempts, time,
    and whether it ended with the answer shown (None: stored before that was recorded)."""

    __tablename__ = "answers"
    __table_args__ = (UniqueConstraint("student_id", "exercise_id", "seed"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    student_id: Mapped[int] = mapped_column(ForeignKey("students.id", ondelete="CASCADE"))
    exercise_id: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column(Integer)
    answer: Mapped[str] = mapped_column(String(200))
    right_first: Mapped[bool]
    attempts: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float)
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime)
    shown: Mapped[bool | None]
