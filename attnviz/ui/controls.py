"""Streamlit controls shared by the pages: the sidebar, the mask editor, cached runs.

The configuration lives in `st.session_state["cfg"]` (so it follows the user
from page to page) and in the URL query parameters (so a link reopens the
same view). Widgets write into it through `on_change` callbacks; widget keys
are prefixed `cfg.`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import streamlit as st

from attnviz import export, masks
from attnviz.compare import Comparison, compare_frameworks
from attnviz.frameworks import FRAMEWORKS, backend, installed, label
from attnviz.result import AttentionResult
from attnviz.run import run_attention
from attnviz.ui import config
from attnviz.ui.config import DEFAULTS, LIMITS

MAX_EDITOR_SIDE = 64  # the cell-by-cell mask editor up to 64 × 64
_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+-.!|<>~$:"})


def escape_markdown(text: str) -> str:
    """User text shown through Streamlit markdown (alerts, captions) as literal text:
    no emphasis, links, LaTeX (`$`) or HTML."""
    return str(text).translate(_MARKDOWN_SPECIALS)


# -- state ----------------------------------------------------------------------------


def state() -> dict:
    """This session's configuration, first read from the URL."""
    if "cfg" not in st.session_state:
        cfg, problems = config.from_query(st.query_params.to_dict())
        st.session_state["cfg"] = cfg
        st.session_state["cfg_problems"] = problems
    return st.session_state["cfg"]


def _commit(name: str) -> None:
    st.session_state["cfg"][name] = st.session_state[f"cfg.{name}"]


def _widget(factory: Callable, name: str, label: str, slots: dict, **kwargs):
    """A widget bound to `cfg[name]`, followed by a slot for its error message."""
    st.session_state[f"cfg.{name}"] = st.session_state["cfg"][name]
    value = factory(label, key=f"cfg.{name}", on_change=_commit, args=(name,), **kwargs)
    slots[name] = st.empty()
    return value


def _number(name: str, label: str, slots: dict, **kwargs):
    lo, hi = LIMITS[name]
    step = 0.01 if isinstance(DEFAULTS[name], float) else 1
    return _widget(st.number_input, name, label, slots, min_value=lo, max_value=hi, step=step, **kwargs)


# -- frameworks ----------------------------------------------------------------------------


@st.cache_resource(show_spinner="Loading the framework (once per server)…")
def load_framework(framework: str):
    """The framework's attnviz backend, imported once per server process."""
    return backend(framework)


@st.cache_resource(show_spinner=False)
def gpu_available(framework: str) -> bool:
    return load_framework(framework).gpu_available()


def installed_frameworks() -> list[str]:
    return installed()


def framework_and_device(cfg: dict, slots: dict, framework_choice: bool = True) -> None:
    """Framework and device choice, saying what is missing and offering what works."""
    available = installed_frameworks()
    if not available:
        st.error(
            "Neither PyTorch nor TensorFlow is installed. "
            + " · ".join(f.install_hint for f in FRAMEWORKS.values())
        )
        st.stop()
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    if cfg["framework"] not in available:
        cfg["framework"] = available[0]
    if framework_choice:
        _widget(
            st.radio,
            "framework",
            "Framework",
            slots,
            options=available,
            format_func=label,
            horizontal=True,
        )
        has_gpu = gpu_available(cfg["framework"])
    else:
        has_gpu = all(gpu_available(fw) for fw in available)
    if not has_gpu:
        if cfg["device"] == "gpu":
            st.warning(f"No GPU is visible to {label(cfg['framework'])} here; running on the CPU.")
        cfg["device"] = "cpu"
    _widget(
        st.radio,
        "device",
        "Device",
        slots,
        options=["cpu", "gpu"] if has_gpu else ["cpu"],
        format_func=str.upper,
        horizontal=True,
        help=None if has_gpu else f"No GPU is visible to {label(cfg['framework'])} on this machine.",
    )
    if not has_gpu:
        st.caption(f"GPU: none visible to {label(cfg['framework'])} on this machine — CPU only.")


# -- the sidebar ----------------------------------------------------------------------------


def sidebar(framework_choice: bool = True) -> tuple[dict, dict]:
    """Every control of the configuration, in the sidebar.

    Returns:
        The configuration and the error slot under each control (by field).
    """
    cfg, slots = state(), {}
    with st.sidebar:
        for problem in st.session_state.pop("cfg_problems", []):
            st.warning(escape_markdown(problem))
        framework_and_device(cfg, slots, framework_choice)
        st.subheader("Inputs")
        _widget(
            st.radio,
            "input",
            "Queries from",
            slots,
            options=["random", "sentence"],
            horizontal=True,
            format_func={"random": "random (seeded)", "sentence": "a sentence"}.get,
        )
        sentence = cfg["input"] == "sentence"
        if sentence:
            _widget(
                st.text_input,
                "sentence",
                "Sentence (each word is a position)",
                slots,
                max_chars=config.MAX_TEXT,
            )
        _widget(
            st.radio,
            "mode",
            "Attention",
            slots,
            options=["self", "cross"],
            horizontal=True,
            help="self: keys/values from the same sequence; cross: from a second one",
        )
        cross = cfg["mode"] == "cross"
        if cross and sentence:
            _widget(
                st.text_input,
                "sentence_kv",
                "Second sentence (keys / values)",
                slots,
                max_chars=config.MAX_TEXT,
            )
        st.subheader("Shape")
        _number("batch", "Batch size", slots)
        if not sentence:
            _widget(st.slider, "len_q", "Query length len_q", slots, min_value=1, max_value=512)
            if cross:
                _widget(st.slider, "len_kv", "Key/value length len_kv", slots, min_value=1, max_value=512)
        _number("d_model", "d_model", slots)
        _widget(st.slider, "n_heads", "Heads", slots, min_value=1, max_value=16)
        _number("d_k", "d_k per head (0 = d_model / heads)", slots)
        _number("d_v", "d_v per head (0 = d_model / heads)", slots)
        if cross:
            _number("d_kv_in", "Key/value input width d_kv_in", slots)
        st.subheader("Mask")
        _widget(
            st.selectbox,
            "mask",
            "Mask",
            slots,
            options=list(config.CHOICES["mask"]),
            help="True = may attend; blocked positions get weight exactly 0",
        )
        if cfg["mask"] == "padding":
            _number("valid_kv_len", "Real (unpadded) key positions", slots)
        elif cfg["mask"] == "custom":
            st.caption("Draw the mask in the editor on the page.")
        st.subheader("Details")
        _number("seed", "Seed", slots)
        _widget(st.radio, "dtype", "dtype", slots, options=["float32", "float64"], horizontal=True)
        _widget(st.checkbox, "bias", "Bias on the projections", slots)
        _widget(st.slider, "dropout", "Attention dropout", slots, min_value=0.0, max_value=0.9, step=0.05)
        _widget(st.checkbox, "training", "Training mode (dropout active)", slots)
        _number("scale", "Scale override (0 = 1/√d_k)", slots, format="%.4f")
        _widget(st.checkbox, "residual_norm", "Residual + LayerNorm (seed 004)", slots)
    st.query_params.from_dict(config.to_query(cfg))
    return cfg, slots


# -- spec, or an explanation ----------------------------------------------------------------


def spec_or_stop(cfg: dict, slots: dict):
    """The spec, or the library's message next to the control it names, then stop."""
    try:
        spec = config.build_spec(cfg)
        config.check_fits(spec)
    except ValueError as error:
        message = str(error)
        field = message.split(":", 1)[0].removeprefix("AttentionSpec.")
        target = {"len_kv": "len_kv", "custom_mask": "mask"}.get(field, field)
        shown = escape_markdown(message)
        if target in slots:
            slots[target].error(shown)
        st.error(f"This configuration can't run — {shown}", icon=":material/error:")
        st.stop()
    return spec


def configure(framework_choice: bool = True) -> tuple[dict, object, list[str], list[str]]:
    """The sidebar, the mask editor when the mask is custom, and the spec (or an explanation and stop).

    Returns:
        The configuration, its `AttentionSpec`, and the query and key labels.
    """
    cfg, slots = sidebar(framework_choice)
    q_labels, k_labels = config.labels(cfg)
    if cfg["mask"] == "custom":
        mask_editor(cfg, q_labels, k_labels)
    return cfg, spec_or_stop(cfg, slots), q_labels, k_labels


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


def _apply_preset(len_q: int, len_kv: int) -> None:
    """Button callback: runs before the rerun, so the preset survives any rerun."""
    mask = preset_mask(st.session_state["mask.preset"], len_q, len_kv, int(st.session_state["mask.width"]))
    st.session_state["cfg"]["custom_mask"] = config.encode_mask(mask)
    st.session_state["mask.version"] = st.session_state.get("mask.version", 0) + 1  # a fresh grid


def mask_editor(cfg: dict, q_labels: list[str], k_labels: list[str]) -> None:
    """Presets plus a checkbox grid; writes `cfg["custom_mask"]`."""
    len_q, len_kv = len(q_labels), len(k_labels)
    current = config.decode_mask(cfg["custom_mask"], len_q, len_kv)
    with st.expander("Custom mask editor — ticked = may attend", expanded=True, icon=":material/edit:"):
        c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
        c1.selectbox("Preset", PRESETS, key="mask.preset")
        c2.number_input("w (window / stride / block / length)", 1, 512, 3, key="mask.width")
        c3.button("Apply preset", key="mask.apply", on_click=_apply_preset, args=(len_q, len_kv))
        if len_q > MAX_EDITOR_SIDE or len_kv > MAX_EDITOR_SIDE:
            st.info(
                f"The cell-by-cell grid is shown up to {MAX_EDITOR_SIDE} × {MAX_EDITOR_SIDE}; "
                "at this size use a preset."
            )
        else:
            import pandas as pd  # here, not at import: keeps it off the first chart's path

            frame = pd.DataFrame(
                current,
                index=[f"{i}: {q}" for i, q in enumerate(q_labels)],
                columns=[f"{j}: {k}" for j, k in enumerate(k_labels)],
            )
            version = st.session_state.get("mask.version", 0)
            edited = st.data_editor(frame, key=f"mask.grid.{version}.{len_q}x{len_kv}", width="stretch")
            current = edited.to_numpy(dtype=bool)
        blocked_rows = int((~current.any(axis=1)).sum())
        if blocked_rows:
            st.caption(f"{blocked_rows} query row(s) have no allowed key: their weights are all 0.")
    cfg["custom_mask"] = config.encode_mask(current)
    st.query_params.from_dict(config.to_query(cfg))


# -- runs ----------------------------------------------------------------------------------


@st.cache_data(max_entries=64, show_spinner=False)
def _run(cfg_json: str, framework: str) -> AttentionResult:
    cfg = json.loads(cfg_json)
    spec = config.build_spec(cfg)
    x_q, x_kv = config.inputs(cfg, spec)
    load_framework(framework)
    return run_attention(spec, framework, cfg["device"], x_q=x_q, x_kv=x_kv)


@st.cache_data(max_entries=32, show_spinner="Running both frameworks…")
def _compare(cfg_json: str) -> Comparison:
    cfg = json.loads(cfg_json)
    spec = config.build_spec(cfg)
    x_q, x_kv = config.inputs(cfg, spec)
    for fw in FRAMEWORKS:
        load_framework(fw)
    return compare_frameworks(spec, cfg["device"], x_q=x_q, x_kv=x_kv)


def compare(cfg: dict) -> Comparison:
    """The cached PyTorch-vs-TensorFlow comparison of the configuration (a copy per session)."""
    return _compare(config.canonical(cfg))


def run(cfg: dict, framework: str | None = None) -> AttentionResult:
    """The cached result of the configuration in `framework` (default: the chosen one).

    Each session gets its own copy (st.cache_data pickles), so nothing is shared.
    """
    return _run(config.canonical(cfg), framework or cfg["framework"])


def downloads(spec, result: AttentionResult, q_labels: list[str], k_labels: list[str]) -> None:
    """Configuration as JSON, every step as .npz, the weights as CSV (built on click)."""
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
        lambda: export.steps_npz(result),
        "attnviz-steps.npz",
        "application/octet-stream",
        on_click="ignore",
    )
    d3.download_button(
        "⬇ Weights (CSV)",
        lambda: export.weights_csv(result, q_labels, k_labels),
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
