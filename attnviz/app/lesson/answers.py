"""A lesson's answers as link text and as a person reads them: each part's response in a JSON-friendly
form (`to_plain`, read back and checked by `from_plain`), all of a lesson's in one URL-safe value
(`encode_answers`, `decode_answers`: the `lesson.answers` parameter), one answer in words
(`answer_text`, what a class stores), and the link that opens an exercise's computation on its page
(`link_url`). Pure Python (no Streamlit)."""

from __future__ import annotations

import base64
import json
import math
import re
from urllib.parse import urlencode

import numpy as np

from attnviz import settings
from attnviz.lessons import CHOICE, NUMBERS, SHAPE, Exercise, Link

MAX_SHAPE_TEXT = 100  # characters of a typed shape kept in the link


def encode_answers(kept: dict[int, list]) -> str:
    """`{step: [response per part]}` (responses in `to_plain`'s form) → URL-safe text (base64 of JSON)."""
    if not kept:
        return ""
    text = json.dumps({str(k): v for k, v in sorted(kept.items())}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_answers(text: str, n: int) -> dict[int, list]:
    """`encode_answers`'s text back, keeping only entries for steps 0 … n − 1 shaped as a list;
    anything else (a hand-edited link) is dropped, never an error. Each response is checked against its
    part when it is used (`from_plain`)."""
    if not text or len(text) > 8_000:
        return {}
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    out = {}
    for key, value in raw.items():
        if isinstance(key, str) and key.isdigit() and int(key) < n and isinstance(value, list):
            out[int(key)] = value
    return out


def to_plain(part, response):
    """A response as JSON: choice → int, numbers → [floats], shape → text, cells → [[columns] per row]."""
    if response is None:
        return None
    if part.kind == CHOICE:
        return int(response)
    if part.kind == NUMBERS:
        return [float(v) for v in response]
    if part.kind == SHAPE:
        return str(response)[:MAX_SHAPE_TEXT]
    return [[int(c) for c in np.flatnonzero(row)] for row in np.asarray(response, bool)]


def from_plain(part, value):
    """`to_plain`'s form back, checked against the part (None when it does not fit: a bad link)."""
    if value is None:
        return None
    if part.kind == CHOICE:
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(part.options)
        return value if ok else None
    if part.kind == NUMBERS:
        low, high = part.bounds
        ok = (
            isinstance(value, list)
            and len(value) == len(part.options)
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            and all(math.isfinite(v) and low <= v <= high for v in value)
        )
        return tuple(float(v) for v in value) if ok else None
    if part.kind == SHAPE:
        return value if isinstance(value, str) and len(value) <= MAX_SHAPE_TEXT else None
    cols = len(part.options)
    if not (isinstance(value, list) and len(value) == len(part.rows)):
        return None
    grid = np.zeros((len(part.rows), cols), bool)
    for r, row in enumerate(value):
        if not isinstance(row, list) or not all(isinstance(c, int) and 0 <= c < cols for c in row):
            return None
        grid[r, row] = True
    return grid


def answer_text(ex: Exercise, responses: list) -> str:
    """The responses as a person reads them (what a class stores as the first answer), e.g. "k3" or
    "(a) q1: k2, k3; q2: k3 · (b) k2, k3"."""
    texts = []
    for part, response in zip(ex.parts, responses, strict=True):
        if response is None:
            texts.append("(no answer)")
        elif part.kind == CHOICE:
            texts.append(part.options[response])
        elif part.kind == NUMBERS:
            texts.append(", ".join(f"{v:.{part.decimals}f}" for v in response))
        elif part.kind == SHAPE:
            texts.append(" ".join(str(response).split()) or "(no answer)")
        else:
            picked = [
                f"{row}: " + (", ".join(c for c, on in zip(part.options, cells, strict=True) if on) or "none")
                for row, cells in zip(part.rows, np.asarray(response, bool), strict=True)
            ]
            texts.append("; ".join(picked))
    if len(texts) == 1:
        return texts[0][:200]
    return " · ".join(f"({'abcdefgh'[k]}) {t}" for k, t in enumerate(texts))[:200]


def empty_parts(ex: Exercise, responses: list) -> str:
    """The parts with nothing entered ("" when every part has an answer): "(a), (c)", or "your
    answer" for a one-part exercise. A cells part always has one (no cell picked is an answer)."""
    blank = [
        k for k, r in enumerate(responses) if r is None or (ex.parts[k].kind == SHAPE and not str(r).strip())
    ]
    if not blank:
        return ""
    return "your answer" if len(ex.parts) == 1 else ", ".join(f"({'abcdefgh'[k]})" for k in blank)


def plain_label(markdown: str) -> str:
    """A prompt's markdown as the plain text a widget's label (and its aria-label) carries: no `**`,
    `*`, backticks or backslash escapes read aloud by a screen reader (issue 46, point 18)."""
    return re.sub(r"\\(.)|\*\*|[*`]", lambda m: m.group(1) or "", markdown).strip()


def link_url(link: Link) -> str:
    """The page's relative URL carrying the exercise's configuration (the sidebar's URL form) and page keys."""
    cfg = settings.DEFAULTS | link.config
    query = settings.url_values(cfg) | link.page_keys
    return link.page + ("?" + urlencode(query) if query else "")
