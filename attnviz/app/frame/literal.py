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


def size(n: float) -> str:
    """Bytes in binary units, three significant digits: '46.1 KiB', '180 MiB', '1.41 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}" if abs(n) < 999.5 else f"{n:,.0f} {unit}"  # 1,020 KiB, not 1.02e+03
        n /= 1024
    raise AssertionError  # unreachable: the loop returns at GiB
