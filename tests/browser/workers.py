"""A live server's worker processes (`attnviz.exec`'s local engine), read from /proc: which they are,
their CPU time and resident memory — for tests that close tabs, kill workers and watch memory."""

from __future__ import annotations

import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
LIMIT_S = 120.0  # every wait on a worker ends by then (a loaded 2-core machine starts one in seconds)


def workers(server_pid: int) -> list[int]:
    """The server's worker processes: its children started by multiprocessing's `spawn` (not its
    resource tracker), oldest first."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == server_pid and "spawn_main" in cmdline and "resource_tracker" not in cmdline:
            found.append((int(stat.rsplit(")", 1)[1].split()[19]), int(entry.name)))  # start time, pid
    return [pid for _, pid in sorted(found)]


def wait_workers(server_pid: int, n: int = 1, timeout_s: float = LIMIT_S) -> list[int]:
    """The server's workers once at least `n` run (polled), or fail."""
    deadline = time.monotonic() + timeout_s
    while len(found := workers(server_pid)) < n:
        assert time.monotonic() < deadline, f"fewer than {n} workers within {timeout_s:g} s"
        time.sleep(0.1)
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def cores_busy(pid: int, over_s: float = 0.5) -> float:
    """Cores `pid` used over the next `over_s` seconds (0 once it has ended)."""
    try:
        before = cpu_seconds(pid)
        time.sleep(over_s)
        return (cpu_seconds(pid) - before) / over_s
    except (OSError, IndexError):
        return 0.0


def rss_mib(pid: int) -> float:
    """Resident memory of `pid` in MiB (0 once it has ended)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def seconds_until(condition, limit_s: float = LIMIT_S, what: str = "condition") -> float:
    """Seconds until `condition()` holds (polled; a poll may itself measure for a while), or fail."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < limit_s, f"{what}: not within {limit_s:g} s"
    return time.monotonic() - began


def thread_states(pid: int) -> str:
    """The state letters of `pid`'s threads ("R" running or runnable, "S" sleeping …), "X" once gone."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return "X"
    states = []
    for task in tasks:
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that just ended
    return "".join(states) or "X"


def idle_since(pid: int, hold_s: float = 0.5, every_s: float = 0.02, limit_s: float = LIMIT_S) -> float:
    """When (`time.monotonic()`) `pid`'s task ended: all its threads asleep — a worker between tasks
    waits on its pipe — for `hold_s` without a break, or the process gone. A worker starved of CPU
    by a loaded machine stays runnable ("R") while its task runs, so this does not mistake a slow
    task for an ended one, as a CPU reading would."""
    deadline = time.monotonic() + limit_s
    asleep_from = None
    while True:
        now = time.monotonic()
        states = thread_states(pid)
        if states == "X":
            return asleep_from or now
        asleep_from = None if "R" in states else (asleep_from or now)
        if asleep_from is not None and now - asleep_from >= hold_s:
            return asleep_from
        assert now < deadline, f"worker {pid} still running its task after {limit_s:g} s"
        time.sleep(every_s)
