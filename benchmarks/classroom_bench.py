"""The class database under a class: answer latency with students writing at once, and the
teacher's refresh (view and CSV) of a full class, on SQLite and on a local PostgreSQL.

    python benchmarks/classroom_bench.py [--students 30] [--answers 24] [--full 200]

1. `--students` threads join one class and each records `--answers` answers as fast as it can
   (the rate limit raised out of the way: a real student sends one every few seconds), so every
   write competes with the others for the database's lock. Median and p95 of `record_answer`.
2. A full class: `--full` students × `--answers` answers stored, then `class_view` and
   `class_csv` timed (median of 5): what a teacher page refreshing every few seconds costs.

PostgreSQL runs on this machine (tests/classroom/postgres.py: fsync off, as in the tests), so
its figures leave out a network's round trips. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from attnviz.classroom import ClassDB, Limits  # noqa: E402
from tests.classroom.postgres import Server  # noqa: E402

FAST = {
    "rate": 1e6,
    "burst": 1_000_000,
    "answers": 10_000,
    "join_burst": 1_000_000,
}  # no rate limits: the database only


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def exercises(n: int) -> dict[str, list[str]]:
    return {"bench": [f"bench.e{i}" for i in range(n)]}


def concurrent_answers(db: ClassDB, students: int, answers: int) -> tuple[list[float], float]:
    """Seconds per `record_answer`, every student in their own thread, all starting together;
    and the wall time from the start to the last answer."""
    info = db.create_class("bench", lessons=exercises(answers))
    start, times, lock = threading.Barrier(students), [], threading.Lock()

    def student(i: int) -> None:
        me = db.join(info.code, f"s{i}")
        start.wait()
        for j in range(answers):
            t = time.perf_counter()
            db.record_answer(info.code, me, f"bench.e{j}", i, "A", right=False, attempts=2, seconds=10.0)
            with lock:
                times.append(time.perf_counter() - t)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(students)]
    for t in threads:
        t.start()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return times, time.perf_counter() - began


def teacher_refresh(db: ClassDB, students: int, answers: int) -> tuple[float, float]:
    """Median seconds of `class_view` and `class_csv` on a class of `students` × `answers`."""
    info = db.create_class("full", lessons=exercises(answers))
    for i in range(students):
        me = db.join(info.code, f"s{i}")
        for j in range(answers):
            db.record_answer(
                info.code,
                me,
                f"bench.e{j}",
                i,
                "ABC"[(i + j) % 3],
                right=(i + j) % 4 == 0,
                attempts=1 if (i + j) % 4 == 0 else 2,
                seconds=10.0,
            )
    out = []
    for read in (db.class_view, db.class_csv):
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            read(info.teacher_token)
            runs.append(time.perf_counter() - t)
        out.append(statistics.median(runs))
    return out[0], out[1]


def measure(url: str, args) -> str:
    db = ClassDB(url, limits=Limits(students=max(args.full, args.students), **FAST))
    try:
        times, wall = concurrent_answers(db, args.students, args.answers)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        view, csv = teacher_refresh(db, args.full, args.answers)
    finally:
        db.close()
    return (
        f"| {url.split(':')[0]} | {statistics.median(times) * 1e3:.1f} | {p95 * 1e3:.1f} | "
        f"{len(times) / wall:.0f} | {view * 1e3:.0f} | {csv * 1e3:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--answers", type=int, default=24)
    parser.add_argument("--full", type=int, default=200)
    args = parser.parse_args()
    print(f"load before: {load()}")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        rows.append(measure(f"sqlite:///{folder}/bench.sqlite", args))
    server = Server().start()
    try:
        rows.append(measure(server.create_database(), args))
    finally:
        server.stop()
    print(f"load after: {load()}")
    print(
        f"\n{args.students} students writing at once, {args.answers} answers each; "
        f"teacher's refresh on {args.full} × {args.answers} answers\n"
    )
    print(
        "| backend | answer median ms | answer p95 ms | answers/s (all threads) | class_view ms | class_csv ms |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
