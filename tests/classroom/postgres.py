"""A throwaway PostgreSQL server for the class database's tests.

`initdb` into a fresh temporary folder, `pg_ctl start` on 127.0.0.1 at a free port (no Unix
socket outside that folder, trust authentication: nothing outside this machine can reach it),
one database with a schema per test, and everything removed when the test process ends. PostgreSQL refuses
to run as root, so as root the commands run as the `postgres` system user (Debian's package
creates it) in a folder it owns.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

START_S = 60  # pg_ctl waits this long for the server to accept connections
DATABASE = "attnviz_test"


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL server in a temporary folder; `start()`, `database()`, `stop()`."""

    def __init__(self):
        self.bin = binaries()
        self.folder: Path | None = None
        self.port = 0
        self.database = "postgres"
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        # In the server's own folder: the postgres user may not enter the checkout's.
        done = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, timeout=START_S + 30, cwd=self.folder
        )
        if done.returncode != 0:
            log = self.folder / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}{tail}"
            )

    def start(self) -> Server:
        if self.bin is None:
            raise RuntimeError("no PostgreSQL here: apt-get install -y postgresql")
        self.folder = Path(tempfile.mkdtemp(prefix="attnviz-pg-"))
        if self.as_user:
            shutil.chown(self.folder, "postgres", "postgres")
        data = str(self.folder / "data")
        self._run(
            str(self.bin / "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"
        )
        for attempt in range(3):  # another process may take the free port before the server does
            self.port = free_port()
            options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off -c synchronous_commit=off"
            try:
                self._run(
                    str(self.bin / "pg_ctl"),
                    "-D",
                    data,
                    "-l",
                    str(self.folder / "log"),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    str(START_S),
                    "start",
                )
                return self
            except RuntimeError:
                if attempt == 2:
                    raise
        return self

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        search = f"?options=-csearch_path%3D{schema}" if schema else ""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}{search}"

    def _admin(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user=postgres dbname={database}", autocommit=True
        ) as c:
            c.execute(sql)

    def create_database(self, name: str = DATABASE) -> str:
        """A new empty database; its SQLAlchemy URL."""
        self._admin(f'CREATE DATABASE "{name}"')
        self.database = name
        return self.url(name)

    def create_schema(self) -> str:
        """A new empty schema in the database, first on the search path of the URL returned (a
        fresh database per test would cost ~1 s; a schema costs ~10 ms and isolates as well)."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE SCHEMA "{name}"', self.database)
        return self.url(self.database, name)

    def drop_schema(self, url: str) -> None:
        self._admin(f'DROP SCHEMA IF EXISTS "{url.rsplit("%3D", 1)[1]}" CASCADE', self.database)

    def stop(self) -> None:
        if self.folder is None:
            return
        if (self.folder / "data" / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
