"""The Interpretability page's attention editor (issue 30 §5) on a tiny random GPT-2 (offered
through `ATTNVIZ_CHECKPOINTS`): the edited row, the logit difference and the
next-token distribution drawn are the library's edited run, and the link reopens the edit."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import patching
from attnviz.pretrained import edits
from tests.app.conftest import TINY_GPT2, array, assert_clean, errors, open_page, titled
from tests.conftest import ATOL_FIGURE, RTOL_MODEL

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

NAME = TINY_GPT2  # conftest's `gpt` fixture offers it
TEXT, ANSWER, WRONG = "The cat sat on the mat", " the", "0"
KINDS = {"only": "all weight on one key", "sink": "drain the first-token sink", "zero": "zero a key"}


def page(**state):
    query = {"interp.checkpoint": NAME, "interp.tab": "Attention editor", "interp.clean": TEXT,
             "interp.answer": ANSWER, "interp.wrong": WRONG, **state}  # fmt: skip
    at = open_page("interpret", query)
    assert_clean(at)
    return at


def the_one(at, words: str) -> dict:
    (found,) = titled(at, words)
    return found


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_edited_run_is_the_librarys(gpt, kind):
    ids = gpt.encode(TEXT)[0]
    T, query, key = len(ids), len(ids) - 2, 2
    shown = [f"{i}: " + t.replace(" ", "␣") for i, t in enumerate(gpt.labels(ids))]  # "1: ␣Mary"
    at = page(**{"interp.edit_layer": "1", "interp.edit_head": "2", "interp.edit_query": shown[query],
                 "interp.edit_kind": KINDS[kind], "interp.edit_key": shown[key]})  # fmt: skip
    assert not errors(at), errors(at)
    assert at.selectbox(key="interp.edit_query").options == shown  # "1: ␣Mary", not "1:␣␣Mary"
    assert at.selectbox(key="interp.edit_query").value == query  # the link reopened the edit
    before = gpt.run(TEXT, "torch")
    row = before.attentions[1, 2, query].astype(np.float64)
    new = {"only": edits.only_key(T, key), "sink": edits.drain_sink(row), "zero": edits.zero_key(row, key)}[
        kind
    ]
    after = gpt.run(TEXT, "torch", edit={(1, 2): {query: new}})
    bars = the_one(at, "L1.H2, query")["data"]
    np.testing.assert_allclose(array(bars[0]["y"]), row[: query + 1], atol=ATOL_FIGURE)
    np.testing.assert_allclose(array(bars[1]["y"]), new[: query + 1], atol=ATOL_FIGURE)
    a, w = patching.token_id(gpt, ANSWER, "answer"), patching.token_id(gpt, WRONG, "wrong")
    diff0, diff1 = patching.logit_diff(before.logits, a, w), patching.logit_diff(after.logits, a, w)
    assert float(at.metric[0].value) == pytest.approx(diff1, abs=2e-3)
    assert float(at.metric[0].delta) == pytest.approx(diff1 - diff0, abs=2e-3)
    p0 = pretrained.next_token_probabilities(before.logits[-1, : gpt.n_tokens])
    p1 = pretrained.next_token_probabilities(after.logits[-1, : gpt.n_tokens])
    nexts = the_one(at, "before and after the edit")["data"]
    names = list(nexts[0]["y"])
    top = np.argsort(-p0, kind="stable")[:8]
    assert names[:8] == [repr(t) for t in gpt.labels([int(i) for i in top])]
    np.testing.assert_allclose(array(nexts[0]["x"])[:8], p0[top], rtol=RTOL_MODEL["torch"], atol=1e-7)
    np.testing.assert_allclose(array(nexts[1]["x"])[:8], p1[top], rtol=RTOL_MODEL["torch"], atol=1e-7)
    assert "edited" in " ".join(c.value for c in at.caption)  # the run says the model was changed
    top0, top1 = (gpt.labels([int(np.argmax(p))])[0] for p in (p0, p1))
    said = at.metric[1]  # the top token: what it is now, and what it was if it changed (no up/down arrow)
    assert said.value == repr(top1)
    assert said.delta == (f"was {top0!r}" if top0 != top1 else "unchanged")
    assert said.proto.direction == said.proto.MetricDirection.NONE


def test_an_edit_that_cannot_be_made_is_a_message(gpt):
    shown = [f"{i}: " + t.replace(" ", "␣") for i, t in enumerate(gpt.labels(gpt.encode(TEXT)[0]))]
    at = page(
        **{"interp.edit_query": shown[0], "interp.edit_kind": KINDS["zero"], "interp.edit_key": shown[0]}
    )
    assert "key" in errors(at)  # query 0 sees only key 0: zeroing it leaves no weight to renormalise
