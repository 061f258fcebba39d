"""The Pretrained page's state and checks: what it may offer, asked of the checkpoint (its `kind`:
"encoder" reads the whole text at once; "decoder" is causal and predicts the next token), its
captions, tables and the notes on a link's values (the page itself only draws; its runs are in
`runs`, the drawn run in `view`).

Functions live here, not in the page: a function defined in a page keeps the page's
arrays alive for as long as a widget holds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import streamlit as st

from attnviz import formats, pretrained
from attnviz.app import controls
from attnviz.app.frame import door, links
from attnviz.app.pretrained import fields
from attnviz.app.pretrained.view import View
from attnviz.exec import TaskError
from attnviz.pretrained import chat, gguf
from attnviz.pretrained.families.lab import MODEL_TYPE

TABS = (
    "Heads of this layer",
    "Head view",
    "Model view",
    "Per-head summary",
    "Next token",
    "Ablation",
    "Rollout",
    "Neuron view",
)
MAX_HEAD_VIEW = 64  # tokens drawn in the head view
DIRECTIONS = {"out": "what it attends to", "in": "what attends to it"}  # plots.tokens.DIRECTIONS
ABLATION_MODES = {"zero": "zero (remove)", "mean": "mean over positions"}


# -- what the page shows ------------------------------------------------------------------------


PROMPTS = {  # model_type → the text input's label and default; others read a sentence
    MODEL_TYPE: ("Token ids (integers separated by spaces)", "1 2 3 4 5 6"),  # the Training lab's models
}
PAIRS = ("bert",)  # families that read a sentence pair: [CLS] a [SEP] b [SEP], token types
SENTENCE = ("Sentence", "The cat sat on the mat because it was tired.")


def origin(label: str, source: str) -> str:
    """Where the chosen checkpoint comes from, in a caption (never a server path)."""
    if source != label:
        return "Your own Training-lab run, saved in this session (only you see it)."
    return f"From: {pretrained.choices().get(label, 'the Hub')}."


def install_hint(missing: dict[str, str], any_listed: bool) -> str | None:
    """The sidebar's line for the packaged checkpoints not installed here (name → install command)."""
    if not missing and any_listed:
        return None
    hint = " ".join(f"{name}: `{command}`." for name, command in missing.items())
    if any_listed:
        return "Not installed here — " + hint
    return f"No checkpoint is available here. {hint} Or the operator sets `{pretrained.ENV_DIRS}` (see docs/checkpoints.md)."


def quantised(ckpt) -> str | None:
    """A caption for a checkpoint converted from a GGUF file: its numbers are the quantised model's."""
    manifest = ckpt.path / gguf.MANIFEST
    if not manifest.is_file():
        return None
    try:
        source = Path(str(json.loads(manifest.read_text()).get("source", ""))).name
    except (OSError, ValueError, AttributeError):  # unreadable: the caption still says it is quantised
        source = ""
    kind = re.search(r"\.((?:Q|IQ|F|BF)\w*)\.gguf$", source, re.IGNORECASE)
    weights = f"{kind.group(1)} → float32" if kind else "dequantised to float32"
    return (
        f"The numbers are the quantised ({weights}) model's: the GGUF file's weights, expanded to float32 "
        "and run by attnviz — close to, not the same as, the original model's."
    )


def base_model(ckpt) -> str | None:
    """A caption for a packaged decoder without a chat template (Gemma 3 270M): a base model."""
    if ckpt.kind != "decoder" or ckpt.name not in pretrained.PACKAGED or chat_template(ckpt):
        return None
    return (
        f"{ckpt.name} is a base model without a chat template: it continues the text as written "
        "(SmolLM2-135M-Instruct, an instruct model, offers one)."
    )


def layer_title(ckpt, layer: int) -> str:
    """The layer's name, with its kind where the family has local and global layers ("Layer 5 (global)")."""
    is_local = getattr(ckpt.config, "is_local", None)
    if is_local is None:
        return f"Layer {layer}"
    return f"Layer {layer} ({'local' if is_local(layer) else 'global'})"


def layer_kind(ckpt, layer: int, window: int | None = None) -> str | None:
    """What a local or global layer attends to (None for a family without local layers); `window`:
    the local layers' window where the page narrowed it (the one the page runs: one source)."""
    cfg = ckpt.config
    if getattr(cfg, "is_local", None) is None:
        return None
    if cfg.is_local(layer):
        seen = window or cfg.sliding_window
        return (
            f"{layer_title(ckpt, layer)} attends within a sliding window: each token sees itself and "
            f"the {seen - 1:,} tokens before it"
            + (f" (narrowed from {cfg.sliding_window:,})" if window else "")
            + f" (RoPE base {cfg.rope_local:,.0f})."
        )
    return (
        f"{layer_title(ckpt, layer)} attends to every earlier token (RoPE base {cfg.rope_global:,.0f}); "
        "global layers: "
        + ", ".join(str(i) for i in range(cfg.num_hidden_layers) if not cfg.is_local(i))
        + "."
    )


def chat_template(ckpt) -> bool:
    """Whether the checkpoint has a chat template (an instruct model): generation may use it."""
    try:
        return chat.template_of(ckpt) is not None
    except ValueError:  # a template attnviz cannot read: generation reads the plain text
        return False


def reads(ckpt, has_chat: bool, use_chat: bool) -> str:
    """Which text the predictions and the generation both read, in a caption."""
    if use_chat:
        return (
            "Both the predictions and the generation read the text as a chat: the model's chat template "
            "makes it the user's turn and opens the assistant's, so the model predicts its answer."
        )
    if has_chat:
        return (
            "Both the predictions and the generation read the sentence as written (as the heads above do); "
            f"{ckpt.name} is an instruct model: switch on the chat template to read it as a chat."
        )
    return "Both the predictions and the generation read the sentence as written: this model has no chat template."


def generation_prompt(ckpt, text: str, use_chat: bool) -> str:
    """What generation reads: `text`, or `text` as the user's turn of a chat (the chat template)."""
    return chat.prompt(ckpt, text) if use_chat else text


def prompt(ckpt) -> tuple[str, str]:
    """The text input's label and default for this checkpoint's family."""
    return PROMPTS.get(ckpt.config.model_type, SENTENCE)


def reads_pairs(ckpt) -> bool:
    """Whether the checkpoint reads a sentence pair, with [CLS] and [SEP] (the BERT family)."""
    return ckpt.config.model_type in PAIRS


def predicts(ckpt) -> bool:
    """Whether the checkpoint predicts the next token (a decoder): the Next-token tab."""
    return ckpt.kind == "decoder"


def tabs(ckpt) -> list[str]:
    """The page's tabs for this checkpoint: an encoder has no Next-token tab."""
    return [t for t in TABS if t != "Next token" or predicts(ckpt)]


def no_next_token(ckpt, offered=()) -> str | None:
    """The one line that says why the Next-token tab is missing (None when it is there), pointing at the
    packaged decoders among the checkpoints `offered` in the sidebar."""
    if predicts(ckpt):
        return None
    decoders = [name for name in offered if getattr(pretrained.PACKAGED.get(name), "kind", "") == "decoder"]
    where = (
        f"pick {' or '.join(decoders)} in the Checkpoint list"
        if decoders
        else "docs/checkpoints.md says which families are decoders"
    )
    return (
        f"No Next-token tab: {ckpt.name} is an encoder — it reads the whole text at once, so it predicts no "
        f"next token. A decoder has one: {where}."
    )


def head_name(pair) -> str:
    return formats.head(pair[0], pair[1])


def layer_head(pair) -> str:
    return f"layer {pair[0]}, head {pair[1]}"


def focus_text(tokens: list[str]) -> Callable:
    """The head view's token choice as the selectbox (and the URL) writes it."""
    return lambda o: "none: every line" if o is None else f"{tokens[o[0]]} ({o[0]}): {DIRECTIONS[o[1]]}"


def query_text(tokens: list[str]) -> Callable:
    return lambda i: f"{i}: {tokens[i].strip()}"


def show_error(error: Exception) -> None:
    """A refused input or a run that ended without a value, as the page's message (never a
    traceback); the page stops there."""
    if isinstance(error, TaskError):
        door.show_failure(error)
    else:
        st.error(controls.escape_markdown(str(error)), icon=":material/error:")
    st.stop()


def model_view_caption(click_ablates: bool, downsampled: bool) -> str:
    return (
        "Rows are layers, columns heads. "
        + (
            "Click a thumbnail to add it to (or remove it from) the ablated heads (crossed out)."
            if click_ablates
            else "Click a thumbnail to enlarge it below."
        )
        + (" Long input: each thumbnail cell is a block mean." if downsampled else "")
    )


def ablation_top(ckpt, before, after, k: int = 5) -> list[dict]:
    """The k most likely next tokens before the ablation, then after it, with both probabilities."""
    p0 = pretrained.next_token_probabilities(before.logits[-1, : ckpt.n_tokens])
    p1 = pretrained.next_token_probabilities(after.logits[-1, : ckpt.n_tokens])
    ids = list(np.argsort(-p0, kind="stable")[:k])
    ids += [i for i in np.argsort(-p1, kind="stable")[:k] if i not in ids]
    return [
        {
            "token": repr(ckpt.labels([int(i)])[0]),
            "before": f"{p0[i]:.2%}",
            "after": f"{p1[i]:.2%}",
            "change": f"{p1[i] - p0[i]:+.2%}",
        }
        for i in ids
    ]


def top_token_changes(before, after) -> int:
    """At how many positions the most likely next token changed."""
    return int((before.logits.argmax(-1) != after.logits.argmax(-1)).sum())


def importance_rows(importance: np.ndarray, metric: str, n: int = 10) -> list[dict]:
    order = np.argsort(-importance, axis=None, kind="stable")[:n]
    H = importance.shape[1]
    return [
        {"rank": r + 1, "head": head_name(divmod(int(i), H)), metric: f"{importance.flat[i]:.4g}"}
        for r, i in enumerate(order)
    ]


def link_notes(
    link: dict[str, list[str]], ckpt, v: View, *, names: list[str] | None, frameworks: list[str]
) -> list[str]:
    """What the link carried that this page's widgets do not offer, one note per value."""
    L, H = v.attn.shape[:2]
    pairs = [(i, h) for i in range(L) for h in range(H)]
    shown = min(len(v.tokens), MAX_HEAD_VIEW)
    focus = [focus_text(v.tokens)(o) for o in [None, *((i, d) for i in range(shown) for d in DIRECTIONS)]]
    flags = ["pre.click_ablates", *(["pre.with_pair", "pre.hide"] if ckpt.kind == "encoder" else [])]
    if getattr(ckpt.config, "is_local", None) is not None:
        flags.append("pre.narrow")
    notes = [
        *(links.choices(link, "pre.checkpoint", names) if names is not None else []),  # None: any Hub id
        *links.choices(link, "pre.framework", frameworks),
        *links.choices(link, "pre.layer", map(str, range(L))),
        *links.choices(link, "pre.tab", tabs(ckpt)),
        *links.choices(link, "pre.view_heads", map(str, range(H))),
        *links.choices(link, "pre.focus", focus, f"a token of the first {shown}, e.g. {focus[1]!r}"),
        *links.choices(link, "pre.enlarged", map(layer_head, pairs)),
        *links.choices(link, "pre.ablate", map(head_name, pairs)),
        *links.choices(link, "pre.ablate_mode", ABLATION_MODES.values()),
        *links.choices(link, "pre.neuron_head", map(str, range(H))),
        *links.choices(link, "pre.neuron_query", map(query_text(v.labels), range(len(v.labels)))),
        *(n for key in flags for n in links.choices(link, key, ["true", "false"])),
    ]
    if getattr(ckpt.config, "is_local", None) is not None:
        notes += fields.WINDOW.notes(link, high=ckpt.config.sliding_window)
    if predicts(ckpt):
        room = max(1, min(fields.NEW_TOKENS.high, ckpt.config.max_position_embeddings - len(v.out.ids)))
        notes += [
            *fields.K.notes(link),
            *fields.TEMPERATURE_FIELD.notes(link),  # the library checks it
            *fields.NEW_TOKENS.notes(link, high=room),
            *fields.SEED.notes(link),
            *links.choices(link, "pre.generate", ["true", "false"]),
            *links.choices(link, "pre.chat", ["true", "false"]),
        ]
    return notes


def neuron_caption(layer: int, head: int, query: int, labels: list[str], causal: bool) -> str:
    return (
        f"Layer {layer}, head {head}: how the query token {query}, “{controls.escape_markdown(labels[query])}”, "
        "gets its attention. Each key's score is the sum of q ⊙ k across the head's dimensions; scaled by "
        "1/√d, masked" + (" (later tokens: a decoder cannot see them)" if causal else "") + ", then softmax."
    )


def neuron_rows(view, labels: list[str]) -> list[dict]:
    """The neuron view's numbers per key: q·k, scaled, masked (✕) and the weight."""
    return [
        {
            "key": t,
            "q·k": round(float(s), 4),
            "scaled": round(float(c), 4),
            "masked": "✕" if view.masked is not None and not np.isfinite(view.masked[j]) else "",
            "weight": round(float(w), 4),
        }
        for j, (t, s, c, w) in enumerate(zip(labels, view.scores, view.scaled, view.weights, strict=True))
    ]
