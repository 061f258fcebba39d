"""Visitor text shown through Streamlit markdown, made literal."""

from __future__ import annotations

import re

_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})
WORD_JOINER = "\u2060"  # zero width, no break: keeps two hyphens two hyphens


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML. Streamlit's markdown turns `--` into a dash even
    escaped (a class "A -- B" read "A — B": issue 46, point 25), so a word joiner separates hyphens."""
    return re.sub(r"-(?=-)", "-" + WORD_JOINER, str(text)).translate(_MARKDOWN_SPECIALS)


def count(n: int, word: str) -> str:
    """`1 layer`, `2 layers`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
