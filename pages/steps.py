"""Step by step: one head's attention, one matrix at a time; then RoPE, grouped K/V heads and masks."""

import numpy as np
import streamlit as st

from attnviz import masks, params, reference
from attnviz.app import controls
from attnviz.app.frame import links
from attnviz.app.frame.shell import routed
from attnviz.app.steps import fields
from attnviz.frameworks import step_code
from attnviz.plots import heatmaps, rope

routed("steps")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
# The head-level steps, in order: (step name, title, what it is).
HEAD_STEPS = [
    ("q_heads", "Q", "The queries of this head: each row is one query position, projected by W_q."),
    ("k_heads", "K", "The keys of this head: what each position offers to be matched against."),
    ("v_heads", "V", "The values of this head: what each position hands over when attended to."),
    ("q_rope", "Q·RoPE", "Q turned by position: each pair (i, i + d/2) rotated by position × base^(−2i/d)."),
    ("k_rope", "K·RoPE", "K turned by the same angles, so a query and a key score by their offset only."),
    (
        "k_repeated",
        "K shared",
        "Each K head repeated for the query heads it serves (grouped-query attention).",
    ),
    (
        "v_repeated",
        "V shared",
        "Each V head repeated the same way: the cache keeps one copy, the math reads r.",
    ),
    ("scores", "QKᵀ", "Dot product of every query with every key: large = similar."),
    ("scaled", "scaled", "Multiplied by the scale (1/√d_k by default) so softmax does not saturate."),
    ("masked", "masked", "Blocked positions set to −∞ (grey, ✕): after softmax their weight is exactly 0."),
    (
        "softmax",
        "softmax",
        "Each row turned into weights ≥ 0 that sum to 1 (a row with no allowed key: all 0).",
    ),
    (
        "dropout",
        "dropout",
        "After dropout (training only): each weight zeroed with probability p, the rest scaled by 1/(1−p), "
        "so rows no longer sum to 1. Step back to softmax to see the weights before dropout.",
    ),
    ("context", "· V", "Each query's output: the weighted mix of the value rows."),
]

URL = "query-params"  # bind: a widget's key is its URL parameter, so a link keeps the view

st.title("Step by step")
link = links.opened_with("steps.")  # before the widgets drop what they cannot use
notes_slot = st.empty()
cfg, spec, q_labels, k_labels = controls.configure()
result = controls.run(cfg)
recorded = {s.name: s for s in result.steps}
steps = [s for s in HEAD_STEPS if s[0] in recorded]
if spec.mode == "cross":
    st.caption(
        "Cross-attention: the **queries come from the decoder** (one sequence, the rows) and the **keys and "
        "values from the encoder** (another sequence, the columns), so Q and K may differ in length. In "
        "Whisper each written word's query reads the keys of the sound — the Speech page shows it."
    )

c1, c2 = st.columns(2)
h = fields.HEAD.number_input(c1, high=spec.n_heads - 1)
b = fields.BATCH.number_input(c2, high=spec.batch - 1) if spec.batch > 1 else 0
names = [title for _, title, _ in steps]
current = st.segmented_control(
    "Walk through the steps", names, default=names[0], key="steps.current", bind=URL
)
show_all = st.toggle("Show every step at once", key="steps.all", bind=URL)
current = current or names[0]
small = max(spec.len_q, spec.len_kv, spec.d_k, spec.d_v) <= heatmaps.VALUES_LIMIT
show_values = small and st.toggle("Show values in the cells", key="steps.values", bind=URL)
if "dropout" in recorded:
    st.caption(
        "Training with dropout: “softmax” shows the weights before dropout, “dropout” the weights after it "
        "(the ones that multiply V)."
    )
elif spec.dropout > 0:
    st.caption(f"Dropout p = {spec.dropout:g} is set, but training mode is off: no dropout is applied.")

# Rows and columns of each step's matrix, the code lines that produce it, and the steps with K/V heads.
AXES = {"q_heads": ("q", "Dk"), "k_heads": ("k", "Dk"), "v_heads": ("k", "Dv"), "context": ("q", "Dv")}
AXES.update(q_rope=("q", "Dk"), k_rope=("k", "Dk"), k_repeated=("k", "Dk"), v_repeated=("k", "Dv"))
CODE = {"q_heads": ("q_proj", "q_heads"), "k_heads": ("k_proj", "k_heads"), "v_heads": ("v_proj", "v_heads")}
KV_HEADS = ("k_heads", "v_heads", "k_rope")
group = spec.n_heads // spec.n_kv_heads  # query heads per K/V head
labels = {"q": q_labels, "k": k_labels}
titles = {"q": "query", "k": "key"}
allowed = masks.from_spec(spec)
blocked = None if allowed is None else ~allowed[b]
torch_code, tf_code = step_code("torch"), step_code("tensorflow")
for name, title, explanation in steps:
    if not show_all and title != current:
        continue
    step = recorded[name]
    head = h // group if name in KV_HEADS else h
    value = step.value[b, head]
    st.subheader(f"{names.index(title) + 1}. {title}")
    shared = f" (K/V head {head}, read by query head {h})" if name in KV_HEADS and group > 1 else ""
    st.markdown(
        f"{explanation}  \nFull tensor **{step.shape}** (B, H, …) → this head{shared}: **{value.shape}**"
    )
    rows, cols = AXES.get(name, ("q", "k"))
    weights_like = name in ("softmax", "dropout")
    fig = heatmaps.matrix(
        value,
        labels[rows],
        labels.get(cols),
        blocked=blocked if weights_like else None,
        title=f"{title} — head {h}" + (f", batch item {b}" if spec.batch > 1 else ""),
        diverging=not weights_like,
        colorscale="Blues" if weights_like else "RdBu",
        value_name="weight" if weights_like else "value",
        y_title=titles[rows],
        x_title=titles.get(cols, f"feature ({cols})"),
        show_values=show_values,
    )
    if weights_like or name == "masked":
        st.caption(
            fig.layout.meta["color_scale"]
            + (" Grey cells marked ✕ are blocked by the mask." if blocked is not None else "")
        )
    st.plotly_chart(fig, width="stretch", key=f"steps.fig.{name}")
    left, right = st.columns(2)
    lines = CODE.get(name, (name,))
    left.caption("PyTorch")
    left.code("\n".join(torch_code[n] for n in lines), language="python", wrap_lines=True)
    right.caption("TensorFlow")
    right.code("\n".join(tf_code[n] for n in lines), language="python", wrap_lines=True)

st.divider()
st.header("Rotary positions (RoPE)")
base = spec.rope_base or 10000.0
if spec.d_k % 2:
    st.caption(f"RoPE turns pairs of features, so it needs an even d_k (here {spec.d_k}).")
else:
    st.markdown(
        "RoPE adds no vector to the token: it **turns** each pair (i, i + d/2) of q and k by the angle "
        f"position × {base:g}^(−2i/d). Fast pairs turn a lot per step, slow ones barely. "
        + ("" if spec.rope_base else "RoPE is off in this configuration (set a RoPE base in the sidebar); ")
        + f"{'The' if spec.rope_base else 'the'} figures use base {base:g} on query head {h}."
    )
    pos = fields.POS.number_input(high=spec.len_q - 1)
    q_head = recorded["q_heads"].value[b, h]  # (Lq, Dk), before RoPE
    left, right = st.columns(2)
    left.plotly_chart(
        rope.pair_rotation(q_head[pos], reference.rope(q_head, base)[pos], pos), key="steps.rope.pairs"
    )
    left.caption("Each pair keeps its length: RoPE turns q (and k), it never stretches them.")
    offsets = np.arange(max(2 * spec.len_q, 32))
    scores = reference.rope_band_scores(spec.d_k, base, offsets)
    right.plotly_chart(rope.band_scores(scores, offsets, base), key="steps.rope.bands")
    right.caption(
        "The same q and k placed at any two positions score cos(offset · θ) per band: nearby tokens "
        "score alike, far ones by how the bands drift apart — and the absolute position never enters."
    )

st.header("Grouped K/V heads (GQA, MQA)")
st.markdown(
    f"Here {spec.n_heads} query heads share {spec.n_kv_heads} K/V head{'s' * (spec.n_kv_heads > 1)}: "
    f"query head h reads K/V head h // {group}. A decoder caches K and V for every past token, so fewer "
    "K/V heads mean a smaller cache, while every query head still asks its own question."
)
st.plotly_chart(rope.kv_sharing(spec.n_heads, spec.n_kv_heads), key="steps.gqa")
smol = params.SMOLLM2_135M
tables = {
    f"this configuration (1 layer, {spec.dtype})": params.kv_cache_table(
        1, spec.n_heads, spec.n_kv_heads, spec.d_k, spec.d_v, spec.itemsize
    ),
    "SmolLM2-135M (30 layers, 2-byte values)": params.kv_cache_table(
        smol["n_layers"], smol["n_heads"], smol["n_kv_heads"], smol["head_dim"], smol["head_dim"], 2
    ),
}
st.plotly_chart(rope.kv_cache_bars(tables), key="steps.kvcache")
st.caption(rope.kv_cache_note(spec.n_heads, spec.n_kv_heads))

st.divider()
st.header("Mask conventions: one mask, four encodings")
logical = masks.from_spec(spec)
logical = masks.causal(spec.len_q, spec.len_kv) if logical is None else logical[b]
if spec.mask == "none":
    st.caption("No mask is chosen, so a causal mask illustrates the conventions.")
if spec.window is not None:
    st.caption(
        f"The sliding window (Mistral) is on: query i sees key j only when i − {spec.window} < j ≤ i — "
        f"`masks.window(Lq, Lk, {spec.window})`, applied by the layer on top of the causal mask."
    )
st.markdown(
    "attnviz uses **True = may attend**. Other APIs read masks differently; passing a mask built "
    "for one where another is expected silently attends to the wrong keys."
)
conventions = list(masks.CONVENTIONS)
for pair in (conventions[:2], conventions[2:]):
    for col, name in zip(st.columns(2), pair, strict=True):
        info = masks.CONVENTIONS[name]
        col.plotly_chart(
            heatmaps.binary_mask(
                masks.to_convention(logical, name),
                q_labels,
                k_labels,
                title=info["title"],
                attend=info["attend"],
            ),
            width="stretch",
            key=f"steps.conv.{name}",
            config={"displayModeBar": False},
        )
        col.code(info["code"], language="python", wrap_lines=True)
        col.caption(f"{name} — {info['meaning']}")

c1, c2 = st.columns(2)
built = c1.selectbox("Mask built for", conventions, key="steps.built", bind=URL)
given = c2.selectbox("…but passed to", conventions, index=2, key="steps.given", bind=URL)
right_w, applied, wrong_w = reference.misread_weights(recorded["scaled"].value[b, h], logical, built, given)
same = bool((applied == logical).all())
(st.success if same else st.error)(
    "Same meaning: the weights are right."
    if same
    else f"Mismatch: {int((applied != logical).sum())} of {applied.size} cells flip — the model "
    "attends exactly where it should not."
)
l, r = st.columns(2)
for col, w, mask, what, says in (
    (l, right_w, logical, "intended", "What the mask means: the weights when it is read as it was built."),
    (r, wrong_w, applied, "as passed", f"The same mask built for “{built}” but passed to “{given}”."),
):
    fig = heatmaps.matrix(
        w, q_labels, k_labels, blocked=~mask, title=f"weights {what}", diverging=False, colorscale="Blues",
        value_name="weight", show_values=show_values,
    )  # fmt: skip
    col.plotly_chart(fig, width="stretch", key=f"steps.{'right' if what == 'intended' else 'wrong'}")
    col.caption(f"{says} {fig.layout.meta['color_scale']} Grey cells marked ✕ are blocked by the mask.")
if (~applied).all(axis=-1).any():
    st.caption(
        "Rows with every key blocked are drawn as 0 here; PyTorch's MultiheadAttention returns NaN "
        "for them and Keras spreads them evenly."
    )

notes = fields.HEAD.notes(link, high=spec.n_heads - 1) + links.choices(link, "steps.current", names)
notes += fields.BATCH.notes(link, high=spec.batch - 1) + fields.POS.notes(link, high=spec.len_q - 1)
notes += links.choices(link, "steps.built", conventions) + links.choices(link, "steps.given", conventions)
links.show("steps.", notes_slot, notes)
