"""Issue 33: the explorer's per-head summary names the position a head looks at most, not only the
word — "the" occurs three times in the default sentence, and the four hand-built heads would all
read "the" without it."""

from __future__ import annotations

import json

import numpy as np

from attnviz.interp.scores import head_summary
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
    expected = [
        f"“{r['top_key']}” (position {r['top_key_index']})"
        for r in head_summary(np.nan_to_num(weights), words)
    ]
    assert list(table["looks most at"]) == expected
    assert all(
        words[int(e.rsplit(" ", 1)[1][:-1])] == e.split("”")[0][1:] for e in expected
    )  # the word at it
    assert len(set(table["looks most at"])) > 1 or words.count("the") == 1  # "the" at 0, 4, 7 told apart
