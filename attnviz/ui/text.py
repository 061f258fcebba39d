"""Visitor text shown through Streamlit markdown, made literal."""

from __future__ import annotations

_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML."""
    return str(text).translate(_MARKDOWN_SPECIALS)
