"""Small page widgets and chart callbacks shared by the pages, and the device control.

The device control of the screens that run a real model (issue 45) is the explorer's "Device" radio
(`settings.CHOICES["device"]`), offered only where the chosen framework sees a GPU.

    device = device_control("pre.", framework)  # in the sidebar, after the framework's radio

- Whether a GPU is present is asked of a worker once per server and kept (`loading.gpu_known`, as
  the explorer's sidebar asks): unknown or absent, no control is drawn and the screen runs on "cpu",
  exactly as without this control.
- Each screen has its own URL key, `<prefix>device` ("pre.device", "decoding.device", …), bound to
  the radio like the screen's other controls, so a link reopens the same device.
- A link's device that cannot be used here — "gpu" where no GPU is visible, or a value that is no
  device — is dropped from the link with a note naming what is allowed, as other link values are;
  a link asking for the GPU waits for the worker's answer (`loading.gpu_available`) before deciding.
- A screen passes the device to each task it submits; one whose tasks are called from many tabs
  reads the run's choice back with `chosen_device(prefix)` instead of threading it through every tab.
"""

from __future__ import annotations

import streamlit as st

from attnviz import settings
from attnviz.app.frame import link_values, loading
from attnviz.app.frame.links import ignored
from attnviz.frameworks import label


def table_height(rows: int) -> int:
    """Pixels for a dataframe that shows `rows` rows without scrolling."""
    return 38 + 35 * rows


def batch_item(spec) -> int:
    """A selector for which batch item to show (0 when there is one)."""
    if spec.batch == 1:
        return 0
    return st.radio("Batch item", list(range(spec.batch)), horizontal=True, key="view.batch_item")


def enlarge_clicked(chart_key: str, target_key: str, n_heads: int) -> None:
    """Chart callback: a click on a head panel sets `target_key` to "head h" (head h's click
    targets are trace `n_heads + h`). Lives here, not in a page, so the callback holds no page
    variables (a page's function would keep its whole module namespace alive)."""
    points = st.session_state[chart_key].selection.points
    if points and points[0]["curve_number"] >= n_heads:
        st.session_state[target_key] = f"head {points[0]['curve_number'] - n_heads}"


# -- the device control (issue 45) ---------------------------------------------------------------

DEVICES = settings.CHOICES["device"]  # ("cpu", "gpu"): the explorer's radio offers the same
CPU = "cpu"
_CHOSEN = "device.chosen."  # + prefix: the device the screen's control gave in its latest run


def gpu_present(framework: str, *, asked: bool = False) -> bool:
    """Whether `framework` sees a GPU: the worker's kept answer (unknown counts as no). `asked`: a
    link wants the GPU, so the answer is waited for (`loading.gpu_available`) rather than guessed."""
    return bool(loading.gpu_available(framework) if asked else loading.gpu_known(framework))


def device_control(prefix: str, framework: str) -> str:
    """The screen's device: "gpu" or "cpu" from a radio keyed `<prefix>device` where `framework`
    sees a GPU; else "cpu" with no control. Call inside the sidebar. A link's value the radio would
    not offer is dropped from the link, its note shown above the page with the link's others."""
    key = prefix + "device"
    raw = st.query_params.get(key)
    present = gpu_present(framework, asked=raw == "gpu")
    allowed = DEVICES if present else (CPU,)
    if raw is not None and raw not in allowed:
        # with the link's other notes, above the page (a phone's sidebar opens collapsed: a note
        # there was off-screen), from the run that starts again on the repaired link
        link_values.note(prefix, ignored(key, raw, _allowed_note(allowed, framework)))
        del st.query_params[key]
        st.rerun()
    device = CPU
    if present:
        device = st.radio("Device", DEVICES, horizontal=True, key=key, bind="query-params")  # link: cpu | gpu
    st.session_state[_CHOSEN + prefix] = device
    return device


def chosen_device(prefix: str) -> str:
    """The device `device_control(prefix, …)` gave in this screen's latest run ("cpu" before one)."""
    return st.session_state.get(_CHOSEN + prefix, CPU)


def _allowed_note(allowed: tuple[str, ...], framework: str) -> str:
    """What a link's device may be here: "cpu | gpu", or "cpu" saying no GPU is visible."""
    if len(allowed) > 1:
        return " | ".join(allowed)
    return f"cpu (no GPU is visible to {label(framework)} on this server)"
