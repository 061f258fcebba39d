"""Horizontal colour bars, named by an annotation beside them rather than by their own title.

plotly.js draws a horizontal colour bar's title badly: on side "right" it puts the title on the
left and moves the bar's outline, but not its colours, by the title's width (measured in Chromium:
2-5 px on every heatmap's bar, 23 px on Compare's "|Δ| ÷ tolerance"; issue 33 D5); on side "top"
it draws the title touching the bar (D6). Without a title, colours and outline coincide. So the
bars here have none, and `bar_name` writes the name as an annotation, found again by its `name`.
"""

from __future__ import annotations

BAR_PX = 220  # a horizontal colour bar's length, its padding included: fits beside its name on a phone
BAR_PAD_PX = 10  # plotly's padding around a colour bar (its xpad and ypad)
BAR_THICK_PX = 12
NAME_GAP_PX = 2  # between a colour bar's box (its padding included) and its name
BAR_NAME = "colour bar's name"  # the `name` of the annotation that names a colour bar
NAME_FONT_PX = 13
PHONE_CHART_PX = 358  # a full-width chart on a 390-px phone (the page's 16-px padding each side)
MIN_BAR_PX = 120  # a bar still long enough for its five ticks


def bar_px_beside(left_px: int, name: str) -> int:
    """A colour bar's length (its padding included) that leaves its name room on a phone, the bar
    starting `left_px` from the chart's left edge (the row labels and the axis title): from `MIN_BAR_PX`
    to `BAR_PX`. (Issue 46's phone walk: Decoding's "k feature" was cut to "k fe" right of a full-length
    bar that started after labels such as "6: because".) The name's width is estimated as
    `attnviz.plots.labels.text_px` estimates a label's."""
    name_px = int(len(name) * NAME_FONT_PX * 0.62) + 6
    return max(MIN_BAR_PX, min(BAR_PX, PHONE_CHART_PX - left_px - NAME_GAP_PX - name_px))


def bar_name(text: str, **place) -> dict:
    """The annotation naming a colour bar, at `place` (paper coordinates, pixel shifts)."""
    return {"text": text, "name": BAR_NAME, "showarrow": False, "xref": "paper", "yref": "paper",
            "font": {"size": NAME_FONT_PX}, **place}  # fmt: skip


def named_bar(fig) -> str | None:
    """The name written beside `fig`'s colour bar (a figure or its dict), or None."""
    annotations = (fig.get("layout", {}) if isinstance(fig, dict) else fig.to_plotly_json()["layout"]).get(
        "annotations", []
    )
    return next((a["text"] for a in annotations if a.get("name") == BAR_NAME), None)
