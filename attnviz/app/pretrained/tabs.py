"""The Pretrained page's two interactive tabs, Next token and Ablation: their widgets, one
call into the library each, and their figures (`attnviz.app.pretrained.figures`)."""

from __future__ import annotations

import functools

import streamlit as st

from attnviz import masks, pretrained
from attnviz.app import controls
from attnviz.app.pretrained import figures as plots
from attnviz.app.pretrained import selections
from attnviz.app.pretrained import work as ui
from attnviz.plots import heatmaps

URL = "query-params"


def next_token_tab(ckpt, name: str, text: str, framework: str, view: ui.View, layer: int) -> None:
    """The next-token predictions after the text, and generation token by token (decoders)."""
    out = view.out
    c1, c2 = st.columns(2)
    k = c1.slider("How many predictions", 1, 20, 10, key="pre.k", bind=URL)
    lowest, highest = pretrained.TEMPERATURE  # the library's bounds (and 0: always the most likely)
    temperature = c2.slider(
        "Temperature (0: always the most likely)", 0.0, highest, 1.0, lowest, key="pre.temperature", bind=URL
    )
    try:  # a link can carry a temperature the slider does not offer: the library names it
        top = ckpt.next_tokens(out.logits[-1], k=k, temperature=temperature)
    except ValueError as error:
        ui.show_error(error)
    st.markdown(f"After **{controls.escape_markdown(text)}** the model predicts:")
    c1, c2 = st.columns([2, 3])
    table = [{"token": repr(t), "probability": f"{p:.2%}"} for t, p in top]
    c1.dataframe(table, hide_index=True, width="stretch", key="pre.top_table")
    c2.plotly_chart(
        plots.next_token_bars(top, f"Next token (temperature {temperature:g})"),
        width="stretch",
        key="pre.top",
    )
    st.subheader("Generate, token by token")
    has_chat = ui.chat_template(ckpt)
    use_chat = has_chat and st.checkbox(
        "Use the chat template",
        value=True,
        key="pre.chat",
        bind=URL,
        help="An instruct model was trained on chats: the text becomes the user's turn, the model answers.",
    )
    if not has_chat:
        st.caption("This checkpoint has no chat template: generation continues the text as it is.")
    try:
        prompt = ui.generation_prompt(ckpt, text, use_chat)
        prompt_ids = ckpt.encode(prompt)[0] if use_chat else out.ids
    except ValueError as error:
        ui.show_error(error)
    positions = ckpt.config.max_position_embeddings
    room = max(1, min(ui.MAX_NEW_TOKENS, positions - len(prompt_ids)))
    c1, c2, c3 = st.columns(3)
    n_new = c1.number_input("New tokens", 1, room, min(8, room), key="pre.new_tokens", bind=URL)
    seed = c2.number_input("Seed", 0, 10**6, 0, key="pre.seed", bind=URL)
    go_on = c3.toggle("Generate", key="pre.generate", bind=URL)
    if len(prompt_ids) >= positions:
        st.warning(f"The {'chat ' if use_chat else ''}text already fills the model's {positions} positions.")
        return
    if not go_on:
        return
    try:
        gen = ui.generate(name, prompt, framework, int(n_new), float(temperature), int(seed))
    except ValueError as error:
        ui.show_error(error)
    raw, tokens, table = ui.generated_rows(ckpt, gen)
    shown = lambda parts: controls.escape_markdown("".join(parts)).replace("\n", " ")  # noqa: E731
    st.markdown(f"{shown(raw[: gen.prompt_length])} :orange-background[{shown(raw[gen.prompt_length :])}]")
    st.caption(
        f"The prompt, then **{len(table)} new tokens** (highlighted), drawn at temperature {temperature:g} with "
        f"seed {seed}: the same seed gives the same tokens."
        + (" The prompt is the text as the chat template writes a user's turn." if use_chat else "")
    )
    st.dataframe(table, hide_index=True, width="stretch", key="pre.generated_table")
    new = tokens[gen.prompt_length :]
    st.plotly_chart(
        heatmaps.matrix(
            gen.output.attentions[layer].mean(0)[gen.prompt_length :],  # (new, T + new)
            [f"{i + 1}: {t}" for i, t in enumerate(new)],
            tokens,
            blocked=~masks.causal(len(tokens))[gen.prompt_length :],
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


def ablation_tab(
    ckpt, name: str, text: str, pair: str | None, framework: str, view: ui.View, open_: bool
) -> None:
    """Ablate chosen heads and show what changed; rank every head by its effect."""
    L, H = view.out.attentions.shape[:2]
    all_heads = [(i, h) for i in range(L) for h in range(H)]
    c1, c2 = st.columns([3, 1])
    chosen = c1.multiselect(
        "Heads to ablate (or click thumbnails in the Model view with “clicking ablates” on)",
        all_heads,
        format_func=ui.head_name,
        key="pre.ablate",
        bind=URL,
    )
    mode = c2.radio(
        "Ablation", pretrained.ABLATIONS, format_func=ui.ABLATION_MODES.get, key="pre.ablate_mode", bind=URL
    )
    if not chosen:
        st.caption("Pick one or more heads to see what removing them changes.")
    elif open_:  # only the open tab runs the ablated model
        try:
            after = ui.ablated_run(name, text, pair or None, framework, tuple(map(tuple, chosen)), mode)
        except ValueError as error:
            ui.show_error(error)
        _effect(ckpt, view, after, ", ".join(map(ui.head_name, chosen)))
    _importance(ckpt, name, text, pair, framework, mode, view)


def _effect(ckpt, view: ui.View, after, names: str) -> None:
    """What the ablation changed, drawn as a change from 0 (0: unchanged)."""
    before = view.out
    effect = ckpt.ablation_effect(before, after)
    if ckpt.kind == "encoder":
        cosine = effect["sentence_cosine"]
        st.metric(
            f"Sentence embedding change after ablating {names}: 1 − cosine",
            f"{1 - cosine:.3g}",
            help="1 − the cosine of the mean-pooled last hidden states before and after; 0: unchanged.",
        )
        st.caption(f"Cosine before/after: {cosine:.6f}. The bars show each token's 1 − cosine, from 0.")
        change, metric = 1 - effect["token_cosine"], "1 − cosine"
        title, x_title, key = "How much each token's hidden state changed", "token", "pre.ablation_tokens"
    else:
        c1, c2 = st.columns(2)
        c1.metric(
            f"KL divergence of the next token after ablating {names}",
            f"{effect['kl_last']:.4f} nats",
            help="KL(before ‖ after) of the last position's next-token distribution; 0: unchanged.",
        )
        c2.metric(
            "Positions whose most likely next token changed",
            f"{ui.top_token_changes(before, after)} of {len(before.ids)}",
        )
        st.dataframe(
            ui.ablation_top(ckpt, before, after), hide_index=True, width="stretch", key="pre.ablation_top"
        )
        st.caption(
            "The 5 most likely next tokens before the ablation, then those of the 5 most likely after it that "
            "were not among them."
        )
        change, metric = effect["kl"], "KL (nats)"
        title, x_title = "KL divergence of each position's prediction", "position (the prediction after it)"
        key = "pre.ablation_kl"
    fig = plots.change_bars(view.labels, change, metric=metric, title=title, x_title=x_title)
    st.plotly_chart(fig, width="stretch", key=key)


def _importance(
    ckpt, name: str, text: str, pair: str | None, framework: str, mode: str, view: ui.View
) -> None:
    """ "Most important heads": ablate each head in turn (one of the server's concurrent runs)."""
    st.subheader("Most important heads")
    L, H = view.out.attentions.shape[:2]
    encoder = ckpt.kind == "encoder"
    work = L * H * len(view.out.ids)
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
            st.warning("The importance table reads the first sentence only; switch the sentence pair off.")
        elif work > ui.IMPORTANCE_BUDGET:
            st.error(
                f"Too much work: {L * H} heads × {len(view.out.ids)} tokens = {work:,}; allowed: at "
                f"most {ui.IMPORTANCE_BUDGET:,} (heads × tokens). Shorten the text.",
                icon=":material/error:",
            )
        else:
            bar = st.progress(0.0, text="Waiting for a free slot (the server runs a few models at a time)…")
            results.clear()  # one table per session
            try:
                results[key] = ui.head_importance(
                    ckpt,
                    text,
                    framework,
                    mode,
                    lambda done, total: bar.progress(done / total, text=f"Ablated {done} of {total} heads"),
                )
            except ValueError as error:
                ui.show_error(error)
            bar.empty()
    if key not in results:
        return
    importance = results[key]
    metric = "1 − cosine" if encoder else "KL (nats)"
    st.plotly_chart(
        heatmaps.matrix(
            importance,
            [f"L{i}" for i in range(L)],
            [f"H{h}" for h in range(H)],
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
    st.dataframe(
        ui.importance_rows(importance, metric), hide_index=True, width="stretch", key="pre.importance_table"
    )
