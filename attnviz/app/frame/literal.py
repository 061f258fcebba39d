"""Visitor text shown through Streamlit markdown, made literal."""

from __future__ import annotations

_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML."""
    return str(text).translate(_MARKDOWN_SPECIALS)


def count(n: int, word: str) -> str:
    """`1 layer`, `2 layers`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
