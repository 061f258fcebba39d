"""FlashAttention, tile by tile: a real head's attention computed the way FlashAttention does (Dao et al.,
2022) — score tile, running max and denominator, output rows closing in on the full softmax — and the
memory it holds against the L × L matrix; then the KV cache's size for each decoder on offer.

Every control is bound to the URL (key = parameter name), so a link reopens the same tile.
"""

import numpy as np
import streamlit as st

from attnviz import formats, pretrained
from attnviz.app import controls
from attnviz.app.frame import door, links
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.shell import routed
from attnviz.app.tiles import fields, work
from attnviz.exec import TaskError
from attnviz.frameworks import label
from attnviz.kernels import replay as steps
from attnviz.plots import tiles as figures

routed("tiles")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL, P = "query-params", "tiles."
DECODER = "SmolLM2-135M-Instruct"  # the packaged Llama-family decoder, first when installed
DEFAULT_TEXT = "The cat sat on the mat because it was tired, and then the cat slept."

st.title("FlashAttention, tile by tile")
st.caption(
    "FlashAttention never forms the L × L score matrix. It walks blocks of queries and, for each, blocks of "
    "keys: one score tile at a time, a running row max m and denominator l, and an output accumulator "
    "rescaled by exp(m_old − m_new) whenever the max grows. Here a real head runs that way, in the framework "
    "you pick, and is checked against the full softmax."
)
link = links.opened_with(P)
allowed = work.checkpoint_choices()
with st.sidebar:
    first = list(allowed).index(DECODER) if DECODER in allowed else 0
    chosen = st.selectbox("Checkpoint", list(allowed), first, key=P + "checkpoint", bind=URL)
    if terms := pretrained.notice(chosen or ""):
        st.caption(terms)  # what the model's licence requires wherever it is selected
    framework = st.radio("Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
                         key=P + "framework", bind=URL)  # fmt: skip
    text = st.text_area("Prompt", DEFAULT_TEXT, max_chars=TEXT_LIMITS["tiles.text"], key=P + "text", bind=URL)
if not allowed:
    st.info("No checkpoint is available here; the Pretrained page says how to add one.")
    st.stop()
try:
    ckpt = work.open_checkpoint(allowed[chosen])
except (KeyError, ValueError) as error:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()
n_layers, n_heads = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
with st.sidebar:
    layer = int(fields.LAYER.number_input(high=n_layers - 1))
    head = int(fields.HEAD.number_input(high=n_heads - 1))
    block_q, block_k = int(fields.BQ.number_input()), int(fields.BK.number_input())
    precision = st.radio("Precision", list(work.PRECISIONS), horizontal=True, key=P + "precision", bind=URL,
                         help="float32 is how the model ran; float64 shows the difference reaching 0.")  # fmt: skip
notes = links.choices(link, P + "checkpoint", allowed) + links.choices(link, P + "precision", work.PRECISIONS)
notes += links.choices(link, P + "framework", map(label, controls.installed_frameworks()))
notes += fields.LAYER.notes(link, high=n_layers - 1) + fields.HEAD.notes(link, high=n_heads - 1)
notes += fields.BQ.notes(link) + fields.BK.notes(link)
note_slot = st.empty()
try:
    run = work.replay(allowed[chosen], text, framework, layer, head, block_q, block_k, precision)
except ValueError as error:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()
except TaskError as error:  # the model's run in its worker ended without a value
    door.show_failure(error)
    st.stop()
tiled, tokens = run.tiled, run.tokens
n_q, n_k = tiled.n_blocks
L = len(tokens)
n_tiles = len(tiled.tiles)
step = 0
if n_tiles > 1:  # a slider needs two values
    step = fields.STEP.slider(high=n_tiles) - 1
notes += fields.STEP.notes(link, high=n_tiles)
links.show(P, note_slot, notes)
tile = tiled.tiles[step]
kind = "a causal decoder: query i sees keys 0…i" if tiled.causal else "an encoder: every query sees every key"
st.markdown(
    f"**Tile {step + 1} of {n_tiles}** · **{chosen}** · layer {layer}, head {head} · {label(framework)} · {precision} · {L} tokens in "
    f"{n_q} query blocks × {n_k} key blocks of {block_q} × {block_k} · {kind}"
)
q_span, k_span = work.span(tile.queries, "Query", "Queries"), work.span(tile.keys, "key", "keys")
if tile.skipped:
    st.info(
        f"{q_span} × {k_span}: **skipped**. Every key here comes after every query of the block, "
        "so the causal mask would block all of it: nothing is loaded or computed, m and l stay as they were.",
        icon=":material/skip_next:",
    )
else:
    st.markdown(
        f"{q_span} × {k_span}: the score tile S = q·kᵀ/√d is computed; each row's max m grows "
        "to include it, what was summed so far is rescaled by exp(m_old − m_new), and S's exp is added to l and "
        "(times v) to the accumulator."
    )
left, right = st.columns([3, 2])
title = f"Scores: tile ({tile.q_block}, {tile.k_block}) is the only block held"
if tile.skipped:
    title = f"Tile ({tile.q_block}, {tile.k_block}) is skipped: no scores computed"
held = None if tile.scores is None else tile.scores[0, 0]  # (rows, keys)
left.plotly_chart(
    figures.tile_grid(steps.status(tiled, step), held, tile.queries, tile.keys, tokens, title),
    width="stretch", key=P + "grid",
)  # fmt: skip
final_m = run.tiled.tile(tile.q_block, n_k - 1).m_after[0, 0]
final_l = run.tiled.tile(tile.q_block, n_k - 1).l_after[0, 0]
right.plotly_chart(
    figures.running_stats(tile.queries, (tile.m_before[0, 0], tile.m_after[0, 0]),
                          (tile.l_before[0, 0], tile.l_after[0, 0]), (final_m, final_l), tokens),
    width="stretch", key=P + "stats",
)  # fmt: skip
right.caption(
    "The red tick is the row's value over all its keys (the whole row's max, and sum of exp(s − max)): after "
    "the block's last key tile, m and l reach it. Before a block's first tile m = −∞ and l = 0 (no bar)."
)
block = steps.block_steps(tiled, step)
distance = steps.distance(tiled, run.full)[block]
done = block.index(step) + 1
visited = [tiled.tiles[n] for n in block]
st.plotly_chart(
    figures.convergence(distance, [t.k_block for t in visited], [t.skipped for t in visited], done,
                        tile.queries, tokens, work.rounding(run.full, precision)),
    width="stretch", key=P + "converge",
)  # fmt: skip
now = np.nanmax(distance[done - 1])
last = np.nanmax(distance[-1])
model_gap = float(np.abs(tiled.output.astype(np.float64) - run.model).max())
st.markdown(
    f"After this tile the block's rows are at most **{now:.3g}** from the full softmax(q·kᵀ/√d)·v "
    f"(NumPy, float64, the same q, k, v); after its last key tile, **{last:.3g}**"
    + (" — float32 rounding." if precision == "float32" else ".")
    + f" The whole tiled output differs from the model's own attention output for this head (computed whole, "
    f"in float32) by {model_gap:.3g}."
)

st.subheader("Memory: the tiles held against the L × L matrix")
mem = tiled.memory
c1, c2, c3 = st.columns(3)
c1.metric("Tiled pass: largest tiles held", formats.size(mem.tiled))
c2.metric(f"The {L} × {L} score matrix", formats.size(mem.full))
c3.metric("Matrix ÷ tiles", f"{mem.ratio:.2g}×")
curve = work.memory_by_length(L, run.d_k, run.full.shape[-1], block_q, block_k, tiled.output.dtype.itemsize)
st.plotly_chart(figures.memory_curve(*curve, L), width="stretch", key=P + "memory")
st.caption(
    f"One head, {precision}. The tiles held — a {block_q}-row query tile, a {block_k}-key K and V tile, the "
    f"{block_q} × {block_k} score tile, the accumulator and m, l — do not grow with L; the matrix grows as L². "
    "At a short prompt the tiles can hold more than the matrix; the saving is at long contexts: "
    + work.at_lengths(*curve)
    + ". "
    + " · ".join(f"{name}: {formats.size(n)}" for name, n in mem.parts.items())
)

st.subheader("The KV cache: bytes per token, per decoder")
st.markdown(
    "Generating, a decoder keeps every layer's keys and values for every token so far, one row per **K/V "
    "head**. Grouped-query attention shares a K/V head among several query heads, so the cache shrinks by "
    "that factor. From each model's config, float32 (as attnviz runs; float16/bfloat16 halve every number):"
)
st.page_link("pages/decoding.py", label="Decoding: the KV cache, step by step →")
table = work.kv_table()
if table.empty:
    st.info("No decoder is on offer here; the Pretrained page says how to add one.")
else:
    st.dataframe(table, hide_index=True, width="stretch")
