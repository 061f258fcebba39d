"""The Decoding page's streaming section: a long text read through a cache that must evict, under
the full cache, a sliding window and the window with 1, 2 and 4 attention sinks (StreamingLLM), two
models side by side, and where each layer's weight goes to the first token.

The runs go through `attnviz.app.frame.door` as `sinks_task.policy_curves` (a worker, progress, a
Stop button; the server's result cache keeps each model's run). Settings are bound to the URL.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.app.decoding import fields, figures, sinks_task
from attnviz.app.frame import door, session
from attnviz.app.frame.checkpoints import task_source
from attnviz.app.frame.literal import escape_markdown
from attnviz.exec import TaskError

URL, P, CACHE = "query-params", "decoding.sinks.", "streaming curves"
PREFERRED = ("SmolLM2-135M-Instruct", "gemma-3-270m")


def request() -> None:
    st.session_state[P + "running"] = True


def stop() -> None:
    """The Stop button's callback: the rerun it starts ends the worker's task (`door.follow`) and
    does not submit it again."""
    st.session_state[P + "running"] = False


def section(allowed: dict[str, str], framework: str) -> None:
    st.subheader("Reading past the cache: attention sinks")
    st.markdown(
        "A text longer than the cache forces evictions. A **sliding window** keeps the last W tokens; "
        "most heads of a trained model put much of their weight on the **first token**, whatever it is, and "
        "once the window drops it perplexity blows up. StreamingLLM (Xiao et al., 2023) keeps a few **sink** "
        "tokens — the first ones — beside the window, renumbering positions inside the cache; with them the "
        "model reads on almost as well as with the full cache. Here the bundled text (the Python reference's "
        "“Execution model” and “Exceptions”, shipped with attnviz) is read one token at a time."
    )
    defaults = [n for n in PREFERRED if n in allowed] or list(allowed)[:2]
    c1, c2, c3 = st.columns(3)
    models = c1.multiselect("Models side by side", list(allowed), default=defaults, max_selections=2,
                            key=P + "models", bind=URL)  # fmt: skip
    tokens = int(fields.SINK_TOKENS.number_input(c2))
    window = int(fields.SINK_WINDOW.number_input(c3))
    if not models:
        st.info("Pick a model to read the text with.", icon=":material/info:")
        return
    if window + max(sinks_task.SINKS) >= tokens:
        st.warning(f"Read more tokens than the window and its sinks ({window} + {max(sinks_task.SINKS)}) "
                   "hold: nothing is evicted otherwise.", icon=":material/warning:")  # fmt: skip
        return
    args = {name: (task_source(name, allowed[name]), framework, tokens, window) for name in models}
    found = {name: door.cached(CACHE, *a) for name, a in args.items()}
    if not all(hit for hit, _ in found.values()):
        if not st.session_state.get(P + "running"):
            session.button(
                "Read the text under each policy",
                on_click=request,
                key=P + "run",
                icon=":material/play_arrow:",
            )
            st.caption(
                f"Five passes over {tokens} tokens per model, one token per step: a minute or more per model."
            )
            return
        session.button("Stop", on_click=stop, key=P + "stop", icon=":material/stop:")
        for name, a in args.items():
            try:
                found[name] = (
                    True,
                    door.run(sinks_task.policy_curves, *a, spinner=f"Reading with {name}", cache=CACHE),
                )
            except (TaskError, ValueError) as error:
                door.show_failure(error, key=P + "again")
                return
        st.session_state[P + "running"] = False
    columns = st.columns(len(models))
    for column, name in zip(columns, models, strict=True):
        with column:
            draw(name, found[name][1])


def draw(name: str, curves: sinks_task.Curves) -> None:
    edge = curves.window + 1
    st.plotly_chart(figures.perplexity_along(curves.nll, edge, escape_markdown(name), curves.local_window),
                    width="stretch", key=P + "ppl." + name)  # fmt: skip
    after = {
        label: float(np.exp(v[curves.window + max(sinks_task.SINKS) :].mean()))
        for label, v in curves.nll.items()
    }
    st.caption(
        f"{curves.tokens} tokens. Perplexity after the window filled: "
        + "; ".join(f"{escape_markdown(label)} **{value:.1f}**" for label, value in after.items())
        + ". The full cache reads everything; the window alone loses the first token once it is full."
        + (
            f" Its local layers keep their own {curves.local_window}-token window throughout."
            if curves.local_window
            else ""
        )
    )
    if curves.first is not None:
        st.plotly_chart(figures.first_token_share(curves.first, "Weight on the first token, per layer"),
                        width="stretch", key=P + "first." + name)  # fmt: skip
        st.plotly_chart(figures.first_token_heads(curves.first, "…per layer and head, over the text"),
                        width="stretch", key=P + "heads." + name)  # fmt: skip
        share = float(curves.first[curves.window :].mean())
        st.caption(f"With the full cache, the heads put **{share:.0%}** of their weight on the first token on "
                   f"average past position {curves.window}: the weight the window takes away.")  # fmt: skip
