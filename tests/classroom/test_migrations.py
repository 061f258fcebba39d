"""The class database's schema: Alembic creates it from nothing, it equals the models, and it
goes down and up again — on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading

from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from attnviz.classroom import ClassDB
from attnviz.classroom.db import MIGRATIONS, downgrade, make_engine, migrate
from attnviz.classroom.models import Base

TABLES = {"classes", "students", "answers"}


def head() -> str:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return ScriptDirectory.from_config(config).get_current_head()


def state(url: str) -> tuple[set[str], str | None, list]:
    """Tables, the stamped revision, and Alembic's differences between the database and the models."""
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            revision = MigrationContext.configure(c).get_current_revision()
            return (
                set(inspect(c).get_table_names()),
                revision,
                compare_metadata(MigrationContext.configure(c), Base.metadata),
            )
    finally:
        engine.dispose()


def test_opening_an_empty_database_migrates_it_to_the_models(url):
    assert state(url)[0] == set()
    ClassDB(url).close()
    tables, revision, diff = state(url)
    assert tables == TABLES | {"alembic_version"}
    assert revision == head()
    assert diff == [], diff


def test_down_to_nothing_and_up_again(url):
    engine = make_engine(url)
    try:
        migrate(engine)
        downgrade(engine, "base")
        assert state(url)[0] == {"alembic_version"} and state(url)[1] is None
        migrate(engine)
        tables, revision, diff = state(url)
        assert tables >= TABLES and revision == head() and diff == []
    finally:
        engine.dispose()


def test_several_servers_opening_one_empty_database_at_once_migrate_it_once(url):
    """Replicas starting together: the migration lock lets one create the tables, the others find them."""
    errors, start = [], threading.Barrier(4)

    def open_it():
        try:
            start.wait()
            ClassDB(url).close()
        except Exception as e:  # reported below with its type
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert state(url)[1:] == (head(), [])


def test_an_sqlite_file_another_connection_is_writing_in_its_old_journal_opens_when_it_is_done(tmp_path):
    """SQLite refuses the switch to the write-ahead log at once, without waiting, while another
    connection holds the rollback journal's write lock (what a replica starting beside another
    met): the opening waits its turn instead of failing with "database is locked"."""
    path = tmp_path / "classes.sqlite"
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE scratch (x)")  # rolled back below
    opened, errors = threading.Event(), []

    def open_it():
        try:
            ClassDB(f"sqlite:///{path}").close()
            opened.set()
        except Exception as e:  # reported below with its type
            errors.append(e)

    thread = threading.Thread(target=open_it)
    thread.start()
    assert not opened.wait(0.3) and errors == [], errors  # it waits for the lock, it does not fail
    other.execute("ROLLBACK")
    other.close()
    thread.join()
    assert errors == [] and opened.is_set()
    assert state(f"sqlite:///{path}")[1:] == (head(), [])
