"""The Interpretability page's circuit tabs (issue 30 §3–4) on a tiny random GPT-2 offered through
`ATTNVIZ_CHECKPOINTS`: every number drawn equals the library's, and the URL reopens each view."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import exec as ex
from attnviz.interp import dla, patching, qkov
from tests.app.conftest import array, assert_clean, click_if_offered, errors, open_page, titled
from tests.conftest import ATOL_FIGURE

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

NAME = "tiny-gpt2"
CLEAN, CORRUPTED, ANSWER, WRONG = "The cat sat on the mat", "The dog sat on the mat", " the", "0"
PROMPTS = {
    "interp.clean": CLEAN,
    "interp.corrupted": CORRUPTED,
    "interp.answer": ANSWER,
    "interp.wrong": WRONG,
}


def submits(monkeypatch) -> list[str]:
    """The names of the tasks the page submits from now on (each still runs)."""
    names, real = [], ex.submit

    def submit(task, *args, **kwargs):
        names.append(task.__name__)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(ex, "submit", submit)
    return names


def page(**state):
    at = open_page("interpret", {"interp.checkpoint": NAME, "interp.half": "6", "interp.n": "2", **state})
    assert_clean(at)
    assert not errors(at), errors(at)
    return at


def the_one(at, words: str) -> dict:
    (found,) = titled(at, words)
    return found


def test_dla_map_parts_and_the_comparison_with_patching(gpt):
    at = page(**{"interp.tab": "Direct logit", **PROMPTS})
    parts = dla.decompose(gpt, CLEAN, ANSWER, WRONG, "torch")
    shown = the_one(at, "Direct logit attribution")
    np.testing.assert_allclose(array(shown["data"][0]["z"]), parts.heads, atol=1e-5)
    bars = the_one(at, "Direct contributions")["data"]
    assert sum(np.sum(array(b["y"])) for b in bars) == pytest.approx(
        parts.logit_diff, abs=1e-4
    )  # they add up
    assert shown["layout"]["title"]["text"].count("<br>") <= 1  # a head over one line (it took four)
    click_if_offered(at, "interp.dla_sweep")
    assert_clean(at)
    assert not errors(at), errors(at)
    assert [b.label for b in at.button if b.key == "interp.dla_sweep"] == []  # not offered once it has run
    sweep = patching.sweep(gpt, CLEAN, CORRUPTED, ANSWER, WRONG, "torch")
    points = the_one(at, "Direct effect vs patching")["data"][1]
    np.testing.assert_allclose(array(points["x"]), (parts.heads / parts.logit_diff).ravel(), atol=1e-5)
    np.testing.assert_allclose(array(points["y"]), sweep.restored.ravel(), atol=1e-5)
    (table,) = [d.value for d in at.dataframe]
    assert len(table) == 8 and set(table["reading"]) <= {
        "writes the answer directly",
        "writes against the answer directly",
        "matters through later layers",
    }


def test_a_head_with_a_negative_direct_share_writes_against_the_answer():
    """Issue 46, point 16: the "reading" column said such heads "write the answer directly"; it reads
    the sign of the head's own term, logit(answer) − logit(wrong)."""
    from attnviz.app.interpret.circuits import direct_or_indirect

    heads = np.array([[0.8, -0.6], [0.05, 0.0]])  # shares of a logit difference of 2: 0.4, −0.3, 0.025, 0
    parts = dla.LogitAttribution(heads, 0.0, np.zeros(2), np.zeros(2), 0.0, 2.0, ["a"], " x", " y")
    restored = np.array([[0.5, -0.4], [0.3, 0.01]])
    rows = {r["head"]: r["reading"] for r in direct_or_indirect(parts, restored)}
    assert rows == {
        "L0.H0": "writes the answer directly",
        "L0.H1": "writes against the answer directly",
        "L1.H0": "matters through later layers",  # 0.025 is less than half of 0.3
        "L1.H1": "matters through later layers",
    }
    # A clean difference below 0 (a tiny random model's) flips every share's sign, not what a head writes.
    flipped = dla.LogitAttribution(heads, 0.0, np.zeros(2), np.zeros(2), 0.0, -2.0, ["a"], " x", " y")
    assert {r["head"]: r["reading"] for r in direct_or_indirect(flipped, restored)} == rows


def test_qk_and_ov_tables_and_the_copying_map(gpt):
    at = page(**{"interp.tab": "QK and OV", "interp.circuit_head": "L1.H2", "interp.circuit_text": CLEAN})
    ids = list(dict.fromkeys(gpt.encode(CLEAN)[0]))
    qk, ov = qkov.qk_table(gpt, 1, 2, ids), qkov.ov_table(gpt, 1, 2, ids)
    np.testing.assert_allclose(
        array(the_one(at, "L1.H2 QK")["data"][0]["z"]), qk.values, rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        array(the_one(at, "L1.H2 OV")["data"][0]["z"]), ov.values, rtol=1e-6, atol=1e-6
    )
    copying = the_one(at, "Copying score of every head")
    np.testing.assert_allclose(array(copying["data"][0]["z"]), qkov.copying_scores(gpt), atol=ATOL_FIGURE)
    text = " ".join(m.value for m in at.markdown)
    assert f"**{qkov.copying_scores(gpt)[1, 2]:.2f}**" in text
    assert at.number_input(key="interp.offset").disabled  # GPT-2 has no rotary positions


@pytest.mark.parametrize(("side", "kind"), [("its inputs", "K"), ("its readers", "V")])
def test_composition_map_bars_and_baseline(gpt, side, kind):
    head = "L1.H0" if side == "its inputs" else "L0.H3"
    at = page(**{"interp.tab": "Composition", "interp.comp_head": head, "interp.comp_kind": kind,
                 "interp.comp_side": side})  # fmt: skip
    comp = qkov.composition_scores(gpt, kind.lower())
    row = comp.scores[1, 0] if side == "its inputs" else comp.scores[:, :, 0, 3]
    shown = array(
        the_one(at, f"{head} {'reads from' if side == 'its inputs' else 'is read by'} (red")["data"][0]["z"]
    )
    drawn = [0] if side == "its inputs" else [1]  # the layers before L1, after L0
    np.testing.assert_allclose(shown, row[drawn], atol=ATOL_FIGURE)
    bars = the_one(at, "Strongest")
    (line,) = bars["layout"]["shapes"]
    assert line["y0"] == pytest.approx(comp.baseline, rel=1e-9)
    (named,) = [
        t for t in bars["data"] if t["type"] == "scatter"
    ]  # the line's name: in the legend, off the bars
    assert named["name"] == f"random matrices: {comp.baseline:.3f}" and not bars["layout"].get("annotations")
    assert max(array(bars["data"][0]["y"])) == pytest.approx(np.nanmax(row), abs=ATOL_FIGURE)
    text = " ".join(m.value for m in at.markdown)
    role = "previous-token" if side == "its inputs" else "induction"  # the partner's role, from the scan
    assert f"Its strongest {side[4:]}: " in text and f"({role} score" in text
    # read from the link (the default, K, is left out of it)
    assert at.radio(key="interp.comp_kind").value == kind
    assert at.query_params.get("interp.comp_kind", "K") == kind


def test_composition_opens_on_one_head_and_every_pair_on_request(gpt, monkeypatch):
    """Issue 46 point 21: a link without the tab's parameters composes the chosen head with the heads
    it reads (and the previous-token head with its readers), not every pair of heads; every pair
    comes on request, equal to the library's."""
    submitted = submits(monkeypatch)
    at = page(**{"interp.tab": "Composition"})
    assert "composition" not in submitted, submitted  # every pair: not at first open
    assert not titled(at, "composition of every pair")
    assert (
        at.radio(key="interp.comp_kind").value == "K"
        and at.radio(key="interp.comp_side").value == "its inputs"
    )
    head = at.selectbox(key="interp.comp_head").value  # the scan's strongest induction head
    if head.startswith("L0."):  # no earlier heads to read: said, and the expander is not drawn
        assert any("has no earlier heads" in i.value for i in at.info)
        at.selectbox(key="interp.comp_head").set_value("L1.H0").run()
    assert len(titled(at, "reads from (red")) == 1  # the first figure: the chosen head's row
    assert "composition" not in submitted, submitted
    click_if_offered(at, "interp.comp_all")
    assert not errors(at), errors(at)
    (every,) = titled(at, "K-composition of every pair of heads")
    L, H = gpt.config.num_hidden_layers, gpt.config.num_attention_heads
    expected = qkov.composition_scores(gpt, "k").scores.reshape(L * H, L * H)
    np.testing.assert_allclose(array(every["data"][0]["z"]), expected, atol=ATOL_FIGURE)
    assert [b for b in at.button if b.key == "interp.comp_all"] == []  # not offered once it is there
