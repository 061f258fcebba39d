"""Where the class database lives, how its connections are set up, and its migrations.

SQLite in the user's data folder by default (`$XDG_DATA_HOME/attnviz/classes.sqlite`, else
`~/.local/share/attnviz/classes.sqlite`); `ATTNVIZ_CLASS_DB` takes any SQLAlchemy URL instead
(PostgreSQL for several server replicas: docs/deploy.md). SQLite is set up for several writing
threads: write-ahead log (readers never wait for the writer), a busy timeout (a writer waits its
turn instead of failing), and writes that take the write lock when they begin (`BEGIN IMMEDIATE`,
so two read-then-write transactions queue up instead of one failing at its first write).
"""

from __future__ import annotations

import os
import sqlite3
import time
import zlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from attnviz.classroom.rules import ClassError

ENV_URL = "ATTNVIZ_CLASS_DB"
WRITE = "attnviz_write"  # execution option: this connection's transactions will write
BUSY_S = 30.0  # how long an SQLite writer waits for another's lock before giving up
MIGRATIONS = "attnviz.classroom:migrations"
# One PostgreSQL advisory lock key per serialised job (a 64-bit integer, derived from its name).
LOCKS = {name: zlib.crc32(f"attnviz.classroom.{name}".encode()) for name in ("migrate", "create")}


def default_url() -> str:
    """`ATTNVIZ_CLASS_DB`, or the SQLite file in the user's data folder (created, private)."""
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return url
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"  # the XDG rule
    folder = base / "attnviz"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"sqlite:///{folder / 'classes.sqlite'}"


def _wal(cursor) -> None:
    """Switch the file to the write-ahead log. SQLite answers "database is locked" at once, without
    its busy handler, while another connection holds the old journal's write lock (replicas opening
    a new file together): retry for up to `BUSY_S`."""
    deadline, pause = time.monotonic() + BUSY_S, 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)


def _sqlite_connect(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None  # the driver emits no BEGIN; _sqlite_begin does
    cursor = dbapi_connection.cursor()
    _wal(cursor)
    for pragma in ("synchronous=NORMAL", "foreign_keys=ON", f"busy_timeout={BUSY_S * 1000:.0f}"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    mode = "IMMEDIATE" if connection.get_execution_options().get(WRITE) else "DEFERRED"
    connection.exec_driver_sql(f"BEGIN {mode}")


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get the pragmas and BEGIN above.

    Raises:
        ClassError: `url` is not an SQLAlchemy URL, names a driver that is not installed, or is
            an in-memory SQLite database (each connection would see another, empty one).
    """
    allowed = "an SQLAlchemy URL, e.g. sqlite:////path/classes.sqlite or postgresql+psycopg://user@host/db"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ClassError(ENV_URL, url, allowed) from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() != "sqlite":
        try:
            return create_engine(parsed, pool_pre_ping=True)
        except (NoSuchModuleError, ImportError) as e:
            raise ClassError(ENV_URL, shown, f"{allowed}, with its driver installed ({e})") from None
    if parsed.database in (None, "", ":memory:") or "mode=memory" in str(parsed.query):
        raise ClassError(ENV_URL, shown, "an SQLite file, not an in-memory database")
    engine = create_engine(parsed, connect_args={"timeout": BUSY_S, "check_same_thread": False})
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def writing(engine: Engine) -> Engine:
    """`engine` for transactions that write (SQLite: `BEGIN IMMEDIATE`)."""
    return engine.execution_options(**{WRITE: True})


def serialise(connection: Connection, job: str) -> None:
    """Make `job` one at a time across processes for the rest of this transaction: a PostgreSQL
    advisory lock; SQLite needs none (a writing transaction already holds the database's lock)."""
    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(LOCKS[job])))


def _alembic(engine: Engine, action, revision: str) -> None:
    """Run Alembic's `action` (upgrade, downgrade) on one connection, one process at a time."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with writing(engine).connect() as connection, connection.begin():
        serialise(connection, "migrate")
        config.attributes["connection"] = connection  # read by migrations/env.py
        action(config, revision)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (the newest by default)."""
    _alembic(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema back to `revision` ("base": no tables)."""
    _alembic(engine, command.downgrade, revision)
