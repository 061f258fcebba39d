"""Compare models: the same prompt through two decoders (SmolLM2 and Gemma 3 270M by default) — how
much each layer rests on the first token, how far back it reads, what roles its heads take at the
same relative depth, what its KV cache costs per token and where its parameters sit.

The comparison runs in a worker (`attnviz.app.frame.door`). Every control is bound to the URL
(key = parameter name), so a link reopens the same view.
"""

import streamlit as st

from attnviz import pretrained
from attnviz.app import controls
from attnviz.app.frame import door, links
from attnviz.app.frame.checkpoints import decoder_choices, open_checkpoint, task_source
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.shell import routed
from attnviz.app.frame.widgets import device_control
from attnviz.app.models import fields, figures, tasks
from attnviz.app.models import work as ui
from attnviz.errors import BudgetError
from attnviz.exec import TaskError
from attnviz.frameworks import label

routed("models")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL, P = "query-params", "models."

st.title("Compare models")
st.caption(
    "The same prompt through two decoders, layer by layer. Layers are lined up by relative depth — the first "
    "layer at 0, the last at 1 — so a 30-layer and an 18-layer model can be read on one axis."
)
link = links.opened_with(P)
allowed = decoder_choices(ui.FIRST)
first_at, second_at = ui.defaults(allowed)
with st.sidebar:
    first = st.selectbox("First decoder", list(allowed), first_at, key=P + "first", bind=URL)
    second = st.selectbox("Second decoder", list(allowed), second_at, key=P + "second", bind=URL)
    for name in dict.fromkeys((first, second)):
        if terms := pretrained.notice(name or ""):
            st.caption(terms)  # what the model's licence requires wherever it is selected
    framework = st.radio("Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
                         key=P + "framework", bind=URL)  # fmt: skip
    device = device_control(P, framework)  # offered where a GPU is present
    text = st.text_area("Prompt", ui.DEFAULT_TEXT, max_chars=ui.MAX_PROMPT_CHARS, key=P + "text", bind=URL)
    st.caption("Head-role scan: repeated random tokens")
    half, n, seed = (int(field.number_input()) for field in fields.ALL)
if absent := ui.missing():
    st.info(
        "This page opens on SmolLM2-135M-Instruct beside Gemma 3 270M; not installed here: "
        + " ".join(f"**{name}** (`{cmd}`)." for name, cmd in absent.items())
        + ("" if len(allowed) >= 2 else " It needs two decoders."),
        icon=":material/download:",
    )
if len(allowed) < 2:
    st.stop()
notes = links.choices(link, P + "first", allowed) + links.choices(link, P + "second", allowed)
notes += links.choices(link, P + "framework", map(label, controls.installed_frameworks()))
notes += [note for field in fields.ALL for note in field.notes(link)]
notes += links.choices(link, P + "role", ui.ROLE_NAMES.values())
links.show(P, st.empty(), notes)
if first == second:
    st.warning("Pick two different decoders to compare.", icon=":material/compare_arrows:")
    st.stop()
try:
    pair = tuple(open_checkpoint(allowed[name]) for name in (first, second))
    for ckpt in pair:
        ui.check(ckpt, text, half)
    summaries = door.run(
        tasks.compare_models, task_source(first, allowed[first]), task_source(second, allowed[second]), text,
        framework, half, n, seed, device=device, spinner="Running both models on the prompt and the role scan",
        cache="models",
    )  # fmt: skip
except BudgetError as error:
    st.error(escape_markdown(str(error)), icon=":material/memory:")
    st.stop()
except (TaskError, ValueError) as error:
    door.show_failure(error, key=P + "again")
    st.stop()
kinds = [ui.layer_kinds(s) for s in summaries]
shapes = [
    f"**{escape_markdown(s.name)}**: {len(s.depth)} layers, {len(s.tokens)} tokens of the prompt"
    for s in summaries
]
st.markdown(" · ".join(shapes) + f" · {label(framework)}")

st.subheader("Attention to the first token: the sink")
st.plotly_chart(
    figures.by_depth(summaries, [s.sink for s in summaries], kinds, "Weight on the first token, by layer",
                     "mean weight on token 0"),
    width="stretch", key=P + "sink",
)  # fmt: skip
st.markdown(
    "Each point is a layer: the mean weight its heads' queries (all but the first) put on the first token. "
    "A head with nothing to attend to parks its weight there, the *attention sink*. "
    + " ".join(ui.sink_sentence(s) for s in summaries)
)
for s, ckpt in zip(summaries, pair, strict=True):
    if note := ui.bos_note(s, ui.adds_special_first(ckpt, text)):
        st.info(note, icon=":material/info:")

st.subheader("How far back each layer reads")
st.plotly_chart(
    figures.by_depth(summaries, [s.span for s in summaries], kinds, "Attention span, by layer",
                     "mean distance attended (tokens)", ".1f"),
    width="stretch", key=P + "span",
)  # fmt: skip
st.caption(
    "The span is Σ weight × (query position − key position), averaged over heads and queries: 0 for a head "
    "that reads only itself. A sink on the first token lengthens it. A local layer cannot read further back "
    "than its window; on a prompt shorter than the window, a difference is what the layers choose."
)

st.subheader("Head roles at the same relative depth")
shown = st.radio("Role", list(ui.ROLE_NAMES.values()), horizontal=True, key=P + "role", bind=URL)
role = next(key for key, name in ui.ROLE_NAMES.items() if name == shown)
st.plotly_chart(
    figures.by_depth(summaries, [s.role_peak(role) for s in summaries], kinds,
                     f"Strongest {ui.ROLE_NAMES[role]} head, by layer", "score of the layer's best head"),
    width="stretch", key=P + "roles",
)  # fmt: skip
st.caption(
    f"The role scan: {n} sequences of {half} random tokens, each read twice. Per layer, the score of its "
    f"strongest head for the role — {escape_markdown(ui.ROLE_DESCRIPTIONS[role])}."
)

st.subheader("KV cache and parameters")
st.dataframe(ui.parameter_rows(summaries), hide_index=True, width="stretch", key=P + "table")
st.plotly_chart(figures.parameters(summaries), width="stretch", key=P + "parameters")
st.caption(
    "KV cache per token, float32 as attnviz runs it, with the model's own K/V layout and as plain multi-head "
    "attention would need (MHA); a local layer stops growing at its window. Parameters read from the "
    "checkpoint's own tensors: a large vocabulary puts most of a small model in its embedding."
)
