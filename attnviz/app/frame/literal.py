"""Visitor text shown through Streamlit markdown, made literal."""

from __future__ import annotations

import re

from attnviz import formats

_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})
WORD_JOINER = "\u2060"  # zero width, no break: keeps two hyphens two hyphens


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML. Streamlit's markdown turns `--` into a dash even
    escaped (a class "A -- B" read "A — B": issue 46, point 25), so a word joiner separates hyphens."""
    return re.sub(r"-(?=-)", "-" + WORD_JOINER, str(text)).translate(_MARKDOWN_SPECIALS)


def one_line(text: str) -> str:
    """Text shown inline in markdown (a prompt, a generation around a highlight): literal
    (`escape_markdown`), each line break drawn as a token's (⏎, `attnviz.formats.token`), so the text
    stays one line and a generated line break shows."""
    return escape_markdown(text).replace("\n", formats.DRAWN["\n"])


def count(n: int, word: str) -> str:
    """`1 layer`, `2 layers`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
