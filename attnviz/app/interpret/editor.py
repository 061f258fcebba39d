"""The Interpretability page's attention editor (issue 30 §5): pick a layer, a head and a query
position, replace that attention row — all weight on one key, the first-token sink drained and the
rest renormalised, or one key zeroed — and watch the next-token distribution and the logit
difference change as the model runs on with the edited row (`Checkpoint.run(..., edit=…)`, through
the door's `forward` task; the rows are checked by `attnviz.pretrained.edits`).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import formats, pretrained
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.interpret import figures as plots
from attnviz.app.interpret import work
from attnviz.interp import patching
from attnviz.plots import interp as interp_plots
from attnviz.pretrained import edits

URL = "query-params"
KINDS = {
    "only": "all weight on one key",
    "sink": "drain the first-token sink",
    "zero": "zero a key",
}
TOP = 8  # next tokens listed: the most likely before, then those that rose into the top after


def edited_row(row: np.ndarray, kind: str, key: int) -> np.ndarray:
    """`row (T,)` edited as `kind` says (`KINDS`); a `SpecError` when the edit cannot be made (the
    only key with weight zeroed)."""
    if kind == "only":
        return edits.only_key(row.size, key)
    if kind == "sink":
        return edits.drain_sink(row)
    return edits.zero_key(row, key)


def keys_seen(ckpt, layer: int, query: int) -> range:
    """The keys query `query` of `layer` may weigh: itself and the ones before, within a local
    layer's window."""
    cfg = ckpt.config
    is_local = getattr(cfg, "is_local", None)
    first = max(0, query - cfg.sliding_window + 1) if is_local is not None and is_local(layer) else 0
    return range(first, query + 1)


def token_rows(ckpt, before, after, answer: int, wrong: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The tokens to compare (the `TOP` most likely before, those that rose into the top after, the
    answer and the wrong token) and their next-token probabilities before and after."""
    p0 = pretrained.next_token_probabilities(before.logits[-1, : ckpt.n_tokens])
    p1 = pretrained.next_token_probabilities(after.logits[-1, : ckpt.n_tokens])
    ids = list(np.argsort(-p0, kind="stable")[:TOP])
    ids += [i for i in np.argsort(-p1, kind="stable")[:TOP] if i not in ids][:4]
    ids += [i for i in (answer, wrong) if i not in ids]
    names = [repr(t) for t in ckpt.labels([int(i) for i in ids])]
    return names, p0[ids], p1[ids]


def editor_tab(ckpt, framework: str) -> None:
    """The editor's widgets (bound to the URL), the edited run, and what changed."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    st.markdown(
        "**Edit the attention, watch the answer change.** Pick a head and a query position and replace that "
        "row of its attention — the weights it gives the keys — before they multiply V; the model runs on "
        "from there. Only this one row of this one head changes: every other head and layer computes as usual."
    )
    c1, c2 = st.columns(2)
    text = work.prompt_box(c1, "interp.clean", "Prompt (the patching tab's clean prompt)")
    answer = work.prompt_box(c2, "interp.answer", "Answer token")
    wrong = work.prompt_box(c2, "interp.wrong", "Wrong token")
    ids = ckpt.encode(text)[0]
    a, w = patching.token_id(ckpt, answer, "answer"), patching.token_id(ckpt, wrong, "wrong")
    labels = ckpt.labels(ids)
    shown = interp_plots.position_labels(labels)
    c1, c2, c3 = st.columns(3)
    layer = c1.selectbox("Layer", range(L), key="interp.edit_layer", bind=URL)
    head = c2.selectbox("Head", range(H), key="interp.edit_head", bind=URL)
    query = c3.selectbox(
        "Query position", range(len(ids)), index=len(ids) - 1, format_func=shown.__getitem__,
        key="interp.edit_query", bind=URL,
    )  # fmt: skip
    c1, c2 = st.columns(2)
    kind = c1.radio("Set its row to", list(KINDS), format_func=KINDS.get, key="interp.edit_kind", bind=URL)
    seen = keys_seen(ckpt, layer, query)
    first = next((j for j in seen if ids[j] == a), seen.start)  # default: the answer's own token
    key = c2.selectbox(
        "Key", seen, index=first - seen.start, format_func=shown.__getitem__, key="interp.edit_key", bind=URL,
        disabled=kind == "sink",
        help="The key that gets all the weight, or loses its weight (the rest renormalised to sum to 1).",
    )  # fmt: skip
    before = work.forward(ckpt, text, framework)
    row = before.attentions[layer, head, query].astype(np.float64)
    new_row = edited_row(row, kind, key if key in seen else query)
    after = work.forward(ckpt, text, framework, edit=((layer, head, query, tuple(new_row)),))
    keys = [shown[j] for j in seen]
    st.plotly_chart(
        plots.edited_row(
            row[seen.start : seen.stop], new_row[seen.start : seen.stop], keys,
            f"{formats.head(layer, head)}, query {shown[query]}: its attention row",
        ),
        width="stretch", key="interp.edit_row",
    )  # fmt: skip
    diff0 = patching.logit_diff(before.logits, a, w)
    diff1 = patching.logit_diff(after.logits, a, w)
    c1, c2 = st.columns(2)
    c1.metric(
        f"logit({answer!r}) − logit({wrong!r}), after the edit", f"{diff1:.3f}", f"{diff1 - diff0:+.3f}",
        help=f"Before the edit: {diff0:.3f}. Last position, as the patching tab measures it.",
    )  # fmt: skip
    top0, top1 = (ckpt.labels([int(np.argmax(o.logits[-1, : ckpt.n_tokens]))])[0] for o in (before, after))
    c2.metric(
        "Most likely next token", repr(top1), f"was {top0!r}" if top0 != top1 else "unchanged",
        delta_color="off", delta_arrow="off",  # a change of token goes neither up nor down
    )  # fmt: skip
    names, p0, p1 = token_rows(ckpt, before, after, a, w)
    st.plotly_chart(
        plots.next_token_change(names, p0, p1, "Next token after the prompt, before and after the edit"),
        width="stretch", key="interp.edit_next",
    )  # fmt: skip
    st.caption(
        f"Logit difference before the edit **{diff0:.3f}**, after **{diff1:.3f}**. Most likely next token before: "
        f"{escape_markdown(repr(top0))}. The model is changed for this run only: "
        + escape_markdown("; ".join(after.changes))
        + "."
    )
