"""Readable figures (issue 9): every token labelled, panels sized from the tokens, one look for
blocked cells, a colour scale a single-key row cannot wash out, log axes labelled at decades."""

import re

import numpy as np
import pytest

from attnviz import masks
from attnviz.app.timing.figures import ceiling_fraction, time_vs_length
from attnviz.plots import heatmaps
from attnviz.plots.blocked import BLOCKED_COLOR, CROSS_COLOR
from attnviz.plots.labels import duration

WORDS = [f"word{i}" for i in range(100)]  # distinct labels of realistic width


def weights(h: int, n: int, blocked=None, seed: int = 0) -> np.ndarray:
    """Softmax-like rows `(h, n, n)`: positive, summing to 1 over the allowed keys."""
    w = np.random.default_rng(seed).random((h, n, n)) + 0.05
    if blocked is not None:
        w = np.where(blocked, 0.0, w)
    total = w.sum(-1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0)


def axes(fig, letter: str) -> list:
    """The figure's x or y axes in subplot order (xaxis, xaxis2, …)."""
    names = [k for k in fig.layout if re.fullmatch(f"{letter}axis\\d*", k)]
    return [fig.layout[k] for k in sorted(names, key=lambda k: int(k[5:] or 1))]


def shown(axis) -> list[str]:
    """Tick labels an axis draws, without the invisible suffixes that keep repeats apart."""
    return [t.replace("\u200b", "") for t in axis.ticktext]


def panel_px(fig, axis) -> float:
    """Height in pixels of the panel that `axis` (a y axis) spans."""
    m = fig.layout.margin
    return (axis.domain[1] - axis.domain[0]) * (fig.layout.height - m.t - m.b)


def keys_left_to_the_width(fig, n: int) -> bool:
    """Every x axis labels its keys as the drawn width allows (plotly's category ticks: every key on
    a desktop, every k-th on a phone; tests/browser/test_trust_pages.py counts them drawn), over
    the n keys in order."""
    keys = [[str(k).replace("\u200b", "") for k in t.x] for t in fig.data if t.type == "heatmap"]
    return all(a.tickmode == "auto" and not a.tickvals for a in axes(fig, "x")) and all(
        k == WORDS[:n] for k in keys
    )


@pytest.mark.parametrize("n", [28, 64])
def test_head_grid_labels_every_query_and_the_keys_the_width_holds(n):
    fig = heatmaps.head_grid(weights(4, n), WORDS[:n], WORDS[:n])
    assert fig.layout.meta["label_stride"] == 1
    for axis in axes(fig, "y"):
        assert axis.tickmode == "array" and shown(axis) == WORDS[:n]
        assert panel_px(fig, axis) >= 14 * n - 0.5, "at least 14 px per token row"
    assert keys_left_to_the_width(fig, n)


@pytest.mark.parametrize("n", [28, 64])
def test_matrix_labels_every_query_and_the_keys_the_width_holds(n):
    fig = heatmaps.matrix(weights(1, n)[0], WORDS[:n], WORDS[:n], diverging=False)
    assert shown(fig.layout.yaxis) == WORDS[:n] and keys_left_to_the_width(fig, n)
    m = fig.layout.margin
    assert fig.layout.height - m.t - m.b >= 14 * n - 0.5


def test_a_feature_axis_keeps_its_own_limit():
    fig = heatmaps.matrix(weights(1, 32)[0], WORDS[:32], [str(i) for i in range(32)], x_label_limit=8)
    assert fig.layout.xaxis.tickmode == "array" and list(fig.layout.xaxis.ticktext) == [
        str(i) for i in range(0, 32, 4)
    ]


def test_above_64_tokens_every_kth_label_and_the_stride_is_stated():
    fig = heatmaps.head_grid(weights(2, 100), WORDS, WORDS)
    assert fig.layout.meta["label_stride"] == 2
    assert shown(fig.layout.yaxis) == WORDS[::2] and keys_left_to_the_width(fig, 100)


def test_panels_grow_with_tokens_and_fewer_share_a_row():
    small, mid, big = (heatmaps.head_grid(weights(8, n), WORDS[:n], WORDS[:n]) for n in (8, 28, 64))
    assert small.layout.height < mid.layout.height < big.layout.height
    assert small.layout.meta["columns"] == 2, "two panels a row fit a phone"
    assert mid.layout.meta["columns"] == big.layout.meta["columns"] == 1


def test_no_label_is_drawn_over_a_neighbouring_panel():
    n = 20
    fig = heatmaps.head_grid(weights(4, n), WORDS[:n], WORDS[:n])  # 2 × 2 panels
    ys = axes(fig, "y")
    # Query labels only on the left of each row (the panels of a row share them) …
    assert [a.showticklabels is not False for a in ys] == [True, False, True, False]
    # … key labels upright only when short; long ones vertical, inside their panel's width …
    assert all(a.tickangle == -90 for a in axes(fig, "x"))
    # … and the gap between rows holds the vertical key labels of the row above.
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    gap_px = (ys[0].domain[0] - ys[2].domain[1]) * plot_px
    label_px = max(map(len, WORDS[:n])) * 10 * 0.6
    assert gap_px >= label_px + 20


def test_blocked_cells_are_grey_with_a_cross_in_head_grid_and_weights_stay_zero():
    blocked = ~masks.causal(6)
    fig = heatmaps.head_grid(weights(3, 6, blocked), blocked=blocked)
    for h, trace in enumerate(fig.data[:3]):
        assert (np.asarray(trace.z)[blocked] == 0).all(), "the data stay the weights"
        fills = [
            s
            for s in fig.layout.shapes
            if s.fillcolor == BLOCKED_COLOR and s.xref == ("x" if h == 0 else f"x{h + 1}")
        ]
        assert len(fills) == 1 and fills[0].layer == "above"
        assert rebuilt(fills[0].path, 6, 6).tolist() == blocked.tolist()
    crosses = [s for s in fig.layout.shapes if s.line.color == CROSS_COLOR]
    assert len(crosses) == 3 and all(s.path.count("M") == 2 * blocked.sum() for s in crosses)
    assert any(t.name == "blocked (masked out)" and t.showlegend for t in fig.data)


def rebuilt(path: str, rows: int, cols: int) -> np.ndarray:
    """The cells covered by rectangles `M c0,r0 H c1 V r1 H c0 Z` (cell centres at integers)."""
    out = np.zeros((rows, cols), bool)
    for c0, r0, c1, r1 in re.findall(r"M([-\d.]+),([-\d.]+)H([-\d.]+)V([-\d.]+)H[-\d.]+Z", path):
        r0, r1, c0, c1 = (round(float(v) + 0.5) for v in (r0, r1, c0, c1))
        out[r0:r1, c0:c1] = True
    return out


def test_matrix_draws_blocked_weights_like_masked_scores():
    blocked = ~masks.causal(5)
    w = weights(1, 5, blocked)[0]
    scores = np.where(blocked, -np.inf, 1.0)
    for fig in (heatmaps.matrix(w, blocked=blocked, diverging=False), heatmaps.matrix(scores)):
        z = np.array(fig.data[0].z, dtype=float)
        assert np.isnan(z[blocked]).all() and np.isfinite(z[~blocked]).all()
        fill = next(s for s in fig.layout.shapes if s.fillcolor == BLOCKED_COLOR)
        assert rebuilt(fill.path, 5, 5).tolist() == blocked.tolist()
        assert fig.data[1].name.startswith("blocked") and list(fig.data[1].x) == [None]  # a legend entry
        hover = np.array(fig.data[0].text, dtype=object)
        assert all(t.startswith("blocked") for t in hover[blocked]) and not any(
            t.startswith("blocked") for t in hover[~blocked]
        )


def test_one_look_for_blocked_cells_in_every_heatmap():
    """head_grid and matrix draw a blocked cell the same way: grey shapes with a ✕, one legend
    entry with the same marker, and no per-cell markers (a marker has a fixed pixel size and
    spills over its neighbours when cells are small)."""
    blocked = ~masks.causal(6)
    w = weights(1, 6, blocked)
    figs = [heatmaps.head_grid(w, blocked=blocked), heatmaps.matrix(w[0], blocked=blocked, diverging=False)]
    looks = []
    for fig in figs:
        shapes = [s for s in fig.layout.shapes if s.xref == "x"]
        looks.append([(s.fillcolor, s.line.color, s.line.width, s.layer, s.path) for s in shapes])
        scatters = [t for t in fig.data if t.type == "scatter"]
        assert len(scatters) == 1 and list(scatters[0].x) == [None] and scatters[0].showlegend
        assert scatters[0].marker.symbol == "square-x" and scatters[0].marker.color == BLOCKED_COLOR
    assert looks[0] == looks[1] and len(looks[0]) == 2  # the grey fill and the crosses


def test_colour_scale_is_not_set_by_a_row_with_one_allowed_key():
    blocked = ~masks.causal(8)
    w = weights(4, 8, blocked)
    fig = heatmaps.head_grid(w, blocked=blocked)
    assert w[:, 0, 0].tolist() == [1.0] * 4  # row 0 of a causal mask: one key, weight 1
    assert fig.layout.coloraxis.cmax == pytest.approx(w[:, 1:].max()) and fig.layout.coloraxis.cmax < 1
    assert "two or more allowed keys" in fig.layout.meta["color_scale"]
    full = heatmaps.head_grid(weights(4, 8))  # no row is trivially certain: the scale is the maximum
    assert full.layout.coloraxis.cmax == pytest.approx(weights(4, 8).max())


def test_values_in_cells_up_to_16_by_16():
    assert heatmaps.head_grid(weights(2, 16), show_values=True).data[0].texttemplate == "%{z:.2f}"
    assert heatmaps.head_grid(weights(2, 17), show_values=True).data[0].texttemplate is None
    assert heatmaps.head_grid(weights(2, 8)).data[0].texttemplate is None
    assert (
        heatmaps.matrix(weights(1, 12)[0], diverging=False, show_values=True).data[0].texttemplate
        == "%{z:.2f}"
    )


def test_panels_report_clicks_through_invisible_cell_markers():
    w = weights(3, 5)
    fig = heatmaps.head_grid(w, clickable=True)
    assert fig.layout.meta["clickable"]
    for h in range(3):
        target = fig.data[3 + h]
        assert target.type == "scatter" and target.name == f"head {h}" and target.marker.opacity == 0
        np.testing.assert_allclose(np.asarray(target.customdata), w[h].reshape(-1))
        assert target.xaxis == fig.data[h].xaxis and target.yaxis == fig.data[h].yaxis
    big = heatmaps.head_grid(weights(16, 20), clickable=True)  # 6400 cells: too many markers
    assert not big.layout.meta["clickable"] and all(t.type == "heatmap" for t in big.data)


def test_binary_mask_has_a_two_colour_legend_not_a_colour_bar():
    keep = masks.causal(4)
    for name, info in masks.CONVENTIONS.items():
        encoded = masks.to_convention(keep, name)
        fig = heatmaps.binary_mask(encoded, title=info["title"], attend=info["attend"])
        assert fig.data[0].showscale is False and fig.layout.title.text == info["title"]
        legend = sorted(t.name for t in fig.data[1:])
        one, zero = ("True", "False") if encoded.dtype == bool else ("1", "0")
        attend_is_one = bool(info["attend"])
        assert legend == sorted(
            [
                f"{one} = {'may attend' if attend_is_one else 'blocked'}",
                f"{zero} = {'blocked' if attend_is_one else 'may attend'}",
            ]
        )
        assert np.array_equal(np.asarray(fig.data[0].z), encoded.astype(int))


def test_mask_conventions_name_the_idea_not_the_project_sources():
    for name, info in masks.CONVENTIONS.items():
        text = " ".join([name, info["title"], info["meaning"], info["code"]])
        assert "seed" not in text.lower()
        assert len(info["title"]) <= 32, "a panel title that fits"
        assert max(map(len, info["code"].splitlines())) <= 36, "code that fits a half-width column"


def bench_rows(lengths, times_ms):
    return [
        {"implementation": "a", "length": n, "median_s": t / 1e3, "p25_s": t * 0.9 / 1e3, "p75_s": t * 1.1 / 1e3,
         "fraction_of_ceiling": 0.5, "gflops_per_s": 1.0, "ceiling_gflops_per_s": 2.0}
        for n, t in zip(lengths, times_ms, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ([0.05, 0.4, 3.0, 25.0, 220.0], ["0.1", "1", "10", "100"]),  # four decades: decades only
        ([0.3, 0.9, 2.8], ["0.2", "0.5", "1", "2"]),  # one decade: 2 and 5 as well
    ],
)
def test_log_time_axis_is_labelled_at_decades(times, expected):
    fig = time_vs_length(bench_rows([64, 128, 256, 512, 1024][: len(times)], times))
    y = fig.layout.yaxis
    assert y.type == "log" and list(y.ticktext) == expected
    assert y.minor.dtick == "D1" and y.minor.ticks == "outside"  # unlabelled minor ticks
    x = fig.layout.xaxis
    assert list(x.ticktext) == [str(n) for n in [64, 128, 256, 512, 1024][: len(times)]]
    assert list(ceiling_fraction(bench_rows([64, 128], [1.0, 2.0])).layout.xaxis.ticktext) == [
        "64",
        "128",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (9.12e-5, "91.2 µs"),
        (3.21e-4, "321 µs"),
        (9.996e-4, "1 ms"),
        (1.89e-3, "1.89 ms"),
        (0.14887, "149 ms"),
        (2.5, "2.5 s"),
    ],
)
def test_durations_are_short_enough_for_a_metric(seconds, text):
    assert duration(seconds) == text


def test_ceiling_plot_never_draws_a_row_above_100_percent():
    rows = bench_rows([64, 128, 256], [1.0, 2.0, 4.0])
    rows[1].update(noisy=True, fraction_of_ceiling=None)  # as attnviz.bench flags it
    rows[2].update(fraction_of_ceiling=1.4)  # an older result file, unflagged
    fig = ceiling_fraction(rows)
    line, marks = fig.data
    assert list(line.y) == [0.5, None, None] and max(fig.layout.yaxis.range) <= 1.05
    assert list(marks.x) == [128, 256] and list(marks.y) == [1.0, 1.0] and "noisy" in marks.name


def test_a_block_averaged_figure_without_a_title_says_so_without_a_dangling_dash():
    w = weights(2, 300)
    assert heatmaps.head_grid(w).layout.title.text == "Block-averaged 2×2"  # 2 × 300² cells → 150²
    assert heatmaps.head_grid(w, title="Layer 0").layout.title.text == "Layer 0 — block-averaged 2×2"


def test_cell_values_only_where_a_projector_can_read_them():
    """4 panels a row of 12 keys leave ~20 px a cell at 1440 px: too narrow for '0.12'."""
    w = weights(4, 12)
    four = heatmaps.head_grid(w, cols=4, show_values=True)
    two = heatmaps.head_grid(w, cols=2, show_values=True)
    assert not four.layout.meta["values_written"] and four.data[0].texttemplate is None
    assert two.layout.meta["values_written"] and two.data[0].texttemplate == "%{z:.2f}"
    assert two.data[0].textfont.size >= 13
