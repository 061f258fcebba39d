"""Text on figures: escaped, unique tick labels, label strides and durations.

Every label that may come from a user (tokens, titles) goes through `safe_labels`,
because plotly renders a subset of HTML in tick labels and hover text.
"""

from __future__ import annotations

import html
import math
import textwrap

LABEL_LIMIT = 64  # every position labelled up to this many; above, every k-th
TOOLBAR_PX = 32  # the top band, left to plotly's mode bar: in a narrow chart (a phone) it spans the width
ZW = "\u200b"  # zero-width space: keeps repeated words apart on a categorical axis


def safe_labels(labels) -> list[str]:
    """HTML-escaped, and made unique (repeats get invisible suffixes) so that a
    repeated word keeps its own row on a categorical axis."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        text = html.escape(str(label), quote=False)  # plotly decodes &lt; &gt; &amp; but shows &quot; as is
        n = seen.get(text, 0)
        seen[text] = n + 1
        out.append(text + ZW * n)
    return out


def duration(seconds: float) -> str:
    """A time in the unit that keeps it short (three significant digits): '91.2 µs', '1.89 ms', '149 ms'."""
    for unit, scale in (("µs", 1e-6), ("ms", 1e-3)):
        if float(f"{seconds / scale:.3g}") < 1000:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def positions(n: int) -> list[str]:
    return [str(i) for i in range(n)]


def label_stride(n: int, limit: int = LABEL_LIMIT) -> int:
    """1 (every label) up to `limit` positions, else the k that keeps ≤ `limit` labels."""
    return max(1, math.ceil(n / limit))


def text_px(labels: list[str], font: int) -> int:
    """Rough width of the longest label (plotly's default font: ~0.6 em per character)."""
    longest = max((len(s.replace(ZW, "")) for s in labels), default=1)
    return int(longest * font * 0.62) + 6


def axis_ticks(names: list[str], font: int, limit: int = LABEL_LIMIT) -> dict:
    """Explicit ticks: every name up to `limit`, else every k-th."""
    shown = names[:: label_stride(len(names), limit)]
    return {"tickmode": "array", "tickvals": shown, "ticktext": shown, "tickfont": {"size": font}}


def x_angle(names: list[str]) -> int:
    """Upright labels for a few short names; vertical otherwise, so a label never reaches its neighbour."""
    short = max((len(s.replace(ZW, "")) for s in names), default=1) <= 2
    return 0 if short and len(names) <= 16 else -90


def x_band_px(names: list[str], font: int) -> int:
    """Height the key labels take under a panel."""
    return font + 10 if x_angle(names) == 0 else text_px(names, font) + 6


def kv_group_titles(n_heads: int, n_kv_heads: int, titles: list[str] | None = None) -> list[str]:
    """Panel titles that say which K/V head each query head reads (query head h reads K/V head
    h // (n_heads / n_kv_heads)): "head 4 · K/V 1", or "<title> · K/V 1" on given titles."""
    group = n_heads // n_kv_heads
    titles = titles or [f"head {h}" for h in range(n_heads)]
    return [f"{t} · K/V {h // group}" for h, t in enumerate(titles)]


TITLE_LINE_PX = 22  # a 16-px title's line
# a title line that fits a phone's chart (358 px; plotly's 16-px bold title, ~7.2 px a character)
TITLE_CHARS = 44


def hung_title(text: str) -> tuple[dict, int]:
    """A figure's title hung under the band of plotly's mode bar, broken into lines a phone's chart
    holds, and the pixels it takes from the figure's top (its top margin). On a phone the mode bar spans
    the chart's width: a title at plotly's default height lay under it, and one longer than the chart
    was cut at its right edge (issue 46, point 19; the Speech screen's "… (PyTorc")."""
    lines = textwrap.wrap(text, TITLE_CHARS) or [""]
    # plotly centres a title's later lines on its first: each one past the first needs half a line more
    pad = TOOLBAR_PX + TITLE_LINE_PX * (len(lines) - 1) // 2
    title = {"text": "<br>".join(lines), "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": pad},
             "font": {"size": 16}}  # fmt: skip
    return title, TOOLBAR_PX + TITLE_LINE_PX * len(lines) + 8
