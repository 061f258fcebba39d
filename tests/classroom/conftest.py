"""The class database under test: SQLite in the test's folder, and PostgreSQL on a server this
test process starts (tests/classroom/postgres.py). In CI (`CI=true`) PostgreSQL must start: a
server that cannot is a failure, not a skip."""

from __future__ import annotations

import pytest

from attnviz.classroom import ClassDB, Limits
from tests.classroom.postgres import Server
from tests.conftest import CI

BACKENDS = ("sqlite", "postgresql")
LESSONS = {
    "basics": ["basics.scores", "basics.scaling", "basics.softmax"],
    "circuits": ["circuits.induction"],
}


class Clock:
    """Seconds since the epoch that move only when a test moves them."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def postgres():
    server = Server()
    try:
        server.start().create_database()
    except Exception as e:  # no server binary, a refused start: say which
        server.stop()
        message = f"PostgreSQL could not start: {e}"
        if CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS, name="url")
def empty_database(request, tmp_path):
    """`url`: an empty database's URL, on each backend (the class browser test's too)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'classes.sqlite'}"
        return
    server = request.getfixturevalue("postgres")
    url = server.create_schema()
    yield url
    server.drop_schema(url)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_db(url, clock):
    """`open_db(**limits)`: a `ClassDB` on the test's database with those limits and the test's clock."""
    opened: list[ClassDB] = []

    def make(**limits) -> ClassDB:
        db = ClassDB(url, limits=Limits(**limits), clock=clock)
        opened.append(db)
        return db

    yield make
    for db in opened:
        db.close()


@pytest.fixture
def db(open_db) -> ClassDB:
    return open_db()
