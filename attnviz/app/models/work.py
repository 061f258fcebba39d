"""The Compare-models page's choices, checks and sentences (the page itself only draws).

The comparison — each model on the prompt and on the head-role scan — runs in a worker through
`attnviz.app.frame.door` (`attnviz.app.models.tasks.compare_models`); what is here picks the defaults,
refuses a run over the per-run budget before it is submitted (`attnviz.pretrained.budget`) and
writes what the results say.
"""

from __future__ import annotations

import functools

import numpy as np

from attnviz import pretrained
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.literal import escape_markdown
from attnviz.formats import size
from attnviz.interp.roles import ROLES as ROLE_DESCRIPTIONS  # noqa: F401 — the page's captions
from attnviz.interp.side_by_side import ModelSummary
from attnviz.pretrained import budget
from attnviz.settings import APP_MEMORY_BUDGET

FIRST, SECOND = "SmolLM2-135M-Instruct", "gemma-3-270m"  # the pair the page opens on when installed
DEFAULT_TEXT = (
    "When Mary and John went to the store, John gave a drink to Mary. The store was closed, so they "
    "walked home along the river."
)
MAX_PROMPT_CHARS = TEXT_LIMITS["models.text"]
ROLE_NAMES = {  # the role scan's roles (attnviz.interp.roles.ROLES), as the page names them
    "previous_token": "previous token",
    "induction": "induction",
    "duplicate_token": "duplicate token",
    "first_token": "first token (sink)",
}


def defaults(allowed: dict[str, str]) -> tuple[int, int]:
    """Indices of the two decoders the page opens on: SmolLM2 and Gemma 3 270M where installed, else
    the first two on offer (the same one twice when only one is)."""
    names = list(allowed)
    first = names.index(FIRST) if FIRST in names else 0
    others = [i for i in range(len(names)) if i != first]
    second = (
        names.index(SECOND)
        if SECOND in names and names.index(SECOND) != first
        else others[0]
        if others
        else first
    )
    return first, second


def missing() -> dict[str, str]:
    """The default pair's packaged models not installed here: name → the command that installs it."""
    absent = pretrained.not_installed()
    return {name: absent[name] for name in (FIRST, SECOND) if name in absent}


def check(ckpt, text: str, half: int) -> None:
    """Refuse the comparison over the per-run budget, per model (the worker runs them one after the
    other): one forward pass over the prompt, and the role scan over `2·half` random tokens."""
    name = ckpt.name
    T = len(ckpt.encode(text)[0])
    budget.check(
        f"{name} on the prompt", functools.partial(budget.forward_bytes, ckpt.config), T, APP_MEMORY_BUDGET
    )
    budget.check(f"{name}'s role scan", functools.partial(budget.scan_bytes, ckpt.config), half,
                 APP_MEMORY_BUDGET, "random tokens per half")  # fmt: skip


def layer_kinds(s: ModelSummary) -> list[str]:
    """Each layer's kind as the figures name it: "local" / "global", or "global" for every layer of a
    family without a window (each layer reads every earlier token)."""
    return list(s.layer_types) if s.layer_types is not None else ["global"] * len(s.depth)


def parameter_rows(summaries: tuple[ModelSummary, ...]) -> list[dict]:
    """One row per model: layers, its K/V cache per token (real layout and plain MHA), parameters in
    all and in the embedding (the figure has every part)."""
    rows = []
    for s in summaries:
        kv = s.kv
        embedding = s.parameters.get("embedding", 0)
        rows.append({
            "model": s.name,
            "layers": f"{kv.layers} ({_kinds(s)})",
            "K/V layout": f"{kv.layout}: {kv.query_heads} query heads on {kv.kv_heads} K/V",
            "KV cache per token": f"{size(kv.per_token)} · MHA {size(kv.per_token_mha)}",
            "parameters": f"{s.total / 1e6:.1f} M",
            "in the embedding": f"{embedding / 1e6:.1f} M ({embedding / s.total:.0%})",
        })  # fmt: skip
    return rows


def _kinds(s: ModelSummary) -> str:
    kinds = layer_kinds(s)
    if s.layer_types is None:
        return "all global"
    return f"{kinds.count('local')} local, {kinds.count('global')} global"


def sink_sentence(s: ModelSummary) -> str:
    """Where the model's first-token weight sits (by layer kind where it has both): 'gemma-3-270m puts
    0.48 of the weight on its first token “<bos>” in local layers, 0.70 in global ones, …'."""
    kinds = np.array(layer_kinds(s))
    first = escape_markdown(s.tokens[0].strip() or s.tokens[0])
    if s.layer_types is None:
        where = f"{s.sink.mean():.2f} on average"
    else:
        where = " and ".join(
            f"{s.sink[kinds == k].mean():.2f} in its {k} layers" for k in ("local", "global")
        )
    low, high = int(s.sink.argmin()), int(s.sink.argmax())
    return (
        f"**{escape_markdown(s.name)}** puts {where} on its first token “{first}”, from {s.sink[low]:.2f} "
        f"in layer {low} to {s.sink[high]:.2f} in layer {high}."
    )


def bos_note(s: ModelSummary, adds_bos: bool) -> str | None:
    """For a model whose tokenizer starts a text with a special token (Gemma's `<bos>`): the role
    scan's random sequences start without it, so the scan's first-token role misses the sink the
    prompt shows. Both numbers from the results."""
    if not adds_bos:
        return None
    scan = float(s.role_peak("first_token").max())
    return (
        f"{escape_markdown(s.name)} starts every text with “{escape_markdown(s.tokens[0])}”, and its sink is that "
        f"token: on the prompt its layers put {s.sink.min():.2f}–{s.sink.max():.2f} of their weight on it. The "
        f"role scan's random sequences start without it, so the scan's first-token role reads at most "
        f"{scan:.2f} for any of its heads — a sink on a special token, not on position 0."
    )


def adds_special_first(ckpt, text: str) -> bool:
    """Whether the tokenizer puts a special token first (`<bos>`), as Gemma's does."""
    added = getattr(ckpt.tokenizer, "get_added_tokens_decoder", dict)()  # a Training-lab model has none
    return int(ckpt.encode(text)[0][0]) in added
