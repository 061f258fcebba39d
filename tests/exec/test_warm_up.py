"""A worker's warm-up: the function given to `warm` by reference runs in every worker before its
first task, and what it did is the worker's reported state (`attnviz.exec.worker.state`); one that
fails is reported and the worker serves on. Its training counterpart: tests/training/test_warm_up.py."""

from __future__ import annotations

import pytest

from attnviz import exec as ex
from attnviz.errors import SpecError
from attnviz.exec import worker
from tests.exec import toy_tasks as toy
from tests.exec.conftest import BOUND_S


@pytest.mark.parametrize(
    ("warm_up", "value", "error"),
    [
        (toy.warmed, {"frameworks": ()}, None),
        (toy.bad_input, None, "lr"),
        (f"{toy.warmed.__module__}.warmed", {"frameworks": ()}, None),  # by name: imported in the worker
    ],
)
def test_the_warm_up_runs_in_the_worker_before_its_first_task(warm_up, value, error):
    engine = ex.LocalEngine(ex.Budget(workers=1, nice=5))
    try:
        ex.warm((), engine=engine, warm_up=warm_up)
        state = ex.submit(worker.state, engine=engine).result(BOUND_S)
        pid = ex.submit(toy.pid, engine=engine).result(BOUND_S)
        name = warm_up if isinstance(warm_up, str) else f"{warm_up.__module__}.{warm_up.__qualname__}"
        assert state["warm_up"] == name
        assert state["warm_up_value"] == (None if value is None else {**value, "pid": pid})
        assert (state["warm_up_error"] is None) == (error is None)
        assert error is None or error in state["warm_up_error"]
        assert ex.submit(toy.add, 2, 2, engine=engine).result(BOUND_S) == 4  # it serves on
    finally:
        engine.close()


def test_a_warm_up_that_cannot_travel_is_named():
    with pytest.raises(SpecError) as raised:
        ex.warm((), engine=ex.LocalEngine(ex.Budget(workers=1)), warm_up=lambda frameworks: None)
    assert raised.value.field == "warm_up"
    with pytest.raises(SpecError) as raised:  # a name must be module.function
        ex.warm((), engine=ex.LocalEngine(ex.Budget(workers=1)), warm_up="warmed; import os")
    assert raised.value.field == "warm_up"
