"""Issue 33: the Step-by-step RoPE pairs plot draws both axes at one scale over one range centred on
the origin, so the caption's fact — each pair keeps its length — is what the reader sees: both points
of a pair on the pair's circle, the after-point the before-point turned by position · base^(−2i/d)."""

import numpy as np
import pytest

from attnviz import reference
from attnviz.plots.rope import pair_rotation
from tests.app.conftest import array, assert_clean, figures, open_page
from tests.conftest import ATOL_F64, RTOL_FIGURE


def pairs_figure(at) -> dict:
    (found,) = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Pairs (i, i+d/2)")]
    return found


def points(figure: dict) -> tuple[np.ndarray, np.ndarray]:
    """`(d,)` before and after, as the figure holds them (x: features i, y: features i + d/2)."""
    before, after = (t for t in figure["data"] if t.get("mode") == "markers+text")
    return tuple(np.r_[array(t["x"]), array(t["y"])] for t in (before, after))


def assert_square(layout: dict) -> None:
    """One scale (y anchored to x, ratio 1) and one range, centred on 0, on both axes."""
    x, y = layout["xaxis"], layout["yaxis"]
    assert y["scaleanchor"] == "x" and y.get("scaleratio", 1) == 1
    assert x["range"] == y["range"] and x["range"][0] == -x["range"][1] > -np.inf


@pytest.mark.parametrize(("d_model", "heads", "pos"), [("32", "4", "5"), ("64", "2", "7")])
def test_the_pairs_plot_has_equal_scales_and_each_pair_stays_on_its_circle(d_model, heads, pos):
    at = open_page("steps", {"d_model": d_model, "n_heads": heads, "rope_base": "10000", "steps.pos": pos})
    assert_clean(at)
    figure = pairs_figure(at)
    assert_square(figure["layout"])
    before, after = points(figure)
    d, p = len(before), int(pos)
    assert d == int(d_model) // int(heads)
    # the after-point is the before-point turned by RoPE at this position (the reference, float64)
    turned = reference.rope(np.tile(before, (p + 1, 1)), 10000.0)[p]
    np.testing.assert_allclose(after, turned, atol=RTOL_FIGURE * np.abs(before).max())
    radius = np.hypot(before[: d // 2], before[d // 2 :])
    np.testing.assert_allclose(np.hypot(after[: d // 2], after[d // 2 :]), radius, rtol=RTOL_FIGURE)
    assert figure["layout"]["xaxis"]["range"][1] > radius.max()  # every circle inside the square
    circles = [t for t in figure["data"] if t.get("mode") == "lines" and t["line"].get("dash") == "dot"]
    assert len(circles) == d // 2
    for circle in circles:  # each pair's circle has the pair's length as its radius
        r = np.hypot(array(circle["x"]), array(circle["y"]))
        np.testing.assert_allclose(r, radius[circle["meta"]["pair"]], rtol=RTOL_FIGURE)


def test_the_arc_runs_from_before_to_after_counter_clockwise():
    before = np.array([1.0, 0.0, 0.0, 2.0])  # pairs (1, 0) and (0, 2)
    after = reference.rope(np.tile(before, (4, 1)), 100.0)[3]  # turned by 3 and 0.3 radians (100^(−2i/4))
    figure = pair_rotation(before, after, 3).to_plotly_json()
    assert_square(figure["layout"])
    arcs = [t for t in figure["data"] if t.get("mode") == "lines" and "dash" not in t["line"]]
    for i, arc in enumerate(arcs):
        x, y = array(arc["x"]), array(arc["y"])
        np.testing.assert_allclose((x[0], y[0]), (before[i], before[i + 2]), atol=ATOL_F64)
        np.testing.assert_allclose((x[-1], y[-1]), (after[i], after[i + 2]), atol=ATOL_F64)
        steps = np.diff(np.unwrap(np.arctan2(y, x)))
        assert (steps >= 0).all()  # counter-clockwise, as rotate_half turns
        np.testing.assert_allclose(steps.sum(), 3 * 100.0 ** (-i / 2), atol=ATOL_F64)
