"""Whatever the user types is shown as text, never interpreted."""

from pathlib import Path

import numpy as np

from attnviz.app.controls import escape_markdown
from attnviz.plots import heatmaps

HOSTILE = ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">', "<b>bold</b>", "a&b", "$x^2$"]
ROOT = Path(__file__).parents[2]


def test_labels_are_escaped_in_heatmaps_and_matrices():
    w = np.full((1, len(HOSTILE), len(HOSTILE)), 1 / len(HOSTILE))
    for fig in (heatmaps.head_grid(w, HOSTILE, HOSTILE), heatmaps.matrix(w[0], HOSTILE, HOSTILE)):
        trace = fig.data[0]
        for label in [*trace.x, *trace.y]:
            assert "<" not in label and ">" not in label
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in trace.y


def test_markdown_specials_are_escaped():
    for text in [*HOSTILE, "[x](javascript:alert(1))", "**bold** _it_"]:
        escaped = escape_markdown(text)
        for ch in "<>[]()*_$":
            assert ch not in escaped.replace("\\" + ch, "")


def test_no_unsafe_html_anywhere():
    sources = [*ROOT.glob("attnviz/**/*.py"), ROOT / "app.py"]
    assert sources
    for path in sources:
        assert "unsafe_allow_html" not in path.read_text(), path


def test_two_hyphens_stay_two_hyphens():
    """Streamlit's markdown shows `--` as "—" even escaped (checked in Chromium on 1.67: `\\-\\-` and
    `&#45;&#45;` both read "—"; a word joiner between them reads "--"; issue 46, point 25)."""
    escaped = escape_markdown("Group A -- B --- C")
    assert "-\\-" not in escaped and escaped.replace("\u2060", "").replace("\\", "") == "Group A -- B --- C"
