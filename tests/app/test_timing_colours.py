"""Timing's figures colour each implementation the same everywhere (issue 33): the line chart, the
bars and the ceiling chart, read from the figures the page draws after a real sweep."""

from tests.app.conftest import assert_clean, figures, open_page


def test_one_colour_per_implementation_in_every_chart():
    at = open_page("timing")
    impls = ["attnviz-torch", "torch-mha-weights", "torch-sdpa"]
    at.multiselect(key="timing.impls").set_value(impls)
    at.pills(key="timing.lengths").set_value([16, 32])
    at.selectbox(key="timing.d_model").set_value(64)
    at.number_input(key="timing.repeats").set_value(3)
    at.button[0].click().run()
    assert_clean(at)
    lines, bars, ceiling, _memory = figures(at)

    def colours(fig, kind):
        seen = {}
        for t in fig["data"]:
            if t["type"] != kind or not t.get("name") or t["name"].startswith("noisy"):
                continue
            name = t["name"].split(" (slope")[0]
            colour = (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color")
            seen.setdefault(name, set()).add(colour)
        return seen

    line_colours, bar_colours, ceiling_colours = (
        colours(lines, "scatter"),
        colours(bars, "bar"),
        colours(ceiling, "scatter"),
    )
    assert set(line_colours) == set(bar_colours) == set(ceiling_colours) == set(impls)
    for name in impls:  # one colour per implementation, the same in the three charts
        assert len(line_colours[name] | bar_colours[name] | ceiling_colours[name]) == 1, name
    assert len({next(iter(c)) for c in line_colours.values()}) == len(impls)  # and a different one each
    bar_traces = [t for t in bars["data"] if t["type"] == "bar"]
    assert len(bar_traces) == len(impls) * 2  # each implementation at each length
    assert sum(1 for t in bar_traces if t.get("showlegend", True)) == len(impls)  # one legend entry each
