"""Streamlit controls shared by the pages: the sidebar, the mask editor, cached runs.

The attention configuration is one widget per field of `config.DEFAULTS`,
keyed by the field's name and drawn by app.py (the entrypoint) on every page,
so its state follows the visitor from page to page the way Streamlit's
multipage docs describe for widgets in the entrypoint. Each widget is bound
to the URL (`bind="query-params"`): a link opens the same view, a change of a
control replaces the URL (no history entry), a change of page adds one, and
Back and Forward restore a page with its configuration. Bounds and choices come
from `config.LIMITS` / `config.CHOICES`; choices that cannot work are not
offered (heads that do not divide d_model, "causal" for unequal lengths).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

import numpy as np
import streamlit as st

from attnviz import export, masks
from attnviz.compare import Comparison, compare_frameworks
from attnviz.errors import SpecError
from attnviz.frameworks import FRAMEWORKS, backend, installed, label
from attnviz.result import AttentionResult
from attnviz.run import Timing, run_attention, time_attention
from attnviz.ui import cache, config
from attnviz.ui.config import DEFAULTS, LIMITS
from attnviz.ui.pages import PageInfo

MAX_EDITOR_SIDE = 64  # the cell-by-cell mask editor up to 64 × 64
NOTES = "cfg.notes"  # notes from the last repair, by field
_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})
# A field whose error belongs next to another control.
_SLOT_OF = {"memory_budget": "len_q", "spec": "len_q"}


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML."""
    return str(text).translate(_MARKDOWN_SPECIALS)


# -- state ----------------------------------------------------------------------------


def state() -> dict:
    """This session's configuration: the configuration widgets' values (defaults before they exist)."""
    return {key: st.session_state.get(key, default) for key, default in DEFAULTS.items()}


def runnable_state() -> dict:
    """The configuration with the device it runs on (the CPU where no GPU is visible)."""
    cfg = state()
    if cfg["device"] == "gpu" and not gpu_available(cfg["framework"]):
        cfg["device"] = "cpu"
    return cfg


def _changed(field: str) -> None:
    """on_change of every control: replace choices the change made impossible, with a note."""
    cfg = state()
    fixed, notes = config.repair(cfg, changed=field)
    for key, value in fixed.items():
        if value != cfg[key]:
            st.session_state[key] = value
    st.session_state[NOTES] = notes
    st.session_state.pop("cfg.problems", None)  # the link's problems are answered by a change


def _at_default(cfg: dict, link: dict) -> set[str]:
    """Link keys that only repeat a widget's default (read correctly: the widget drops them)."""
    return {
        k for k, v in link.items() if k in DEFAULTS and v == [config.url_text(config.widget_default(k, cfg))]
    }


def _first_visit() -> None:
    """Once per session, before any widget: read the link, note what was refused or replaced.

    Links may carry values the widgets would drop silently (a head count that does
    not divide d_model, "1" for a checkbox from an older link): the link is rewritten
    once in the widgets' own form, with the refused values left out, and the page
    reruns, so the widgets start from it and the notes say what changed.
    """
    if "cfg.visited" in st.session_state:
        return
    st.session_state["cfg.visited"] = True
    link = {key: st.query_params.get_all(key) for key in st.query_params}
    cfg, problems = config.from_query({key: values[-1] for key, values in link.items() if values})
    fixed, notes = config.repair(cfg)
    st.session_state["cfg.problems"] = problems + list(notes.values())
    wanted = {key: values for key, values in link.items() if key not in DEFAULTS}
    wanted |= {key: [value] for key, value in config.url_values(fixed).items()}
    # Only where the widgets would read the link wrongly; values at their defaults they drop themselves.
    misread = {k for k, v in wanted.items() if link.get(k) != v} | (
        set(link) - set(wanted) - _at_default(fixed, link)
    )
    if misread:
        st.query_params.from_dict(wanted)
        st.rerun()


_IMPORTS = threading.Lock()


def import_shared_modules() -> None:
    """Import pandas once, under a lock, before any page uses it.

    Several first visitors at once import it from several script threads; one of
    them then saw a partially initialised pandas (AttributeError: 'pandas' has no
    attribute 'Series', in the ten-session load test). Costs ~0.25 s once per server.
    """
    with _IMPORTS:
        import pandas  # noqa: F401


# -- frameworks ----------------------------------------------------------------------------


# Intra-op threads per computation on the server (ATTNVIZ_THREADS, default 1): a classroom server
# runs many visitors' computations at once, and on a busy 2-core machine two PyTorch threads made
# small runs 10-1000x slower (each parallel region waits for a descheduled thread). The Timing page
# sets its own count for a sweep and restores this one afterwards.
APP_THREADS = max(1, int(os.environ.get("ATTNVIZ_THREADS", "1") or 1))


@st.cache_resource(show_spinner="Loading the framework (once per server)…")
def load_framework(framework: str):
    """The framework's attnviz backend, imported once per server process, with `APP_THREADS` threads."""
    be = backend(framework)
    be.set_threads(APP_THREADS)
    return be


@st.cache_resource(show_spinner=False)
def gpu_available(framework: str) -> bool:
    return load_framework(framework).gpu_available()


def installed_frameworks() -> list[str]:
    return installed()


# -- the sidebar (drawn by app.py on every page) ------------------------------------------


class _Sidebar:
    """Draws the configuration widgets, each followed by a slot for its error and a note."""

    def __init__(self):
        self.slots: dict[str, object] = {}
        self.notes = st.session_state.pop(NOTES, {})

    def control(self, factory: Callable, name: str, label: str, **kwargs):
        value = factory(label, key=name, bind="query-params", on_change=_changed, args=(name,), **kwargs)
        self.slots[name] = st.empty()
        if name in self.notes:
            st.caption(escape_markdown(self.notes[name]))
        return value

    def number(self, name: str, label: str, **kwargs):
        lo, hi = LIMITS[name]
        default = DEFAULTS[name]
        step = 0.01 if isinstance(default, float) else 1
        return self.control(
            st.number_input, name, label, min_value=lo, max_value=hi, value=default, step=step, **kwargs
        )

    def choice(self, factory: Callable, name: str, label: str, options, **kwargs):
        options = list(options)
        default = DEFAULTS[name] if DEFAULTS[name] in options else options[0]
        return self.control(factory, name, label, options=options, index=options.index(default), **kwargs)


def sidebar(page: PageInfo) -> dict:
    """Every control of the configuration, in the sidebar (collapsed on pages that do not use it).

    Called by app.py before the page runs. Errors of the configuration are shown
    next to the control they name (`SpecError.field`).

    Returns:
        The configuration.
    """
    import_shared_modules()
    _first_visit()
    with st.sidebar:
        for problem in st.session_state.get("cfg.problems", []):
            st.warning(escape_markdown(problem))
        if page.uses_config:
            bar = _draw(page, st.container())
        else:
            box = st.expander("Attention settings", icon=":material/tune:")
            box.caption(
                "Used by the explorer, step-by-step and comparison pages; kept in the link on every page."
            )
            bar = _draw(page, box)
    cfg = state()
    if page.uses_config:
        _explain(cfg, bar.slots)
    return cfg


def _draw(page: PageInfo, where) -> _Sidebar:
    bar = _Sidebar()
    with where:
        _framework_and_device(bar, page)
        _inputs(bar)
        _shape(bar)
        _mask(bar)
        _details(bar)
    return bar


def _framework_and_device(bar: _Sidebar, page: PageInfo) -> None:
    available = installed_frameworks()
    if not available:
        st.error(
            "Neither PyTorch nor TensorFlow is installed. "
            + " · ".join(f.install_hint for f in FRAMEWORKS.values())
        )
        return
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    framework = bar.choice(
        st.radio,
        "framework",
        "Framework",
        available,
        horizontal=True,
        disabled=page.sidebar == "both frameworks",
        help="This page runs both frameworks."
        if page.sidebar == "both frameworks"
        else "torch: PyTorch; tensorflow: TensorFlow (the name in the link).",
    )
    # Asking a framework about GPUs imports it: only on the pages that run it.
    has_gpu = gpu_available(framework) if page.uses_config else True
    bar.choice(
        st.radio,
        "device",
        "Device",
        config.CHOICES["device"],
        horizontal=True,
        disabled=not has_gpu,
    )
    if not has_gpu:
        st.caption(f"GPU: none visible to {label(framework)} on this machine — runs on the CPU.")
    bar.choice(
        st.radio,
        "weights",
        "Weights",
        config.CHOICES["weights"],
        horizontal=True,
        help="random: seeded random weights (no learned pattern). interpretable: hand-built W_Q and W_K (attnviz.heads); head h attends by "
        "position — previous token, same token, first token, window — whatever the input.",
    )


def _inputs(bar: _Sidebar) -> None:
    st.subheader("Inputs")
    source = bar.choice(
        st.radio,
        "input",
        "Queries from",
        config.CHOICES["input"],
        horizontal=True,
        help="random: seeded random vectors; sentence: one position per word.",
    )
    mode = bar.choice(
        st.radio,
        "mode",
        "Attention",
        config.CHOICES["mode"],
        horizontal=True,
        help="self: keys/values from the same sequence; cross: from a second one",
    )
    sentence = source == "sentence"
    bar.control(
        st.text_input,
        "sentence",
        "Sentence (each word is a position)",
        value=DEFAULTS["sentence"],
        max_chars=config.MAX_TEXT,
        disabled=not sentence,
        help=None if sentence else "Used when the queries come from a sentence.",
    )
    bar.control(
        st.text_input,
        "sentence_kv",
        "Second sentence (keys / values)",
        value=DEFAULTS["sentence_kv"],
        max_chars=config.MAX_TEXT,
        disabled=not (sentence and mode == "cross"),
        help="Used in cross mode with sentences.",
    )


def _shape(bar: _Sidebar) -> None:
    st.subheader("Shape")
    cfg = state()
    sentence, cross = cfg["input"] == "sentence", cfg["mode"] == "cross"
    bar.number("batch", "Batch size")
    lo, hi = (int(v) for v in LIMITS["len_q"])
    bar.control(
        st.slider,
        "len_q",
        "Query length len_q",
        min_value=lo,
        max_value=hi,
        value=DEFAULTS["len_q"],
        disabled=sentence,
        help="Set by the sentence's words." if sentence else None,
    )
    lo, hi = (int(v) for v in LIMITS["len_kv"])
    bar.control(
        st.slider,
        "len_kv",
        "Key/value length len_kv",
        min_value=lo,
        max_value=hi,
        value=DEFAULTS["len_kv"],
        disabled=sentence or not cross,
        help="Cross mode with random inputs only (self mode: the keys are the queries).",
    )
    d_model = bar.number("d_model", "d_model")
    d_k = bar.number("d_k", "d_k per head (0 = d_model / heads)")
    d_v = bar.number("d_v", "d_v per head (0 = d_model / heads)")
    heads = config.head_choices(d_model, d_k, d_v)
    bar.control(
        st.select_slider,
        "n_heads",
        "Heads",
        options=heads,
        value=config.nearest(DEFAULTS["n_heads"], heads),
        disabled=len(heads) == 1,
    )
    st.caption(
        "Any count from 1 to 16: d_k and d_v are set."
        if len(heads) == int(LIMITS["n_heads"][1])
        else f"Divisors of d_model = {d_model} (set d_k and d_v for any count)."
    )
    bar.number("d_kv_in", "Key/value input width d_kv_in", disabled=not cross, help="Cross mode only.")


def _mask(bar: _Sidebar) -> None:
    st.subheader("Mask")
    cfg = state()
    options = config.mask_choices(cfg)
    mask = bar.choice(
        st.selectbox,
        "mask",
        "Mask",
        options,
        help="True = may attend; blocked positions get weight exactly 0",
    )
    if "causal" not in options:
        len_q, len_kv = config.lengths(cfg)
        st.caption(f"causal is not offered: it needs len_q = len_kv (here {len_q} and {len_kv}).")
    bar.number(
        "valid_kv_len",
        "Real (unpadded) key positions",
        disabled=mask != "padding",
        help="With the padding mask: keys from this position on are padding, blocked for every query.",
    )
    bar.control(
        st.text_input,
        "custom_mask",
        "Custom mask (as kept in the link)",
        value=DEFAULTS["custom_mask"],
        max_chars=config.MAX_MASK_CODE,
        disabled=mask != "custom",
        help="Rows of 0/1 joined by '.' for small masks; a compact code above 16 × 16. "
        "Draw it in the editor on the page.",
    )


def _details(bar: _Sidebar) -> None:
    st.subheader("Details")
    bar.number("seed", "Seed")
    bar.choice(st.radio, "dtype", "dtype", config.CHOICES["dtype"], horizontal=True)
    bar.control(st.checkbox, "bias", "Bias on the projections", value=DEFAULTS["bias"])
    lo, hi = LIMITS["dropout"]
    bar.control(
        st.slider,
        "dropout",
        "Attention dropout",
        min_value=lo,
        max_value=hi,
        value=DEFAULTS["dropout"],
        step=0.05,
    )
    bar.control(st.checkbox, "training", "Training mode (dropout active)", value=DEFAULTS["training"])
    bar.number("scale", "Scale override (0 = 1/√d_k)", format="%.4f")
    bar.control(
        st.checkbox,
        "residual_norm",
        "Residual + LayerNorm (the Transformer's Add & Norm)",
        value=DEFAULTS["residual_norm"],
        help="output = LayerNorm(x_q + attention output), as each sublayer of the Transformer does.",
    )


def _explain(cfg: dict, slots: dict) -> None:
    """Put the configuration's problem, if any, next to the control it names."""
    try:
        config.check(cfg)
    except SpecError as error:
        slot = slots.get(_SLOT_OF.get(error.field, error.field)) or slots["len_q"]
        slot.error(escape_markdown(str(error)), icon=":material/error:")


# -- spec, or an explanation ----------------------------------------------------------------


def configure(framework_choice: bool = True) -> tuple[dict, object, list[str], list[str]]:
    """The configuration (sidebar drawn by app.py), the mask editor when the mask is custom, the spec.

    When the configuration cannot run, says so in one line (the sidebar shows
    the details next to the control) and stops the page.

    Args:
        framework_choice: kept for the pages' calls; app.py knows each page's
            sidebar from `attnviz.ui.pages.PAGES`.

    Returns:
        The configuration (device resolved to what runs), its `AttentionSpec`,
        and the query and key labels.
    """
    del framework_choice
    cfg = runnable_state()
    q_labels, k_labels = config.labels(cfg)
    if cfg["mask"] == "custom":
        mask_editor(cfg, q_labels, k_labels)
    try:
        spec = config.check(cfg)
    except SpecError as error:
        st.warning(
            f"Nothing to draw yet — {escape_markdown(str(error))} The sidebar shows it next to the control.",
            icon=":material/tune:",
        )
        st.stop()
    return cfg, spec, q_labels, k_labels


# -- the mask editor ------------------------------------------------------------------------

PRESETS = ("causal", "sliding window", "strided", "block diagonal", "padding", "all allowed", "all blocked")


def preset_mask(name: str, len_q: int, len_kv: int, width: int) -> np.ndarray:
    return {
        "causal": lambda: masks.causal(len_q, len_kv),
        "sliding window": lambda: masks.sliding_window(len_q, len_kv, width),
        "strided": lambda: masks.strided(len_q, len_kv, width),
        "block diagonal": lambda: masks.block_diagonal(len_q, len_kv, width),
        "padding": lambda: masks.padding(min(width, len_kv), len_q, len_kv)[0],
        "all allowed": lambda: np.ones((len_q, len_kv), bool),
        "all blocked": lambda: np.zeros((len_q, len_kv), bool),
    }[name]()


def _store_mask(mask: np.ndarray) -> None:
    """Callbacks only (before the run, so the sidebar's widget may change): the mask into its field."""
    try:
        st.session_state["custom_mask"] = config.encode_mask(mask)
    except SpecError as error:
        st.session_state["mask.problem"] = str(error)
    st.session_state["mask.version"] = st.session_state.get("mask.version", 0) + 1  # a fresh grid


def _apply_preset(len_q: int, len_kv: int) -> None:
    width = int(st.session_state["mask.width"])
    _store_mask(preset_mask(st.session_state["mask.preset"], len_q, len_kv, width))


def _grid_edited(key: str, len_q: int, len_kv: int, columns: list[str]) -> None:
    mask = config.decode_mask(state()["custom_mask"], len_q, len_kv)
    for row, cells in st.session_state[key].get("edited_rows", {}).items():
        for column, value in cells.items():
            mask[int(row), columns.index(column)] = bool(value)
    _store_mask(mask)


def editor_columns(k_labels: list[str]) -> list[str]:
    """Grid column headers that name the key: "key 3" for positions, "3 · cat" for words."""
    return [f"key {k}" if k == str(j) else f"{j} · {k}" for j, k in enumerate(k_labels)]


def mask_editor(cfg: dict, q_labels: list[str], k_labels: list[str]) -> None:
    """Presets plus a checkbox grid; each change is stored in the `custom_mask` field (and the link)."""
    len_q, len_kv = len(q_labels), len(k_labels)
    current = config.decode_mask(cfg["custom_mask"], len_q, len_kv)
    with st.expander("Custom mask editor — ticked = may attend", expanded=True, icon=":material/edit:"):
        problem = st.session_state.pop("mask.problem", None)
        if problem:
            st.error(escape_markdown(problem))
        c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
        c1.selectbox("Preset", PRESETS, key="mask.preset")
        c2.number_input(
            "w (window / stride / block / length)", 1, int(LIMITS["len_kv"][1]), 3, key="mask.width"
        )
        c3.button("Apply preset", key="mask.apply", on_click=_apply_preset, args=(len_q, len_kv))
        if len_q > MAX_EDITOR_SIDE or len_kv > MAX_EDITOR_SIDE:
            st.info(
                f"The cell-by-cell grid is shown up to {MAX_EDITOR_SIDE} × {MAX_EDITOR_SIDE}; "
                "at this size use a preset."
            )
        else:
            import pandas as pd  # here, not at import: keeps it off the first chart's path

            columns = editor_columns(k_labels)
            frame = pd.DataFrame(
                current,
                index=[q if q == str(i) else f"{i} · {q}" for i, q in enumerate(q_labels)],
                columns=columns,
            )
            key = f"mask.grid.{st.session_state.get('mask.version', 0)}.{len_q}x{len_kv}"
            st.data_editor(
                frame, key=key, width="stretch", on_change=_grid_edited, args=(key, len_q, len_kv, columns)
            )
        blocked_rows = int((~current.any(axis=1)).sum())
        if blocked_rows:
            st.caption(f"{blocked_rows} query row(s) have no allowed key: their weights are all 0.")


# -- runs (one byte-bounded cache for the server: attnviz.ui.cache) -------------------------------


def _prepared(cfg_json: str):
    cfg = json.loads(cfg_json)
    spec = config.build_spec(cfg)
    return spec, *config.prepare(cfg, spec)


@cache.bounded("explorer run")
def _run(cfg_json: str, framework: str, device: str) -> AttentionResult:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    load_framework(framework)
    return run_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


@cache.bounded("comparison", spinner="Running both frameworks…")
def _compare(cfg_json: str, device: str) -> Comparison:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    for fw in FRAMEWORKS:
        load_framework(fw)
    return compare_frameworks(spec, device, x_q=x_q, x_kv=x_kv, params=params)


@cache.bounded("steady timing", ttl=600, spinner="Timing the forward pass…")
def _timing(cfg_json: str, framework: str, device: str) -> Timing:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    load_framework(framework)
    return time_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


def run(cfg: dict, framework: str | None = None) -> AttentionResult:
    """The cached result of the configuration in `framework` (default: the chosen one).

    Each call returns its own copy, so no session changes another's.
    """
    return _run(config.canonical(cfg), framework or cfg["framework"], cfg["device"])


def compare(cfg: dict) -> Comparison:
    """The cached PyTorch-vs-TensorFlow comparison of the configuration."""
    return _compare(config.canonical(cfg), cfg["device"])


def timing(cfg: dict, framework: str | None = None) -> Timing:
    """The steady-state forward time (`attnviz.run.time_attention`) of exactly what `run(cfg)` computes.

    Same spec, inputs and parameters (interpretable heads included); cached for ten minutes.
    """
    return _timing(config.canonical(cfg), framework or cfg["framework"], cfg["device"])


def downloads(spec, result: AttentionResult, q_labels: list[str], k_labels: list[str]) -> None:
    """Configuration as JSON, every step as .npz, the weights as CSV (built on click).

    The buttons keep the result's cache key, not the result: a session's download
    buttons live as long as the session, and holding each session's arrays there
    kept ~70 MB per closed tab of a large configuration alive (live-server memory test).
    """
    cfg = runnable_state()
    key = (config.canonical(cfg), result.framework, cfg["device"])  # as run(cfg) was called
    d1, d2, d3 = st.columns(3)
    extra = {"framework": result.framework, "device": result.device}
    d1.download_button(
        "⬇ Configuration (JSON)",
        lambda: export.config_json(spec, **extra),
        "attnviz-config.json",
        "application/json",
        on_click="ignore",
    )
    d2.download_button(
        "⬇ All steps (.npz)",
        lambda: export.steps_npz(_run(*key)),
        "attnviz-steps.npz",
        "application/octet-stream",
        on_click="ignore",
    )
    d3.download_button(
        "⬇ Weights (CSV)",
        lambda: export.weights_csv(_run(*key), q_labels, k_labels),
        "attnviz-weights.csv",
        "text/csv",
        on_click="ignore",
    )


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
