"""The Interpretability page's "Score parts" tab on a tiny random GPT-2 (offered through
`ATTNVIZ_CHECKPOINTS`): the link opens a head and a cell, the table and lift drawn are the
library's (`score_table.score_row`), the largest terms are said in words, the pattern's cells carry
their (query, key) for a click, the CSV holds every term, and the worked example sets the fields to
the role scan's induction head at the token the induction story predicts."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.app.interpret import parts
from attnviz.interp import roles, score_row
from attnviz.interp.score_table import example, words
from tests.app.conftest import TINY_GPT2, array, assert_clean, chart, errors, heatmaps, open_page, plain
from tests.conftest import ATOL_FIGURE

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

TEXT = "the cat sat on the mat. the cat"
REPEATED = "the mat. the mat"  # the worked example's text, short enough for the tiny GPT-2's 32 positions
SCAN = {"interp.half": "8", "interp.n": "1", "interp.seed": "0"}


def page(**state):
    at = open_page(
        "interpret", {"interp.checkpoint": TINY_GPT2, "interp.tab": "Score parts", **SCAN, **state}
    )
    assert_clean(at)
    return at


def test_the_link_opens_a_cell_and_the_figures_are_the_librarys(gpt):
    T = len(gpt.encode(TEXT)[0])
    query, key = T - 1, 2
    at = page(**{"interp.parts_text": TEXT, "interp.parts_head": "L1.H2", "interp.parts_query": str(query),
                 "interp.parts_key": str(key)})  # fmt: skip
    assert not errors(at), errors(at)
    row = score_row(gpt, TEXT, 1, 2, query, key=key)
    for key_name, table in (("interp.parts_table", row.parts.table), ("interp.parts_lift", row.lift)):
        rows, cols, shown = words.condensed(table, row.parts.query_parts, row.parts.key_parts, 16)
        (drawn,) = heatmaps(chart(at, key_name))
        assert list(drawn["y"]) == rows and list(drawn["x"]) == cols
        np.testing.assert_allclose(array(drawn["z"]), shown, atol=ATOL_FIGURE, rtol=1e-6)
    said = plain(" ".join(m.value for m in at.markdown))
    assert f"score **{row.parts.score:.4f}**" in said and f"sum to **{row.parts.total:.4f}**" in said
    assert all(plain(s) in said for s in words.largest(row.parts, 5))
    # Tokens read as the other tabs show them, not the vocabulary's "Ġthe" (the final walk of 28 Nov 2026).
    labels = gpt.labels(gpt.encode(TEXT)[0])
    (pattern,) = heatmaps(chart(at, "interp.parts_pattern"))
    assert list(pattern["x"]) == parts.interp_plots.position_labels(labels)
    assert f"query {query} ({labels[query]!r})" in said and "Ġ" not in said
    markers = next(t for t in chart(at, "interp.parts_pattern")["data"] if t["type"] == "scatter")
    assert isinstance(markers["customdata"], list)  # a typed array's rows reach the callback as dicts
    cells = array(markers["customdata"])  # (T·T, 2): a click on a cell hands over its (query, key)
    assert cells.shape == (T * T, 2) and tuple(cells[query * T + key]) == (query, key)
    click = [{"x": "k", "y": "q", "customdata": [int(v) for v in cells[query * T + key]]}]
    assert parts.clicked_cell(click) == (query, key)
    assert parts.clicked_cell([{"customdata": [2, 5]}]) is None and parts.clicked_cell([]) is None
    (download,) = [b for b in at.get("download_button") if "interp.parts_csv" in b.proto.id]
    assert download.proto.label == "Download every term (CSV)"


def test_a_key_the_query_cannot_see_is_a_message(gpt):
    at = page(**{"interp.parts_text": TEXT, "interp.parts_query": "2", "interp.parts_key": "5"})
    assert "key" in errors(at) and "the keys query 2 sees" in errors(at)


def test_the_worked_example_sets_the_induction_head_and_its_cell(gpt, monkeypatch):
    monkeypatch.setattr(example, "EXAMPLE_TEXT", REPEATED)
    at = page()
    at.button(key="interp.parts_example").click().run()
    assert_clean(at)
    assert not errors(at), errors(at)
    scan = roles.scan(gpt, "torch", half=8, n=1, seed=0)
    layer, head, _ = scan.top("induction", 1)[0]
    ids = gpt.encode(REPEATED)[0]
    query = example.example_query(ids)
    assert at.text_input(key="interp.parts_text").value == REPEATED
    assert at.selectbox(key="interp.parts_head").value == f"L{layer}.H{head}"
    assert at.number_input(key="interp.parts_query").value == query
    assert at.number_input(key="interp.parts_key").value == example.induction_target(ids, query)
    assert "previous-token heads" in " ".join(plain(c.value) for c in at.caption)
