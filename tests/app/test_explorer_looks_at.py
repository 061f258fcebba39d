"""Issue 33: the explorer's per-head summary names the position a head looks at most, not only the
word — "the" occurs three times in the default sentence, and the four hand-built heads would all
read "the" without it — and says a tie when several keys share the top (the final walk found the
"same position" head, spread evenly over the keys in total, named "the" at 0)."""

from __future__ import annotations

import json

import numpy as np

from attnviz.interp.scores import head_summary, looks_most_at
from attnviz.params import tokenize
from tests.app.conftest import array, assert_clean, open_page

SENTENCE = "the cat sat on the mat because the cat was tired"


def test_looks_most_at_names_the_word_and_its_position():
    at = open_page("explorer", {"input": "sentence", "sentence": SENTENCE, "weights": "interpretable"})
    assert_clean(at)
    (table,) = [d.value for d in at.dataframe if "looks most at" in d.value.columns]
    grid = next(
        spec
        for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
        if [t for t in spec["data"] if t["type"] == "heatmap" and t.get("name") == "head 0"]
    )
    weights = np.stack([array(t["z"]) for t in grid["data"] if t["type"] == "heatmap"][: len(table)])
    words = tokenize(SENTENCE)
    expected = [looks_most_at(r) for r in head_summary(np.nan_to_num(weights), words)]
    assert list(table["looks most at"]) == expected
    for said, w in zip(expected, np.nan_to_num(weights), strict=True):  # from the figure's own weights
        share = w.sum(0) / w.sum()
        if (share >= share.max() - 0.005).sum() > 1:  # several keys at the top: a tie, not the first of them
            assert said.startswith("no single key")
        else:
            assert said == f"“{words[int(share.argmax())]}” (position {int(share.argmax())})"
    assert len(set(table["looks most at"])) > 1  # "the" at 0, 4, 7 told apart, ties said


def test_under_a_causal_mask_the_table_leaves_out_the_one_key_row_and_says_so():
    """Issue 46, point 10: every head read "max weight 1" and "looks most at position 0" (row 0)."""
    at = open_page("explorer", {"input": "sentence", "sentence": SENTENCE, "mask": "causal"})
    assert_clean(at)
    (table,) = [d.value for d in at.dataframe if "looks most at" in d.value.columns]
    assert (table["max weight"] < 1).all(), table
    assert not all("position 0" in said for said in table["looks most at"])
    said = " ".join(c.value for c in at.caption)
    assert "leave out the 1 row with one allowed key" in said
