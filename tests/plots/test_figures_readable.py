"""Figures a teacher found hard to read on a projector or a phone (issue 33's final walk), checked on
the figure's own properties — the axes a panel shares, what a title or tick label says — not on
pixels."""

from __future__ import annotations

import numpy as np

from attnviz.app.timing import figures as timing
from attnviz.interp.roles import ROLES
from attnviz.plots import interp, rope, tiles
from attnviz.plots.colorbar import named_bar


def test_head_role_panels_share_one_labelled_layer_axis():
    """At 390 px the four panels' L0–L29 labels were drawn over their neighbours: the layer axis is
    labelled once, on the first panel, and every panel follows it; titles break to fit a panel."""
    scores = {role: np.random.default_rng(0).random((30, 9)) for role in ROLES}
    fig = interp.role_heatmaps(scores)
    axes = [fig.layout[f"yaxis{i if i > 1 else ''}"] for i in range(1, len(ROLES) + 1)]
    assert axes[0].showticklabels is not False
    for axis in axes[1:]:
        assert axis.matches == "y" and axis.showticklabels is False
    titles = [a.text for a in fig.layout.annotations][: len(ROLES)]
    assert all(max(len(line) for line in t.split("<br>")) <= 9 for t in titles), titles  # ~50 px at 11 px
    for trace in fig.data:
        if trace.type == "heatmap":
            assert list(trace.y) == [f"L{layer}" for layer in range(30)]


def test_timing_bars_name_implementations_in_the_legend_not_under_the_bars():
    rows = [
        {"implementation": name, "length": n, "median_s": 1e-3, "p25_s": 9e-4, "p75_s": 1.1e-3}
        for name in ("attnviz-torch", "torch-mha-weights", "keras-mha-function")
        for n in (128, 256)
    ]
    fig = timing.bars_per_length(rows)
    assert all(axis.showticklabels is False for axis in fig.select_xaxes())
    legend = {t.name for t in fig.data if t.showlegend}
    assert legend == {"attnviz-torch", "torch-mha-weights", "keras-mha-function"}


def test_tile_statistics_title_fits_the_panel():
    """The old title was cut off at 1440 px ("… before and after th")."""
    rows, n = range(3), 3
    fig = tiles.running_stats(
        rows, (np.full(n, -np.inf), np.zeros(n)), (np.zeros(n), np.ones(n)), (np.ones(n), np.full(n, 2.0)),
        ["The", "cat", "sat"],
    )  # fmt: skip
    title = fig.layout.title
    assert max(len(title.text), len(title.subtitle.text)) <= 36 and "tile" in title.subtitle.text


def test_kv_cache_note_says_why_a_bar_is_missing_and_which_bytes_are_counted():
    for heads, kv, layout in ((4, 4, "MHA"), (4, 1, "MQA")):
        note = rope.kv_cache_note(heads, kv)
        assert note.startswith("This configuration has no GQA bar") and layout in note
        assert f"between 1 and {heads}" in note
    grouped = rope.kv_cache_note(8, 2)
    assert "no GQA bar" not in grouped
    assert "2 bytes per value" in grouped and "float32 (4 bytes)" in grouped


def test_a_log_axis_over_less_than_a_decade_labels_enough_values_to_read_them():
    """The walk: times from 1.1 to 3 ms on a log axis labelled only "1" and "2"."""
    ticks = timing.log_ticks([1.1, 1.3, 2.4, 2.95])["tickvals"]
    assert [t for t in ticks if 1 <= t <= 3] == [1, 1.5, 2, 3]
    wide = timing.log_ticks([0.01, 0.5, 20])["tickvals"]  # four decades: decades only, no crowding
    assert wide == [0.01, 0.1, 1, 10]
    mid = timing.log_ticks([1, 50])["tickvals"]  # under two decades: 1, 2, 5 per decade
    assert mid == [1, 2, 5, 10, 20, 50]


def test_tile_memory_axis_speaks_the_pages_binary_units():
    """The walk: the memory chart's axis said kB/MB/GB (powers of 1000) beside text in KiB/MiB."""
    lengths = np.array([16, 256, 4096, 65536])
    full, tiled = 4.0 * lengths**2, np.full(4, 4.0 * 64 * 64)
    axis = tiles.memory_curve(lengths, tiled, full, prompt=256).layout.yaxis
    assert list(axis.ticktext) == ["1 KiB", "32 KiB", "1 MiB", "32 MiB", "1 GiB", "32 GiB"]
    assert list(axis.tickvals) == [2**k for k in range(10, 36, 5)]  # full: 1 KiB at L 16 … 16 GiB


def test_tile_convergence_draws_what_is_below_rounding_as_such_not_as_a_value_on_the_line():
    """The walk: a row already equal to the full softmax (0, or below float32 rounding) was drawn as a
    point on the dashed rounding line, like a row exactly at rounding; only the legend said otherwise.
    Now it is a triangle in a labelled grey band, its own value in the hover."""
    rounding = 1e-7
    distance = np.array([[0.3, 2e-3], [4e-5, 1e-7], [3e-8, 0.0], [np.nan, 5e-9]])
    fig = tiles.convergence(
        distance, [0, 1, 2, 3], [False, True, False, False], 4, range(2), ["a", "b"], rounding
    )
    rows = [t for t in fig.data if t.name.startswith(("0:", "1:"))]
    assert [list(t.marker.symbol) for t in rows] == [
        ["circle", "circle-open", "triangle-down", "triangle-down"],
        ["circle", "triangle-down-open", "triangle-down", "triangle-down"],
    ]
    assert all(np.all(np.asarray(t.y) >= rounding) for t in rows)  # drawable on the log axis, NaN too
    np.testing.assert_array_equal(rows[1].customdata, distance[:, 1])  # the hover keeps the true value
    (band,) = fig.layout.shapes
    assert band.y1 == rounding and band.y0 < rounding and 10 ** fig.layout.yaxis.range[0] <= band.y0
    assert any("at or below rounding" in a.text for a in fig.layout.annotations)


def test_layer_head_maps_fit_a_phone_title_in_two_lines_and_their_colour_bar_under_the_cells():
    """The walk at 390 px: SmolLM2's 30 × 9 patching map cut its 90-character title, gave a third of
    its width to a colour bar beside the cells, and wrote 270 numbers too small to read. Now the title
    is a head over one short line, the bar lies under the map, and only the cells that stand out carry
    their number, at 11 px — which cells is said under the map (`numbers_note`), not in the title:
    with it the title took four lines (issue 46, point 16)."""
    grid = np.random.default_rng(0).uniform(-0.05, 0.05, (30, 9))
    grid[23, 3], grid[29, 1], grid[24, 4], grid[5, 5] = 2.9, 1.7, -1.1, np.nan
    fig = interp.patching_heatmap(grid)
    lines = fig.layout.title.text.replace("<sup>", "").replace("</sup>", "").split("<br>")
    assert lines == ["Activation patching:", "share of the difference restored (1 = all)"]
    assert interp.numbers_note(grid, "restored") == (
        "Numbers on the cells where |restored| is at least 10% of the largest; hover any cell."
    )
    written = {(a, b): t for a, row in enumerate(fig.data[0].text) for b, t in enumerate(row) if t}
    assert written == {(23, 3): "2.90", (29, 1): "1.70", (24, 4): "-1.10"}  # ≥ 0.29: these three only
    assert fig.data[0].textfont.size == 11
    bar = fig.data[0].colorbar
    assert (
        bar.orientation == "h" and bar.yref == "container" and bar.y * fig.layout.height < fig.layout.margin.b
    )
    assert bar.title.text is None and named_bar(fig) == "restored"  # named beside it (issue 33 D5, D6)
    assert fig.layout.title.yanchor == "top" and fig.layout.margin.t >= 44 + 18 * (len(lines) - 1)
    # A map whose cells are all alike writes every number and has nothing to say about a threshold.
    even = np.full((2, 3), 0.5)
    assert all(t == "0.50" for row in interp.patching_heatmap(even).data[0].text for t in row)
    assert interp.numbers_note(even, "restored") == ""


def test_step_by_step_legends_sit_under_the_plot():
    """The walk, at 390 px: the q·k legend took half the plot's width beside it."""
    offsets = np.arange(-8, 9)
    scores = np.cos(np.outer(np.arange(4), offsets) / 3)
    table = {"MHA (4 K/V heads)": 512, "MQA (1 K/V head)": 128}
    for fig in (
        rope.band_scores(scores, offsets, 10_000.0),
        rope.kv_cache_bars({"this": table, "that": table}),
    ):
        assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0, fig.layout.title.text


def test_heads_named_on_the_agreement_scatter_are_legend_entries_not_text_on_the_points():
    """The walks: names written beside close points ran into each other ("L20.H0" over "L17.H4", then
    "L23.H0" under a marker): each named head is its own trace, its own symbol, named in the legend."""
    from attnviz.app.interpret.figures import agreement_scatter

    exact = np.array([[0.10, 0.11, 0.50], [0.12, 0.90, 0.30]])
    estimate = exact + 0.05
    fig = agreement_scatter(exact, estimate, [(0, 0), (0, 1), (1, 0)])
    named = fig.data[2:]
    assert [t.name for t in named] == ["L0.H0", "L0.H1", "L1.H0"] and all(
        t.showlegend is not False for t in named
    )
    assert len({t.marker.symbol for t in named}) == 3  # told apart without reading a name on the chart
    assert all("text" not in t.mode for t in fig.data)
    np.testing.assert_allclose([(t.x[0], t.y[0]) for t in named], [(0.10, 0.15), (0.11, 0.16), (0.12, 0.17)])


def test_the_agreement_scatter_keeps_its_axes_on_the_data():
    """Issue 46, point 16: the exact axis spanned −1.5…2 for heads in −0.3…0.6. Equal scales tied by
    `scaleanchor` widen the longer axis's range to the chart's shape unless the axis gives up length
    instead (`constrain="domain"`); both ranges are the data's with a margin of at most a tenth."""
    from attnviz.app.interpret.figures import agreement_scatter

    rng = np.random.default_rng(1)
    exact = rng.uniform(-0.3, 0.6, (4, 6))
    estimate = exact + rng.normal(0, 0.05, exact.shape)
    fig = agreement_scatter(exact, estimate, [(0, 0)])
    low, high = min(exact.min(), estimate.min()), max(exact.max(), estimate.max())
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        lo, hi = axis.range
        assert lo <= low and hi >= high and (hi - lo) <= 1.2 * (high - low), (axis.range, low, high)
        assert axis.constrain == "domain"  # a browser draws this range, whatever the chart's width
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis.scaleratio == 1  # the diagonal at 45°


def test_position_labels_draw_the_tokens_spaces_and_not_the_separators():
    """The attention editor wrote "1:␣␣Mary" for " Mary" (the space after the colon drawn too) where
    the logit lens writes "1: ␣Mary": a class reads two spaces."""
    assert interp.position_labels(["When", " Mary", " and", "\n", "  x"]) == [
        "0: When", "1: ␣Mary", "2: ␣and", "3: ⏎", "4: ␣␣x",
    ]  # fmt: skip


def test_direct_logit_parts_name_a_few_layers_level_instead_of_62_slanted_names():
    """The final walk found the 62 bar names of a 30-layer model under "Direct contributions … by part"
    drawn over each other: a few layers are named, level, at their heads' bars (each bar's name on hover)."""
    from types import SimpleNamespace

    from attnviz.app.interpret.figures import LAYER_TICKS, logit_parts

    rng = np.random.default_rng(0)
    L = 30
    parts = SimpleNamespace(
        mlps=rng.normal(size=L), heads=rng.normal(size=(L, 9)), embeddings=0.1, attn_biases=np.zeros(L),
        norm_bias=0.0, logit_diff=1.0, total=1.0, answer=" Mary", wrong=" John",
    )  # fmt: skip
    axis = logit_parts(parts).layout.xaxis
    assert axis.tickangle == 0 and len(axis.ticktext) <= LAYER_TICKS
    assert set(axis.tickvals) <= set(axis.categoryarray) and len(axis.categoryarray) == 2 * L + 2
    assert list(axis.ticktext)[:2] == ["L0", "L5"]
    named = dict(zip(axis.tickvals, axis.ticktext, strict=True))
    assert all(named[v] == v.split()[0] for v in axis.tickvals if v.startswith("L"))  # at its layer's bar


def test_tile_titles_break_into_lines_a_phone_holds():
    """At 390 px the walk read "… max |differen" and "… against sequence l": these titles are a title
    and a subtitle of at most 36 characters each (a phone's chart is ~300 px wide), hung under the
    mode bar's band (the browser test measures them clear of it)."""
    rounding, distance = 1e-7, np.array([[0.3, 2e-3], [4e-5, 1e-7]])
    lengths = np.array([16, 256, 4096])
    figs = [
        tiles.convergence(distance, [0, 1], [False, False], 2, range(2), ["a", "b"], rounding),
        tiles.memory_curve(lengths, np.full(3, 4096.0), lengths.astype(float) ** 2 * 4, prompt=256),
    ]
    for fig in figs:
        lines = [fig.layout.title.text, fig.layout.title.subtitle.text]
        assert all(lines) and max(len(line) for line in lines) <= 36, lines
        assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
        assert fig.layout.margin.t >= tiles.heatmaps.TOOLBAR_PX + tiles.TITLES_PX  # both lines above the plot
