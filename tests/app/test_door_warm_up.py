"""A server's first run warms its workers with the lab's tiny training too (`door.warm`), so the first
visitor's training does not pay the framework's first step (docs/training.md)."""

from __future__ import annotations

import importlib
import threading

from attnviz.app.frame import door
from attnviz.training import schedule


def test_the_server_warms_its_workers_with_the_labs_warm_up(monkeypatch):
    calls = []
    monkeypatch.setattr(door, "serving", lambda: True)
    monkeypatch.setattr(door, "_WARMED", threading.Event())
    monkeypatch.setattr(door.ex, "warm", lambda frameworks, **options: calls.append((frameworks, options)))
    monkeypatch.setenv(door.WARM_ENV, "torch,tensorflow")
    door.warm()
    door.warm()  # once per server
    assert calls == [(("torch", "tensorflow"), {"warm_up": door.WARM_UP})]
    module, _, name = door.WARM_UP.rpartition(".")  # the name is the lab's warm-up
    assert getattr(importlib.import_module(module), name) is schedule.warm_up
