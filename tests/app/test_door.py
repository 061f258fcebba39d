"""The app's door to the execution layer (`attnviz.app.frame.door`) in a script run: the value,
the progress bar, the result cache, and each failure shown as the page's message."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app.frame import results

TIMEOUT = 120


# Guarded as app.py is: a worker started with `spawn` imports the script that is `__main__`.
PAGE = """
import streamlit as st

from attnviz import exec as ex
from attnviz.app.frame import door
from tests.exec import toy_tasks

if __name__ == "__main__":
    try:
        value = door.run(getattr(toy_tasks, {task!r}), *{args!r}, spinner="Counting", cache={cache!r})
    except (ex.TaskError, ValueError) as error:
        door.show_failure(error)
    else:
        st.write(f"value={{value}}")
"""


def script(task: str, *args, cache: str | None = None) -> AppTest:
    """A page that runs `tests.exec.toy_tasks.<task>(*args)` through the door and writes the value."""
    return AppTest.from_string(PAGE.format(task=task, args=args, cache=cache), default_timeout=TIMEOUT)


FOLLOW = """
import pathlib

import streamlit as st

from attnviz.app.frame import door
from tests.exec import toy_tasks

if __name__ == "__main__":
    seen = []

    def draw(partials):
        seen.append(partials)
        pathlib.Path({path!r}).touch()  # the task waits for this before it ends

    value = door.follow(door.start(toy_tasks.reports_then_waits, {path!r}), "Waiting", partials=draw)
    st.write(f"value={{value}} seen={{seen}}")
"""


def test_partials_are_drawn_while_the_task_runs(tmp_path):
    """Issue 46 point 21: a page draws what a task has measured so far (the Timing sweep's rows) while it
    runs. The task ends only once the page has seen its partial result (else after 60 s, False)."""
    page = FOLLOW.format(path=str(tmp_path / "seen"))
    at = AppTest.from_string(page, default_timeout=TIMEOUT).run()
    assert [m.value for m in at.markdown] == ["value=True seen=[('first',)]"]


def test_value_comes_back_and_is_cached():
    results.CACHE.clear()
    at = script("counts", 4, cache="door test").run()
    assert [m.value for m in at.markdown] == ["value=30"]  # 1 + 4 + 9 + 16
    assert results.CACHE.get(("door test", (4,), ()))[0]
    again = script("pid", cache="door test pid").run()
    first = again.markdown[0].value
    assert again.run().markdown[0].value == first  # the same value: from the cache, not a new worker run
    results.CACHE.clear()


def test_bad_input_names_the_field():
    at = script("bad_input", 7.0).run()
    assert not at.exception
    text = at.error[0].value.replace("\\", "")  # markdown escapes
    assert "lr" in text and "7.0" in text and "1e" in text  # the field, what was received, what is allowed


@pytest.mark.parametrize(
    ("error", "shown", "button"),
    [
        ("worker", "the worker stopped (signal 9, SIGKILL)", True),
        ("time", "over the time limit of 2 s", False),
        ("memory", "more than the memory budget of 64 MiB per run (ATTNVIZ_RUN_MB", False),
    ],
)
def test_failures_are_the_pages_message(error, shown, button):
    def page(error):
        import streamlit as st

        from attnviz import exec as ex
        from attnviz.app.frame import door

        made = {
            "worker": ex.WorkerStopped(-9),
            "time": ex.OverTime(2),
            "memory": ex.OverMemory(64),
        }[error]
        if door.show_failure(made, key="again"):
            st.write("pressed")

    at = AppTest.from_function(page, kwargs={"error": error}, default_timeout=TIMEOUT).run()
    assert shown in at.error[0].value.replace("\\", "")
    assert [b.label for b in at.button] == (["Run again"] if button else [])
    if button:
        at.button[0].click().run()
        assert [m.value for m in at.markdown] == ["pressed"]


def test_the_warm_setting_names_frameworks_or_none():
    from attnviz.app.frame.door import warm_frameworks

    assert warm_frameworks(None) == ("torch",)  # unset: PyTorch in every worker
    assert warm_frameworks("torch, TensorFlow") == ("torch", "tensorflow")
    assert warm_frameworks("0") is None and warm_frameworks("none") is None and warm_frameworks("") is None
    with pytest.warns(RuntimeWarning, match="ATTNVIZ_WARM_WORKERS='torch,jax'"):
        assert warm_frameworks("torch,jax") == ("torch",)


def test_the_progress_bar_says_its_units():
    """Issue 46, point 17: "0 / 1 · 92 s" said neither what was counted nor what the seconds were."""
    from attnviz.app.frame.door import _bar
    from attnviz.exec import Progress

    fraction, text = _bar("Running", Progress("running", 0, 1, (), 92.4, 1))
    assert (fraction, text) == (0.0, "Running · 0 of 1 part done · 1 min 32 s so far")
    assert (
        _bar("Running", Progress("running", 3, 4, (), 5.0, 1))[1]
        == "Running · 3 of 4 parts done · 5 s so far"
    )
    assert _bar("Running", Progress("running", 0, None, (), 5.0, 1))[1] == "Running · 5 s so far"
