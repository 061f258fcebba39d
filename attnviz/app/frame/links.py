"""Notes for the values of a link that a page's URL-bound widgets could not use.

A widget bound to the URL (`bind="query-params"`) drops a value it does not offer and
shows its default, silently. These helpers read the link the page was opened with
and say, in the explorer's words, what was ignored and what is allowed:
"URL parameter pre.layer='99' ignored; allowed: 0 … 5."

A number control bound to the link is declared once, as a `Field` in its screen's `fields.py` (key,
label, bounds, default, step): the widget (`Field.slider`, `Field.number_input`), the link guard's table
(`link_values.FIELDS`, through `table`) and the notes (`Field.notes`) are derived from that row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Field:
    """One number control bound to the link, declared once.

    Attributes:
        key: its URL parameter and session-state key ("pre.k").
        label: the widget's label.
        low, high: the widest range the page offers; a page whose range follows its state (the room
            a model's positions leave) narrows `high` when it draws the widget and writes the notes.
        default: the widget's value when the link gives none (lowered to a narrowed `high`).
        step: the grid a link value must be on (None: any number in the range).
        widget_step: the widget's step where it differs from the grid (None: `step`, or Streamlit's).
    """

    key: str
    label: str
    low: float
    high: float
    default: float
    step: float | None = 1
    widget_step: float | None = None

    def row(self) -> tuple[float, float, float | None]:
        """The link guard's row: (low, high, step)."""
        return self.low, self.high, self.step

    def notes(self, link: dict[str, list[str]], *, high: float | None = None) -> list[str]:
        """`number`'s notes for this field, up to `high` where the page narrows it."""
        return number(link, self.key, self.low, self.high if high is None else high, self.step)

    def _args(self, high: float | None) -> tuple:
        top = self.high if high is None else high
        return self.label, self.low, top, min(self.default, top), self.widget_step or self.step

    def slider(self, where=st, *, high: float | None = None, **options):
        """The field's slider in `where` (a column, the sidebar; default: the page), bound to the link."""
        return where.slider(*self._args(high), key=self.key, bind="query-params", **options)

    def number_input(self, where=st, *, high: float | None = None, **options):
        """The field's number box in `where`, bound to the link."""
        return where.number_input(*self._args(high), key=self.key, bind="query-params", **options)


def table(*fields: Field) -> dict[str, tuple[float, float, float | None]]:
    """The link guard's rows of `fields`, by key."""
    return {f.key: f.row() for f in fields}


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
