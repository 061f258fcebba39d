"""The shared sidebar: one widget per configuration field, teaching controls first.

Drawn by app.py (the entrypoint) on every page, so its state follows the visitor
from page to page the way Streamlit's multipage docs describe for widgets in the
entrypoint. Each widget is keyed by its field of `settings.DEFAULTS` and bound to
the URL (`bind="query-params"`): a link opens the same view, a change of a
control replaces the URL (no history entry), a change of page adds one. Bounds
and choices come from `settings.LIMITS` / `settings.CHOICES`; choices that cannot
work are not offered. The controls a lesson needs (weights, input, mask, heads,
lengths) come first; the rest (d_k, d_v, d_kv_in, scale, dtype, bias, dropout,
batch, device, …) fold under "Advanced" and stay in the link all the same.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attnviz import masks, settings
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.loading import gpu_known, import_shared_modules, installed_frameworks
from attnviz.app.frame.pages import PageInfo
from attnviz.app.sidebar.runs import checked, ready
from attnviz.app.sidebar.url import NOTES, PROBLEMS, changed, expected, first_visit, state
from attnviz.errors import SpecError
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.settings import DEFAULTS, LIMITS

# A field whose error belongs next to another control.
_SLOT_OF = {"memory_budget": "len_q", "spec": "len_q"}
# Controls folded under "Advanced": their errors show above the fold, naming the section.
ADVANCED = (
    "d_k",
    "d_v",
    "d_kv_in",
    "batch",
    "dtype",
    "bias",
    "dropout",
    "training",
    "scale",
    "residual_norm",
    "device",
)


class _Sidebar:
    """Draws the configuration widgets, each followed by its error, if the configuration has one
    there, and its note. No empty slot per control: the problem is known before the widgets are
    drawn (`url.expected`), and each placeholder is an element the browser renders (29 of them were
    a third of the sidebar's elements, measured in Chromium's trace: issue 42's first chart)."""

    def __init__(self, problem: tuple[str, str] | None):
        self.problem = problem  # (where, message): the control it is drawn beneath, or "advanced"
        self.shown: tuple[str, str] | None = None
        self.notes = st.session_state.pop(NOTES, {})

    def control(self, factory: Callable, name: str, label: str, **kwargs):
        value = session.value(
            factory, label, key=name, bind="query-params", on_change=changed, args=(name,), **kwargs
        )
        self.error(name)
        if name in self.notes:
            st.caption(escape_markdown(self.notes[name]))
        return value

    def error(self, where: str) -> None:
        """The configuration's problem, if it belongs at `where` (a control's name, or "advanced")."""
        if self.problem is not None and self.problem[0] == where:
            st.error(self.problem[1], icon=":material/error:")
            self.shown = self.problem

    def number(self, name: str, label: str, **kwargs):
        lo, hi = LIMITS[name]
        default = DEFAULTS[name]
        step = kwargs.pop("step", 0.01 if isinstance(default, float) else 1)
        return self.control(
            st.number_input, name, label, min_value=lo, max_value=hi, value=default, step=step, **kwargs
        )

    def slider(self, name: str, label: str, **kwargs):
        lo, hi = (int(v) for v in LIMITS[name])
        return self.control(
            st.slider, name, label, min_value=lo, max_value=hi, value=DEFAULTS[name], **kwargs
        )

    def choice(self, factory: Callable, name: str, label: str, options, **kwargs):
        options = list(options)
        default = DEFAULTS[name] if DEFAULTS[name] in options else options[0]
        return self.control(factory, name, label, options=options, index=options.index(default), **kwargs)

    def radio(self, name: str, label: str, **kwargs):
        return self.choice(st.radio, name, label, settings.CHOICES[name], horizontal=True, **kwargs)


def sidebar(page: PageInfo) -> dict:
    """Every control of the configuration, in the sidebar (collapsed on pages that do not use it).

    Called by app.py before the page runs. The configuration is checked once
    here (`runs.checked`, which the page then reuses); its error is shown next
    to the control it names (`SpecError.field`).

    Returns:
        The configuration.
    """
    first_visit()
    with st.sidebar:
        for problem in st.session_state.get(PROBLEMS, []):
            st.warning(escape_markdown(problem))
        problem = _place(checked(expected())) if page.uses_config else None
        if page.uses_config:
            bar = _draw(page, st.container(), problem)
        else:
            box = st.expander("Attention settings", icon=":material/tune:")
            box.caption(
                "Used by the explorer, step-by-step and comparison pages; kept in the link on every page."
            )
            bar = _draw(page, box, problem)
        cfg = state()
        final = _place(checked(cfg)) if page.uses_config else None
        if final is not None and final != bar.shown:  # the widgets held other values than foreseen
            st.error(final[1], icon=":material/error:")
    if not (page.preview_first and not ready(cfg)):  # the page's preview imports them after its chart
        import_shared_modules()
    return cfg


def _draw(page: PageInfo, where, problem: tuple[str, str] | None) -> _Sidebar:
    bar = _Sidebar(problem)
    with where:
        framework = _framework(bar, page)
        _inputs(bar)
        _shape(bar)
        _mask(bar)
        _variants(bar)
        bar.number("seed", "Seed")
        bar.error("advanced")  # a folded control's error shows above the fold
        with st.expander("Advanced", icon=":material/settings:"):
            _advanced(bar, page, framework)
    return bar


def _framework(bar: _Sidebar, page: PageInfo) -> str | None:
    available = installed_frameworks()
    if not available:
        st.error(
            "Neither PyTorch nor TensorFlow is installed. "
            + " · ".join(f.install_hint for f in FRAMEWORKS.values())
        )
        return None
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    both = page.sidebar == "both frameworks"
    framework = bar.choice(
        st.radio,
        "framework",
        "Framework",
        available,
        horizontal=True,
        disabled=both,
        help="This page runs both frameworks."
        if both
        else "torch: PyTorch; tensorflow: TensorFlow (the name in the link).",
    )
    bar.radio(
        "weights",
        "Weights",
        help="interpretable: hand-built W_Q and W_K (attnviz.heads); each head attends by position — "
        "previous token, same position, first token, window — whatever the input. random: seeded random "
        "weights, no learned pattern.",
    )
    return framework


def _inputs(bar: _Sidebar) -> None:
    st.subheader("Inputs")
    source = bar.radio(
        "input", "Queries from", help="sentence: one position per word; random: seeded vectors."
    )
    mode = bar.radio(
        "mode",
        "Attention",
        help="self: keys/values from the same sequence; cross: queries from one (a decoder's), keys and values "
        "from a second one (an encoder's)",
    )
    sentence = source == "sentence"
    bar.control(
        st.text_input,
        "sentence",
        "Sentence (each word is a position)",
        value=DEFAULTS["sentence"],
        max_chars=settings.MAX_TEXT,
        disabled=not sentence,
        help=None if sentence else "Used when the queries come from a sentence.",
    )
    bar.control(
        st.text_input,
        "sentence_kv",
        "Second sentence (keys / values)",
        value=DEFAULTS["sentence_kv"],
        max_chars=settings.MAX_TEXT,
        disabled=not (sentence and mode == "cross"),
        help="Used in cross mode with sentences.",
    )


def _shape(bar: _Sidebar) -> None:
    st.subheader("Shape")
    cfg = state()
    sentence, cross = cfg["input"] == "sentence", cfg["mode"] == "cross"
    bar.slider(
        "len_q",
        "Query length len_q",
        disabled=sentence,
        help="Set by the sentence's words." if sentence else None,
    )
    bar.slider(
        "len_kv",
        "Key/value length len_kv",
        disabled=sentence or not cross,
        help="Cross mode with random inputs only (self mode: the keys are the queries).",
    )
    d_model = bar.number("d_model", "d_model")
    heads = settings.head_choices(d_model, cfg["d_k"], cfg["d_v"])
    bar.control(
        st.select_slider,
        "n_heads",
        "Heads",
        options=heads,
        value=settings.nearest(DEFAULTS["n_heads"], heads),
        disabled=len(heads) == 1,
    )
    st.caption(
        "Any count from 1 to 16: d_k and d_v are set."
        if len(heads) == int(LIMITS["n_heads"][1])
        else f"Divisors of d_model = {d_model} (set d_k and d_v under Advanced for any count)."
    )


def _mask(bar: _Sidebar) -> None:
    st.subheader("Mask")
    cfg = state()
    options = settings.mask_choices(cfg)
    mask = bar.choice(
        st.selectbox,
        "mask",
        "Mask",
        options,
        help="True = may attend; blocked positions get weight exactly 0",
    )
    if "causal" not in options:
        len_q, len_kv = settings.lengths(cfg)
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
        max_chars=masks.MAX_MASK_CODE,
        disabled=mask != "custom",
        help="Rows of 0/1 joined by '.' for small masks; a compact code above 16 × 16. "
        "Draw it in the editor on the page.",
    )


def _variants(bar: _Sidebar) -> None:
    """Modern attention: grouped key/value heads, rotary positions, a sliding window."""
    st.subheader("Modern attention")
    cfg = state()
    n_heads = cfg["n_heads"]
    bar.control(
        st.select_slider,
        "n_kv_heads",
        "Key/value groups (grouped-query attention)",
        options=settings.kv_head_choices(n_heads),
        value=0,
        format_func=lambda d: f"{n_heads} (one per head)" if d == 0 else str(d),
        disabled=n_heads == 1,
        help="Divisors of the heads: each key/value head serves heads / kv-heads query heads "
        "(1 = multi-query attention, as in Llama's GQA).",
    )
    interpretable = cfg["weights"] == "interpretable"
    bar.number(
        "rope_base",
        "RoPE base (0 = no rotary positions)",
        step=1000.0,
        disabled=interpretable and not cfg["rope_base"],
        help="The interpretable heads carry their own position code: choose random weights for RoPE."
        if interpretable
        else "Rotary position embedding on q and k (10000 in most models): scores then depend on "
        "how far apart two tokens are. Needs an even d_k.",
    )
    causal = cfg["mask"] == "causal"
    bar.number(
        "window",
        "Sliding window (0 = none)",
        disabled=not causal,
        help="With the causal mask: query i sees only keys i − window + 1 … i (Mistral)."
        if causal
        else "Needs the causal mask: the window narrows it.",
    )


def _advanced(bar: _Sidebar, page: PageInfo, framework: str | None) -> None:
    cross = state()["mode"] == "cross"
    bar.number("d_k", "d_k per head (0 = d_model / heads)")
    bar.number("d_v", "d_v per head (0 = d_model / heads)")
    bar.number(
        "d_kv_in",
        "Key/value input width d_kv_in",
        disabled=not cross,
        help="Cross mode only (self mode: d_model, the width of the queries).",
    )
    bar.number("batch", "Batch size")
    bar.radio("dtype", "dtype")
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
    _device(bar, page, framework)


def _device(bar: _Sidebar, page: PageInfo, framework: str | None) -> None:
    if not page.uses_config or framework is None:  # a page that runs nothing asks no framework
        bar.radio("device", "Device")
        return
    # Asked of a worker, not of the server (which imports no framework): sent on the first run that
    # draws this control, answered on a later one; the control is greyed out until then.
    known = gpu_known(framework)
    bar.radio("device", "Device", disabled=not known)
    if known is None:
        st.caption(f"GPU: being asked of a {label(framework)} worker (known on the next change).")
    elif not known:
        st.caption(f"GPU: none visible to {label(framework)} on this machine — runs on the CPU.")


def _place(prepared) -> tuple[str, str] | None:
    """Where the configuration's problem, if any, is drawn — beneath the control it names, above the
    "Advanced" fold for a folded one, beneath len_q for the whole shape — and what it says."""
    if not isinstance(prepared, SpecError):
        return None
    name = _SLOT_OF.get(prepared.field, prepared.field)
    if name in ADVANCED:
        return "advanced", "Advanced → " + escape_markdown(str(prepared))
    return (name if name in DEFAULTS else "len_q"), escape_markdown(str(prepared))
