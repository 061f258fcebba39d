"""The Decoding page's streaming section (issue 44 §1) on a tiny random Llama and Gemma 3 offered
through `ATTNVIZ_CHECKPOINTS`: the run goes to a worker, the page draws each policy's perplexity
curve from the library's per-token NLL (`attnviz.kernels.streaming.score_ids`, itself proven
against transformers in tests/kernels/test_streaming.py, recomputed here in process), the first token's
share per layer, and keeps the settings in the URL; nothing runs until asked.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.app.decoding import figures, sinks_task
from attnviz.exec.monitor import Monitor
from attnviz.kernels import streaming
from tests.app.conftest import array, assert_clean, chart, open_directly

pytest.importorskip("transformers", reason="transformers builds the test's decoders")

P = "decoding.sinks."
TOKENS, WINDOW = 40, 8
MODELS = ["tiny-llama", "tiny-gemma"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from tests.kernels.test_decoding import make_tiny_gemma
    from tests.pretrained.test_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("sink-decoders")
    make_tiny_llama(root / "tiny-llama")
    make_tiny_gemma(root / "tiny-gemma")
    return root


def opened(folders, monkeypatch, window: int = WINDOW):
    monkeypatch.setenv(pretrained.ENV_DIRS, str(folders))
    query = {"decoding.checkpoint": MODELS[0], "decoding.new_tokens": "1", "decoding.text": "The cat",
             P + "tokens": str(TOKENS), P + "window": str(window)}  # fmt: skip
    at = open_directly("decoding", query)
    assert_clean(at)
    at.multiselect(key=P + "models").set_value(MODELS).run()
    return at


@pytest.mark.slow  # ten runs in a worker: a minute or more on a loaded machine
def test_policies_side_by_side_from_a_worker(folders, monkeypatch):
    at = opened(folders, monkeypatch)
    assert (
        at.number_input(key=P + "tokens").value == TOKENS
        and at.number_input(key=P + "window").value == WINDOW
    )
    at.button(key=P + "run").click().run()
    assert_clean(at)
    for name in MODELS:
        ckpt = pretrained.load(folders / name)
        ids = streaming.text_ids(ckpt, streaming.bundled_text(), TOKENS)
        figure = chart(at, P + "ppl." + name)
        lines = {t["name"]: array(t["y"]) for t in figure["data"]}
        labels = [
            "full cache",
            f"window {WINDOW}",
            *(streaming.Policy(WINDOW, s).label for s in sinks_task.SINKS),
        ]
        assert list(lines) == labels
        for window, kept in [(None, 0), (WINDOW, 4)]:
            nll = streaming.score_ids(ckpt, ids, "torch", window=window, sinks=kept).nll
            k = figures.SMOOTH
            expected = np.exp(np.convolve(nll, np.ones(k) / k, mode="valid"))
            np.testing.assert_allclose(lines[streaming.Policy(window, kept).label], expected, rtol=1e-5)
        share = chart(at, P + "first." + name)["data"][0]
        z = array(share["z"])
        assert z.shape[0] == ckpt.config.num_hidden_layers and ((z >= 0) & (z <= 1)).all()
    assert at.query_params[P + "window"] == str(WINDOW)


def test_nothing_runs_until_asked(folders, monkeypatch):
    """A long run starts from its button only: before it, no curve and no Stop button."""
    at = opened(folders, monkeypatch, window=WINDOW + 8)  # not the run the other test may have left cached
    assert at.button(key=P + "run").label.startswith("Read the text")
    assert not [c for c in at.get("plotly_chart") if P in c.proto.id]
    assert not [b for b in at.button if b.key == P + "stop"]


def test_the_task_counts_tokens_over_all_policies_and_keeps_those_finished(folders):
    """In process: one `Monitor` told each token of every policy in one count; stopped after the
    first policy, the task keeps that policy's curve (the library's own) and says "stopped"."""
    source, tokens, window = str(folders / "tiny-llama"), 12, 4
    total = (2 + len(sinks_task.SINKS)) * (tokens - 1)
    seen = []
    got = sinks_task.policy_curves(
        source, "torch", tokens, window, monitor=Monitor(lambda d, t, _: seen.append((d, t)))
    )
    assert got.ended == "done" and seen == [(d, total) for d in range(1, total + 1)]

    def on_report(done, _total, _partial):
        if done == tokens - 1:
            monitor.stop()

    monitor = Monitor(on_report)
    stopped = sinks_task.policy_curves(source, "torch", tokens, window, monitor=monitor)
    assert stopped.ended == "stopped" and list(stopped.nll) == ["full cache"]
    np.testing.assert_array_equal(stopped.nll["full cache"], got.nll["full cache"])
