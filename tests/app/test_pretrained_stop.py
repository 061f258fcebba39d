"""The Pretrained page's Stop (issue 29 §1, issue 33), deterministically: a script run of the page's
own generation helpers (`attnviz.app.pretrained.runs`) starts a real generation in a worker on a tiny
random GPT-2 (250 new tokens asked), presses Stop (`stop_generation`, the button's callback) as soon
as a worker runs it — the generation draws one token before it first looks at a stop, and 250 take
far longer than the stop's way to the worker (a pipe and a shared flag) — and reads what the page would show — the tokens drawn so far, "Stopped by you", kept in this session
and not in the server's cache (another visitor asking gets the whole generation). A browser cannot
press Stop in time on a model this fast; tests/browser/test_pretrained_generation.py checks the
streaming there."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app.frame import results

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

TIMEOUT = 180
NEW = 250  # tokens asked for: the Stop, pressed after the first, lands long before the last


# Guarded as app.py is: a worker started with `spawn` imports the script that is `__main__`.
PAGE = """
import streamlit as st

from attnviz import pretrained
from attnviz.app.frame import door
from attnviz.app.pretrained import runs

NEW = {new}
if __name__ == "__main__":
    ckpt = pretrained.load({folder!r})
    args = runs.generation_args(ckpt, "The cat sat on the mat", "torch", NEW, 1.0, 3)
    gen = runs.finished_generation(args)  # a rerun: what this session kept
    if gen is None:
        handle = runs.generation_handle(args)
        while handle.progress().state == "queued":  # running: the stop reaches the worker, not the queue
            handle.wait(1.0)
        runs.stop_generation()  # what the Stop button's callback does
        gen = runs.ended_generation(args, handle)
    st.markdown(runs.ending(ckpt, gen, NEW))
    st.write(f"new={{len(gen.new_ids)}} cached={{door.cached(runs.GENERATION_CACHE, *args, end=True)[0]}}")
"""


def first_run(page: str, tmp_path) -> AppTest:
    """The page (a template of the test's script) on a tiny random GPT-2, run once, empty cache."""
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    folder = str(make_tiny_gpt2(tmp_path / "tiny-gpt2", n_positions=300, seed=5))
    results.CACHE.clear()
    at = AppTest.from_string(page.format(folder=folder, new=NEW), default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    return at


def test_stop_keeps_the_tokens_so_far_for_this_session_only(tmp_path):
    at = first_run(PAGE, tmp_path)
    said = " ".join(m.value for m in at.markdown)
    assert "Stopped by you** (Stop) after" in said and f"of {NEW}" in said
    new = int(said.split("new=")[1].split()[0])
    assert 1 <= new < NEW and "cached=False" in said  # kept for this visitor, not handed to others
    again = at.run()  # a rerun (another widget changed): the stopped generation is shown, not restarted
    assert " ".join(m.value for m in again.markdown).split("new=")[1].split()[0] == str(new)


# Streamlit's own Stop (the toolbar's, beside "Running…") or a closed tab raises StopException inside
# the page's stream (at the next element it draws): `st.write_stream` below raises it once the worker
# runs the task, as the script runner does. The page's `_generation` must stop the worker then — else
# it draws the rest for a page that no longer shows them. The task is one that runs until it is
# stopped (the tiny model's 250 tokens take 0.1 s: they could end before any stop), both patches
# undone when the run ends (AppTest runs the script in this process).
STOPPED_PAGE = """
import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from attnviz import pretrained
from attnviz.app.frame import door
from attnviz.app.pretrained import runs, tabs
from tests.exec import toy_tasks

NEW = {new}
if __name__ == "__main__":
    ckpt = pretrained.load({folder!r})
    handle = st.session_state.get("task")
    if handle is None:  # the first run: streamed until Streamlit stops the script
        def until_stopped(args):
            st.session_state["task"] = door.start(toy_tasks.until_stopped)
            return st.session_state["task"]

        def stopped_by_streamlit(stream):
            while st.session_state["task"].progress().state == "queued":  # running: a stop reaches it
                st.session_state["task"].wait(1.0)
            raise StopException()

        handle_of, write_stream = runs.generation_handle, st.write_stream
        runs.generation_handle, st.write_stream = until_stopped, stopped_by_streamlit
        try:
            tabs._generation(ckpt, "The cat sat on the mat", "torch", NEW, 1.0, 3)
        finally:
            runs.generation_handle, st.write_stream = handle_of, write_stream
    else:  # the next run (the visitor's next click): what became of the task
        steps = handle.result(timeout=30)
        st.write(f"asked={{handle.stop_asked}} steps={{steps}}")
"""


def test_streamlits_own_stop_stops_the_generation(tmp_path):
    said = " ".join(m.value for m in first_run(STOPPED_PAGE, tmp_path).run().markdown)
    assert "asked=True" in said, said  # the page stopped the task (the old page let it run on)
    assert int(said.split("steps=")[1].split()[0]) >= 1, said  # it ended by itself, not killed
