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


def bar_name(text: str, **place) -> dict:
    """The annotation naming a colour bar, at `place` (paper coordinates, pixel shifts)."""
    return {"text": text, "name": BAR_NAME, "showarrow": False, "xref": "paper", "yref": "paper",
            "font": {"size": 13}, **place}  # fmt: skip


def named_bar(fig) -> str | None:
    """The name written beside `fig`'s colour bar (a figure or its dict), or None."""
    annotations = (fig.get("layout", {}) if isinstance(fig, dict) else fig.to_plotly_json()["layout"]).get(
        "annotations", []
    )
    return next((a["text"] for a in annotations if a.get("name") == BAR_NAME), None)
