"""Decoding, token by token: a real decoder generates over its KV cache, and each step shows the new
token, its query row over the cached keys, the K and V rows the cache holds, and what the step
computes with and without the cache; then the time per token, measured, and the cache's size.

The trace and the timing run in a worker (`attnviz.app.frame.door`). Every control is bound to the
URL (key = parameter name), so a link reopens the same step.
"""

import streamlit as st

from attnviz import formats, pretrained
from attnviz.app import controls
from attnviz.app.decoding import fields, figures, sinks, tasks
from attnviz.app.decoding import work as ui
from attnviz.app.frame import door, links
from attnviz.app.frame.checkpoints import open_checkpoint, task_source
from attnviz.app.frame.literal import count, escape_markdown, one_line
from attnviz.app.frame.shell import routed
from attnviz.app.frame.widgets import device_control
from attnviz.errors import BudgetError
from attnviz.exec import TaskError
from attnviz.frameworks import label
from attnviz.kernels.kv_cache import kv_cache_size

routed("decoding")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL, P = "query-params", "decoding."

st.title("Decoding, token by token")
st.caption(
    "A decoder writes one token at a time. Each layer keeps the keys and values of every token so far — "
    "the **KV cache** — so a new token runs through the layers alone: its query reads the cached keys, and "
    "its own key and value join the cache. Without the cache, every step would run the whole text again. "
    "Here a real model generates, step by step, in the framework you pick."
)
link = links.opened_with(P)
allowed = ui.decoder_choices()
with st.sidebar:
    chosen = st.selectbox("Decoder", list(allowed), key=P + "checkpoint", bind=URL)
    if terms := pretrained.notice(chosen or ""):
        st.caption(terms)  # what the model's licence requires wherever it is selected
    if hint := ui.install_note(allowed):
        st.caption(hint)
    framework = st.radio("Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
                         key=P + "framework", bind=URL)  # fmt: skip
    device = device_control(P, framework)  # offered where a GPU is present
    text = st.text_area("Prompt", ui.DEFAULT_TEXT, max_chars=ui.MAX_PROMPT_CHARS, key=P + "text", bind=URL)
if not allowed:
    st.info("No decoder is available here. " + (ui.install_note({}) or ""), icon=":material/info:")
    st.stop()
try:
    ckpt = open_checkpoint(allowed[chosen])
    room = ui.room(ckpt, text, fields.NEW_TOKENS.high)
except ValueError as error:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()
cfg = ckpt.config
n_layers, n_heads = cfg.num_hidden_layers, cfg.num_attention_heads
with st.sidebar:
    new_tokens = int(fields.NEW_TOKENS.number_input(high=room))
    temperature = fields.TEMPERATURE_FIELD.slider()
    seed = int(fields.SEED.number_input(disabled=temperature == 0))
    layer = int(fields.LAYER.number_input(high=n_layers - 1))
    head = int(fields.HEAD.number_input(high=n_heads - 1))
notes = links.choices(link, P + "checkpoint", allowed)
notes += links.choices(link, P + "framework", map(label, controls.installed_frameworks()))
notes += fields.NEW_TOKENS.notes(link, high=room) + fields.LAYER.notes(link, high=n_layers - 1)
notes += fields.HEAD.notes(link, high=n_heads - 1) + fields.SEED.notes(link)
notes += fields.TEMPERATURE_FIELD.notes(link)
note_slot = st.empty()
source = task_source(chosen, allowed[chosen])
try:
    ui.check_trace(ckpt, text, new_tokens)
    d = door.run(tasks.decoding_trace, source, text, framework, new_tokens, None, None, float(temperature),
                 None, seed, device=device,
                 spinner=f"Generating {new_tokens} tokens over the cache", cache="decoding trace")  # fmt: skip
except BudgetError as error:
    st.error(escape_markdown(str(error)), icon=":material/memory:")
    st.stop()
except (TaskError, ValueError) as error:
    door.show_failure(error, key=P + "again")
    st.stop()
step = 1
if new_tokens > 1:  # a slider needs two values
    step = fields.STEP.slider(high=new_tokens)
notes += fields.STEP.notes(link, high=new_tokens)
links.show(P, note_slot, notes)
s = step - 1
now = d.steps[s]
tokens = formats.tokens(d.tokens)
drawn = (
    "the most likely token (temperature 0)" if temperature == 0 else f"drawn at temperature {temperature:g}"
)
st.markdown(
    f"**Step {step} of {new_tokens}** · {escape_markdown(chosen)} · {label(framework)} · new token "
    f"**“{escape_markdown(tokens[now.position])}”** at position {now.position}: {drawn}"
    + ("" if temperature == 0 else f" with probability **{now.probability:.1%}**")
    + f"; the model gives it **{d.model_probabilities[s]:.1%}** (its softmax at temperature 1)."
)
shown = lambda parts: one_line("".join(parts))  # noqa: E731
st.markdown(
    f"{shown(d.tokens[: d.prompt_length])}{shown(d.tokens[d.prompt_length : now.position])}"
    f":orange-background[{shown(d.tokens[now.position : now.position + 1])}]"
)
st.caption(
    f"The prompt ({d.prompt_length} tokens, the text as written: no chat template), the tokens generated "
    "before this step, and the new one (highlighted). Later steps' tokens are not written yet."
)

st.subheader("The new token's query reads the cache")
values, missing = ui.rows_so_far(d, s, layer, head)
labels = [f"{r + 1}: {tokens[d.steps[r].position]}" for r in range(s + 1)]
st.plotly_chart(
    figures.query_rows(values, missing, labels, tokens[: now.position + 1],
                       f"Layer {layer}, head {head} over the cache"),
    width="stretch", key=P + "rows",
)  # fmt: skip
first = now.first_key[layer]
st.markdown(
    f"The outlined row is step {step}'s query: it reads the {now.position + 1 - first} keys layer {layer}'s "
    f"cache holds (positions {first} … {now.position}, its own included) and puts most weight on "
    + ui.top_keys(ui.row(d, s, layer, head), tokens, first)
    + ". Rows above are the earlier steps', as they were computed; each reads one more key than the last."
)

st.subheader("The cache's K and V rows")
group = ui.kv_head(cfg, head)
keys, vals = ui.cache_rows(d, s, layer, group)
rows = d.cache_rows(s, layer)
row_labels = [f"{p}: {tokens[p]}" for p in rows]
shared = ui.readers(cfg, group)
who = f"query head {head}" if len(shared) == 1 else f"query heads {shared[0]} … {shared[-1]}"
left, right = st.columns(2)
for column, which, table in ((left, "K", keys), (right, "V", vals)):
    column.plotly_chart(
        figures.cache_heatmap(table, row_labels,
                              f"{which} cache · layer {layer} · K/V head {group}",
                              f"{which.lower()} feature"),
        width="stretch", key=P + which.lower(),
    )  # fmt: skip
kv = kv_cache_size(cfg)
st.caption(
    f"{keys.shape[0]} rows, one per cached position, × {keys.shape[1]} columns, the head's width; the "
    f"outlined row is the one this step wrote. K/V head {group} serves {who}"
    + (
        f" ({kv.layout}: {kv.query_heads} query heads share {count(kv.kv_heads, 'K/V head')})"
        if kv.layout != "MHA"
        else ""
    )
    + ": the cache stores each K/V head once, so it grows by one row per token per K/V head, not per query head."
    + (" Keys are stored after RoPE turned them by their position." if ui.uses_rope(cfg) else "")
)

st.subheader("What this step computes, with and without the cache")
with_, without = d.total(s, cached=True), d.total(s, cached=False)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Positions run, with the cache", f"{with_.positions:,}")
c2.metric("Attention scores, with the cache", f"{with_.scores:,}")
c3.metric("Positions run, without", f"{without.positions:,}")
c4.metric("Attention scores, without", f"{without.scores:,}")
st.markdown(ui.work_sentence(d, s))

st.subheader("Time per token, measured")
st.markdown(
    "With the cache, a step runs one position whatever the length; only its attention over the cached keys "
    "grows, by one key per token (O(T) scores). Without it, each token runs all T positions again: T times "
    "the matrix products, and T(T + 1)/2 scores per head (O(T²)). At these short lengths the matrix products "
    "dominate the full pass, so its time grows about linearly with T; the quadratic attention term takes over "
    f"at long contexts. Measured on this server for {escape_markdown(chosen)} in {label(framework)}: "
    f"{ui.TIMED_TOKENS} greedy tokens after the prompt, each step timed both ways, the median of "
    f"{ui.TIMED_REPEATS} runs."
)
if st.toggle("Measure the time per token (seconds to a minute)", key=P + "measure", bind=URL):
    try:
        ui.check_timing(ckpt, text)
        times = door.run(tasks.time_per_token, source, text, framework, ui.TIMED_TOKENS, ui.TIMED_REPEATS,
                         device=device, spinner="Timing each token with and without the cache", cache="decoding times")  # fmt: skip
    except BudgetError as error:
        st.error(escape_markdown(str(error)), icon=":material/memory:")
    except (TaskError, ValueError) as error:
        door.show_failure(error, key=P + "measure_again")
    else:
        st.plotly_chart(
            figures.time_per_token(times.positions, times.cached, times.uncached,
                                   "Time per new token"),
            width="stretch", key=P + "times",
        )  # fmt: skip
        ratio = times.uncached[-1] / times.cached[-1]
        st.caption(
            f"At position {times.positions[-1]} a cached step took {1e3 * times.cached[-1]:.3g} ms and a full pass "
            f"{1e3 * times.uncached[-1]:.3g} ms ({ratio:.1f}×). The prompt's own pass ({d.prompt_length} tokens, "
            f"{1e3 * times.prompt:.3g} ms) comes first either way. Times on a shared server vary from run to run; "
            "the shapes of the curves are the point."
        )

st.subheader("How big the cache gets")
st.markdown(
    "A decoder keeps K and V for every layer, every **K/V head** and every token. Grouped-query attention "
    "(GQA) shares one K/V head among several query heads, multi-query attention (MQA) one among all, so the "
    "cache is smaller by that factor than plain multi-head attention (MHA) would need; a sliding-window "
    "layer keeps only its window. From each model's configuration, float32 as attnviz runs it "
    "(float16 or bfloat16 halve every number):"
)
table = ui.kv_rows(tuple((name, allowed[name]) for name in allowed))
st.table(table, hide_index=True)  # every column in view: a grid scrolled its "window" column off the page
same, checked = ui.cache_check(cfg, d.cache_bytes, d.cached_positions)
(st.success if same else st.error)(checked, icon=":material/check_circle:" if same else ":material/error:")
st.caption(
    "The cache object is the one `generate` fills (keys and values per K/V head); the last new token is drawn "
    "from the logits and never run, so it holds one position fewer than the text."
)

sinks.section(allowed, framework)  # a long text through a cache that evicts: windows and sinks
