"""Notes for the values of a link that a page's URL-bound widgets could not use.

A widget bound to the URL (`bind="query-params"`) drops a value it does not offer and
shows its default, silently. These helpers read the link the page was opened with
and say, in the explorer's words, what was ignored and what is allowed:
"URL parameter pre.layer='99' ignored; allowed: 0 … 5."
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from attnviz.app.frame.literal import escape_markdown
from attnviz.settings import allowed_numbers, read_number


def ignored(key: str, raw: str, allowed: str) -> str:
    """The note for one ignored URL value (the explorer's wording, `attnviz.settings.from_query`)."""
    return f"URL parameter {key}={str(raw)[:40]!r} ignored; allowed: {allowed}."


def opened_with(prefix: str) -> dict[str, list[str]]:
    """The link's parameters starting with `prefix`, as they were on the page's first run in this session.

    Call before the widgets: they remove from the URL what they cannot use.
    """
    key = prefix + "link"
    if key not in st.session_state:
        st.session_state[key] = {
            k: st.query_params.get_all(k) for k in st.query_params if k.startswith(prefix)
        }
    return st.session_state[key]


def choices(
    link: dict[str, list[str]], key: str, texts: Iterable[str], allowed: str | None = None
) -> list[str]:
    """Notes for the link's values of `key` that are not among `texts` (the widget's options as written)."""
    texts = list(texts)
    if allowed is None:
        allowed = " | ".join(texts) if len(texts) <= 8 else f"{texts[0]} … {texts[-1]}"
    return [ignored(key, raw, allowed) for raw in link.get(key, []) if raw not in texts]


def number(
    link: dict[str, list[str]], key: str, low: float, high: float, step: float | None = 1
) -> list[str]:
    """Notes for the link's values of `key` that are not numbers from `low` to `high` in steps of `step`
    (None: any number in the range)."""
    return [
        ignored(key, raw, allowed_numbers(low, high, step))
        for raw in link.get(key, [])
        if read_number(raw, low, high, step) is None
    ]


def show(prefix: str, slot, notes: list[str]) -> None:
    """Write the notes into `slot` on the first run, and on later runs until a control changes
    (a change answers the link's problems, as in the explorer).

    Call after the page's main controls: their values at the first run are what "a change" compares with.
    """
    seen = prefix + "link_notes"
    if seen not in st.session_state:
        own = [k for k in st.session_state if k.startswith(prefix) and k != prefix + "link"]
        st.session_state[seen] = ({k: repr(st.session_state[k]) for k in own}, notes)
    first, first_notes = st.session_state[seen]
    unchanged = all(k in st.session_state and repr(st.session_state[k]) == v for k, v in first.items())
    if first_notes and unchanged:
        slot.warning("\n\n".join(map(escape_markdown, first_notes)), icon=":material/link_off:")
