"""Issue 17 §2: with grouped K/V heads the explorer groups the query heads by the K/V head they read."""

import json

from tests.app.conftest import assert_clean, open_page


def head_grid(at) -> dict:
    return next(
        spec
        for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
        if spec["layout"]["annotations"]
    )


def test_heads_are_grouped_by_the_kv_head_they_read():
    at = open_page("explorer", {"n_heads": "8", "n_kv_heads": "2", "d_model": "32"})
    assert_clean(at)
    titles = [a["text"] for a in head_grid(at)["layout"]["annotations"] if "K/V" in a["text"]]
    assert titles == [f"head {h} · K/V {h // 4}" for h in range(8)]
    grid = head_grid(at)
    panels = [t for t in grid["data"] if t["type"] == "heatmap"]

    def column(panel) -> tuple:  # the panel's horizontal place in the grid
        return tuple(grid["layout"]["xaxis" + panel["xaxis"][1:]]["domain"])

    assert len({column(p) for p in panels[:4]}) == 4  # 4 query heads per K/V head: one row of 4
    assert column(panels[4]) == column(panels[0])  # K/V head 1's row starts under K/V head 0's
    assert "one row of panels per K/V head (2 shared by 8 query heads)" in " ".join(
        c.value for c in at.caption
    )


def test_one_kv_head_per_query_head_keeps_plain_titles():
    at = open_page("explorer", {"n_heads": "4", "d_model": "32"})
    assert_clean(at)
    assert not any("K/V" in a["text"] for a in head_grid(at)["layout"].get("annotations", []))
