"""The Pretrained page's two interactive tabs, Next token and Ablation: their widgets, one
call into the library each, and their figures (`attnviz.app.pretrained.figures`)."""

from __future__ import annotations

import functools

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from attnviz import masks, pretrained
from attnviz.app.frame import session
from attnviz.app.frame.literal import one_line
from attnviz.app.pretrained import fields, runs, selections
from attnviz.app.pretrained import figures as plots
from attnviz.app.pretrained import view as views
from attnviz.app.pretrained import work as ui
from attnviz.exec import TaskError
from attnviz.plots import heatmaps

URL = "query-params"


def next_token_tab(
    ckpt, text: str, framework: str, view: views.View, layer: int, open_: bool, *, device: str = "cpu"
) -> None:
    """The next-token predictions after the text, and generation token by token (decoders): both
    read the same text — the sentence as written, or (an instruct model) as a chat's user turn.
    Every widget is drawn (so each keeps its state and its link); the runs wait for the open tab."""
    has_chat = ui.chat_template(ckpt)
    use_chat = has_chat and st.toggle(
        "Read the text as a chat (the chat template)",
        key="pre.chat",
        bind=URL,
        help="An instruct model was trained on chats: the text becomes the user's turn, the model answers.",
    )
    try:
        prompt = ui.generation_prompt(ckpt, text, use_chat)
        n_ids = len(ckpt.encode(prompt)[0])
    except ValueError as error:
        ui.show_error(error)
    st.caption(ui.reads(ckpt, has_chat, use_chat))
    c1, c2 = st.columns(2)
    k = fields.K.slider(c1)
    temperature = fields.TEMPERATURE_FIELD.slider(c2)
    predictions = st.container()
    st.subheader("Generate, token by token")
    st.page_link("pages/decoding.py", label="Decoding: the KV cache, step by step →")
    positions = ckpt.config.max_position_embeddings
    room = max(1, min(fields.NEW_TOKENS.high, positions - n_ids))
    c1, c2, c3 = st.columns(3)
    n_new = int(fields.NEW_TOKENS.number_input(c1, high=room))
    seed = int(fields.SEED.number_input(c2))
    go_on = session.value(
        c3.toggle, "Generate", key="pre.generate", bind=URL, on_change=runs.forget_generation
    )
    if not open_:
        return
    with predictions:
        _predictions(ckpt, prompt, use_chat, framework, view, k, temperature, device)
    if n_ids >= positions:
        st.warning(f"The {'chat ' if use_chat else ''}text already fills the model's {positions} positions.")
        return
    if go_on:
        gen = _generation(ckpt, prompt, framework, n_new, float(temperature), seed, device)
        _generated(ckpt, gen, n_new, layer)
        st.caption(
            f"Drawn at temperature {temperature:g} with seed {seed}: the same seed gives the same tokens."
        )


def _predictions(
    ckpt,
    prompt: str,
    use_chat: bool,
    framework: str,
    view: views.View,
    k: int,
    temperature: float,
    device: str,
):
    """The `k` most likely next tokens after `prompt`: a table and bars."""
    try:
        out = (
            runs.encode(ckpt, prompt, None, framework, view.out.window, device=device)
            if use_chat
            else view.out
        )
        top = ckpt.next_tokens(out.logits[-1], k=k, temperature=temperature)  # a link's bad value: named
    except (ValueError, TaskError) as error:
        ui.show_error(error)
    written = one_line(prompt)
    st.markdown(f"After **{written}** the model predicts:")
    c1, c2 = st.columns([2, 3])
    table = [{"token": repr(t), "probability": f"{p:.2%}"} for t, p in top]
    c1.dataframe(table, hide_index=True, width="stretch", key="pre.top_table")
    c2.plotly_chart(
        plots.next_token_bars(top, f"Next token (temperature {temperature:g})"),
        width="stretch",
        key="pre.top",
    )


def _generated(ckpt, gen, n_new: int, layer: int) -> None:
    """The generated text (new tokens highlighted), where and why it stopped, the new tokens'
    table and what each attended to in `layer`."""
    raw, tokens, table = runs.generated_rows(ckpt, gen)
    written = lambda parts: one_line("".join(parts))  # noqa: E731
    st.markdown(
        f"{written(raw[: gen.prompt_length])} :orange-background[{written(raw[gen.prompt_length :])}]"
    )
    st.markdown(runs.ending(ckpt, gen, n_new))
    st.dataframe(table, hide_index=True, width="stretch", key="pre.generated_table")
    new = tokens[gen.prompt_length :]
    st.plotly_chart(
        heatmaps.weights(
            gen.output.attentions[layer].mean(0)[gen.prompt_length :],  # (new, T + new)
            [f"{i + 1}: {t}" for i, t in enumerate(new)],
            tokens,
            blocked=~masks.causal(len(tokens))[gen.prompt_length :],
            title=f"Layer {layer}, mean of the heads: what each new token attended to",
            y_title="new token",
            x_title="earlier token",
        ),
        width="stretch",
        key="pre.generated",
    )


def _generation(
    ckpt, prompt: str, framework: str, n: int, temperature: float, seed: int, device: str = "cpu"
):
    """The generation of these settings: ended already (cached, or stopped here), or streamed now
    token by token from the worker, with a Stop; the page stops on a refused input or a failure."""
    try:
        runs.check_generation(ckpt, prompt, n)
        args = runs.generation_args(ckpt, prompt, framework, n, temperature, seed, device)
        if (gen := runs.finished_generation(args)) is not None:
            return gen
        handle = runs.generation_handle(args)
        if not handle.done():
            live = st.empty()  # the Stop and the streamed text, cleared when the generation ends
            with live.container():
                session.button(
                    "Stop", key="pre.stop", icon=":material/stop_circle:", on_click=runs.stop_generation
                )
                st.caption("Generating — each token appears as the model draws it:")
                with st.container(border=True, key="pre_stream"):
                    try:
                        st.write_stream(runs.streamed(handle, ckpt))
                    except StopException:  # Streamlit's own Stop, or the tab closed: the worker stops too
                        handle.stop()  # (a rerun — another widget changed — lets it run on)
                        raise
            live.empty()  # (else a Stop for a generation that has ended stays until the next rerun)
        return runs.ended_generation(args, handle)
    except (ValueError, TaskError) as error:
        ui.show_error(error)


def ablation_tab(
    ckpt, text: str, pair: str | None, framework: str, view: views.View, open_: bool, *, device: str = "cpu"
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
            heads = tuple(map(tuple, chosen))
            after = runs.ablated_run(
                ckpt, text, pair or None, framework, heads, mode, view.out.window, device=device
            )
        except (ValueError, TaskError) as error:
            ui.show_error(error)
        _effect(ckpt, view, after, ", ".join(map(ui.head_name, chosen)))
    if open_:
        _importance(ckpt, text, pair, framework, mode, view, device)


def _effect(ckpt, view: views.View, after, names: str) -> None:
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
    ckpt, text: str, pair: str | None, framework: str, mode: str, view: views.View, device: str
) -> None:
    """ "Most important heads": ablate each head in turn, in a worker (the answer kept in the
    server's cache: a second visitor asking the same gets it at once)."""
    st.subheader("Most important heads")
    L, H = view.out.attentions.shape[:2]
    encoder = ckpt.kind == "encoder"
    work = L * H * len(view.out.ids)
    st.caption(
        "Ablates each head in turn (zero or mean, as above) and measures the change: "
        + ("1 − sentence cosine." if encoder else "KL divergence of the next token.")
        + (" It runs the model without the narrowed window." if view.out.window else "")
    )
    session.button(
        "Most important heads",
        key="pre.importance_button",
        on_click=functools.partial(selections.set_flag, "pre.importance_wanted"),
    )
    wanted = st.session_state.pop("pre.importance_wanted", False)  # set by the click, kept over a rerun
    if wanted and pair:
        st.warning("The importance table reads the first sentence only; switch the sentence pair off.")
        wanted = False
    if wanted and work > runs.IMPORTANCE_BUDGET:
        st.error(
            f"Too much work: {L * H} heads × {len(view.out.ids)} tokens = {work:,}; allowed: at "
            f"most {runs.IMPORTANCE_BUDGET:,} (heads × tokens). Shorten the text.",
            icon=":material/error:",
        )
        wanted = False
    try:
        importance = runs.head_importance(ckpt, text, framework, mode, run=wanted, device=device)
    except (ValueError, TaskError) as error:
        ui.show_error(error)
    if importance is None:
        return
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
