"""Engines for the execution layer's tests: each test that needs one gets its own, closed after it."""

from __future__ import annotations

import time

import pytest

from attnviz.exec import Budget, LocalEngine

BOUND_S = 60.0  # every wait in these tests ends by then (a loaded 2-core machine starts a worker in seconds)
STOP_S = 5.0  # the bound: a stopped task ends within this


def wait_until(condition, timeout: float = BOUND_S, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


def running(handle, timeout: float = BOUND_S) -> None:
    """Wait until `handle`'s task has reported a first unit done (or ended)."""
    wait_until(lambda: handle.progress().done >= 1 or handle.done(), timeout, f"{handle} running")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return False


@pytest.fixture
def local():
    """A local engine of two workers, at most one training; closed (workers ended) after the test."""
    engine = LocalEngine(Budget(workers=2, trainings=1, nice=5, threads=1))
    yield engine
    engine.close()


@pytest.fixture
def single():
    """A local engine of one worker."""
    engine = LocalEngine(Budget(workers=1, trainings=1, nice=5, threads=1))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> str:
    """A tiny random GPT-2 checkpoint built with transformers, saved to a folder: its absolute path
    (a task opens it through `attnviz.pretrained` inside the worker)."""
    pytest.importorskip("transformers", reason="transformers builds the tiny checkpoint")
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    folder = tmp_path_factory.mktemp("exec-tiny-gpt2")
    make_tiny_gpt2(folder, seed=3)
    return str(folder)


@pytest.fixture(scope="module")
def shared():
    """One local engine for a module's tests (its workers keep the checkpoint between tasks)."""
    engine = LocalEngine(Budget(workers=2, trainings=1, nice=5, threads=1))
    yield engine
    engine.close()
