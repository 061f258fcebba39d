"""Who may join a class and create one: the limits on one visitor, on one class and on the server.

A *visitor* is whatever key the caller has for one browser (the app passes a hash of the browser's
cookie, or of its session): only its SHA-256 is stored. The rules (issue 46, points 2 and 22):

- a class takes new students only while its teacher keeps joining open, at most `Limits.join_burst`
  at once and then `Limits.join_rate` per second (a token bucket on the class row), and never one
  whose nickname the teacher removed;
- one visitor joins a class under one nickname (coming back under it is always allowed);
- one visitor creates at most `Limits.created_per_visitor` classes, and the server (every replica:
  the count is read from the database) at most `Limits.created_per_server`, per `creation_window_s`.

Each check runs inside the caller's writing transaction, on rows it has locked, so the limits hold
across threads and replicas. Refusals are `ClassError`s naming the field and what is allowed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from attnviz.classroom import models as m
from attnviz.classroom.rules import ClassError, Limits, RateLimited

MAX_VISITOR = 200  # a visitor key's characters, before it is hashed


def visitor_hash(visitor: str | None) -> str | None:
    """SHA-256 hex of a visitor key (None: no key, nothing is limited per visitor)."""
    if visitor is None:
        return None
    if not isinstance(visitor, str) or not 0 < len(visitor) <= MAX_VISITOR:
        raise ClassError("visitor", "(hidden)", f"a visitor key of 1 … {MAX_VISITOR} characters")
    return hashlib.sha256(visitor.encode()).hexdigest()


def check_creation(s: Session, limits: Limits, creator: str | None, now: datetime) -> None:
    """Refuse a new class beyond the server's or this visitor's creations in the window."""
    since = now - timedelta(seconds=limits.creation_window_s)
    minutes = f"{limits.creation_window_s / 60:g} minutes"
    recent = select(func.count()).select_from(m.Class).where(m.Class.created_at > since)
    if creator is not None:
        mine = s.scalar(recent.where(m.Class.creator == creator))
        if mine >= limits.created_per_visitor:
            raise RateLimited(
                "classes",
                mine,
                f"at most {limits.created_per_visitor} new classes from one browser in {minutes}",
                retry_after=_oldest_leaves(s, since, limits, m.Class.creator == creator, now),
            )
    everyone = s.scalar(recent)
    if everyone >= limits.created_per_server:
        raise RateLimited(
            "classes",
            everyone,
            f"at most {limits.created_per_server} new classes on this server in {minutes}",
            retry_after=_oldest_leaves(s, since, limits, True, now),
        )


def _oldest_leaves(s: Session, since: datetime, limits: Limits, where, now: datetime) -> float:
    """Seconds until the oldest creation in the window leaves it."""
    oldest = s.scalar(select(func.min(m.Class.created_at)).where(m.Class.created_at > since, where))
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # SQLite's aggregate comes back without the column's type
        oldest = datetime.fromisoformat(str(oldest)).replace(tzinfo=now.tzinfo)
    return max((oldest + timedelta(seconds=limits.creation_window_s) - now).total_seconds(), 0.0)


def check_new_student(
    s: Session, limits: Limits, cls: m.Class, nickname: str, visitor: str | None, now: datetime
) -> None:
    """Refuse a new nickname in `cls` (locked by the caller): joining closed, this visitor in the
    class under another nickname, the class full, or joining faster than its allowance; else
    spend one join of the allowance."""
    if not cls.joining_open:
        raise ClassError("code", cls.code, "a class that takes new students: the teacher closed joining")
    in_class = select(m.Student).where(m.Student.class_id == cls.id, m.Student.removed_at.is_(None))
    if visitor is not None:
        other = s.scalar(in_class.where(m.Student.visitor == visitor))
        if other is not None:
            raise ClassError(
                "nickname",
                nickname,
                "the nickname this browser joined the class with already (one browser joins a class once)",
            )
    count = s.scalar(select(func.count()).select_from(in_class.subquery()))
    if count >= limits.students:
        raise ClassError(
            "nickname",
            nickname,
            f"a nickname already in this class (it has {count} students, the most allowed)",
        )
    _take_join(cls, limits, now)


def _take_join(cls: m.Class, limits: Limits, now: datetime) -> None:
    """Spend one join of the class's allowance (refilled at `join_rate` per second up to `join_burst`)."""
    rate, burst = limits.join_rate, float(limits.join_burst)
    if cls.join_allowance is None or cls.join_allowance_at is None:
        allowance = burst
    else:
        elapsed = max((now - cls.join_allowance_at).total_seconds(), 0.0)
        allowance = min(burst, cls.join_allowance + elapsed * rate)
    if allowance < 1.0:
        wait = (1.0 - allowance) / rate
        raise RateLimited(
            "code",
            cls.code,
            f"{rate * 60:g} new students a minute after {burst:g} at once; the next one fits in {wait:.0f} s",
            retry_after=wait,
        )
    cls.join_allowance, cls.join_allowance_at = allowance - 1.0, now


def take_allowance(row: m.Student, limits: Limits, now: datetime) -> None:
    """Spend one answer of a student's allowance (refilled at `rate` per second up to `burst`)."""
    rate, burst = limits.rate, float(limits.burst)
    elapsed = max((now - row.allowance_at).total_seconds(), 0.0)  # a clock set back refills nothing
    allowance = min(burst, row.allowance + elapsed * rate)
    if allowance < 1.0:
        wait = (1.0 - allowance) / rate
        allowed = f"{rate:g} answers per second after {burst:g} at once; the next one fits in {wait:.1f} s"
        raise RateLimited("answers", row.nickname, allowed, retry_after=wait)
    row.allowance, row.allowance_at = allowance - 1.0, now
