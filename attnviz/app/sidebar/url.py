"""The configuration's session state and its link: reading a link once, repairing after a change.

Each configuration widget is keyed by its field of `settings.DEFAULTS` and bound to
the URL (`bind="query-params"`), so Streamlit itself writes and restores the link.
This module does what the widgets cannot: it reads a link once per session and
rewrites it in the widgets' own form when they would misread it (a head count
that does not divide d_model, "1" for a checkbox from an older link), and it
repairs choices that a change of another control made impossible.
"""

from __future__ import annotations

import streamlit as st

from attnviz import settings
from attnviz.app.frame.loading import gpu_available
from attnviz.settings import DEFAULTS

NOTES = "cfg.notes"  # notes from the last repair, by field
PROBLEMS = "cfg.problems"  # what the link asked for and did not get
REPAIRED = "cfg.repaired"  # values the repair of a session's first link set, for the widgets of its rerun


def state() -> dict:
    """This session's configuration: the configuration widgets' values (defaults before they exist)."""
    return {key: st.session_state.get(key, default) for key, default in DEFAULTS.items()}


def expected() -> dict:
    """The configuration the widgets will hold once drawn in this run: each widget's value where it
    exists, else the link's (a session's first run, whose widgets read it), else the default."""
    link, _ = settings.from_query(
        {key: values[-1] for key in st.query_params if (values := st.query_params.get_all(key))}
    )
    return {key: st.session_state.get(key, link[key]) for key in DEFAULTS}


def changed(field: str) -> None:
    """on_change of every control: replace choices the change made impossible, with a note."""
    cfg = state()
    fixed, notes = settings.repair(cfg, changed=field)
    for key, value in fixed.items():
        if value != cfg[key]:
            st.session_state[key] = value
    st.session_state[NOTES] = notes
    st.session_state.pop(PROBLEMS, None)  # the link's problems are answered by a change


def _at_default(cfg: dict, link: dict) -> set[str]:
    """Link keys that only repeat a widget's default (read correctly: the widget drops them)."""
    return {
        k
        for k, v in link.items()
        if k in DEFAULTS and v == [settings.url_text(settings.widget_default(k, cfg))]
    }


def first_visit() -> None:
    """Once per session, before any widget: read the link, note what was refused or replaced.

    Links may carry values the widgets would drop silently: the link is rewritten
    once in the widgets' own form, with the refused values left out, and the page
    reruns, so the widgets start from it and the notes say what changed. The values
    the repair changed are also set before the widgets of that rerun: a tab left
    open across a server restart is a new session whose first run carries the tab's
    own values, which win over the link's, and its first change's `changed` callback
    is lost (`attnviz.app.frame.session`): set, the repair holds (issue 46, point 13).
    """
    if "cfg.visited" in st.session_state:
        for key, value in st.session_state.pop(REPAIRED, {}).items():
            st.session_state[key] = value  # over the tab's own values (the docstring says why)
        return
    st.session_state["cfg.visited"] = True
    link = {key: st.query_params.get_all(key) for key in st.query_params}
    cfg, problems = settings.from_query({key: values[-1] for key, values in link.items() if values})
    fixed, notes = settings.repair(cfg)
    st.session_state[PROBLEMS] = problems + list(notes.values())
    wanted = {key: values for key, values in link.items() if key not in DEFAULTS}
    wanted |= {key: [value] for key, value in settings.url_values(fixed).items()}
    # Only where the widgets would read the link wrongly; values at their defaults they drop themselves.
    misread = {k for k, v in wanted.items() if link.get(k) != v} | (
        set(link) - set(wanted) - _at_default(fixed, link)
    )
    if misread:
        st.query_params.from_dict(wanted)
        st.session_state[REPAIRED] = {k: v for k, v in fixed.items() if v != cfg[k]}
        st.rerun()


def runnable_state() -> dict:
    """The configuration with the device it runs on (the CPU where no GPU is visible)."""
    cfg = state()
    if cfg["device"] == "gpu" and not gpu_available(cfg["framework"]):
        cfg["device"] = "cpu"
    return cfg


PATTERN = {
    "weights": "interpretable",
    "input": "sentence",
    "mask": "causal",
}  # a first view that shows something


def choose(values: dict) -> None:
    """Button callback: set several configuration fields at once (kept in the link), then repair."""
    for key, value in values.items():
        st.session_state[key] = value
    changed(next(iter(values)))
