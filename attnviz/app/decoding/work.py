"""The Decoding page's choices, checks and sentences (the page itself only draws).

The heavy work — the traced generation and the time per token — runs in a worker through
`attnviz.app.frame.door` (`attnviz.app.decoding.tasks`: `decoding_trace`, `time_per_token`); what is here
reads configurations and a finished trace, and refuses a run over the per-run budget before it is
submitted (`attnviz.pretrained.budget`).
"""

from __future__ import annotations

import functools

import numpy as np

from attnviz import pretrained
from attnviz.app.frame import checkpoints, results
from attnviz.app.frame.checkpoints import open_checkpoint
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.literal import count, escape_markdown
from attnviz.formats import size
from attnviz.kernels import decoding
from attnviz.kernels.kv_cache import LENGTHS, kv_bytes, kv_cache_size
from attnviz.pretrained import budget
from attnviz.settings import APP_MEMORY_BUDGET

DECODER = "SmolLM2-135M-Instruct"  # the packaged Llama-family decoder, first when installed
DEFAULT_TEXT = "The cat sat on the mat because"
DEFAULT_NEW_TOKENS = 8
TIMED_TOKENS, TIMED_REPEATS = 16, 3  # time_per_token: positions measured, medians of
MAX_PROMPT_CHARS = TEXT_LIMITS["decoding.text"]


def decoder_choices() -> dict[str, str]:
    """The decoders this visitor may open, SmolLM2 first when it is installed."""
    return checkpoints.decoder_choices(DECODER)


def install_note(chosen: dict[str, str]) -> str | None:
    """The packaged decoders not installed here and the command for each (None when all are)."""
    missing = {name: cmd for name, cmd in pretrained.not_installed().items() if name not in chosen}
    missing = {name: cmd for name, cmd in missing.items() if name != "all-MiniLM-L6-v2"}  # an encoder
    if not missing:
        return None
    return "Not installed here — " + " ".join(f"{name}: `{cmd}`." for name, cmd in missing.items())


# -- budgets: refused before anything is submitted ----------------------------------------------


def check_trace(ckpt, text: str, new_tokens: int) -> int:
    """Refuse a traced generation over the per-run budget: the trace's own rows stay small (the
    library bounds them, `decoding.MAX_TRACE_BYTES`); the generation beside it holds two forward
    passes over the final text (`budget.generation_bytes`)."""
    need = functools.partial(budget.generation_bytes, ckpt.config, new_tokens=int(new_tokens))
    return budget.check(
        f"Tracing {new_tokens} new tokens",
        need,
        prompt_tokens(ckpt, text),
        APP_MEMORY_BUDGET,
        "prompt tokens",
    )


def check_timing(ckpt, text: str) -> int:
    """Refuse the time-per-token measurement over the per-run budget: its full passes run over the
    prompt and up to `TIMED_TOKENS` new tokens."""
    need = functools.partial(budget.generation_bytes, ckpt.config, new_tokens=TIMED_TOKENS)
    return budget.check(
        "Measuring the time per token", need, prompt_tokens(ckpt, text), APP_MEMORY_BUDGET, "prompt tokens"
    )


def prompt_tokens(ckpt, text: str) -> int:
    return len(ckpt.encode(text)[0])


def room(ckpt, text: str, limit: int) -> int:
    """New tokens the page may ask for: at most `limit`, and what the model's positions leave."""
    return max(1, min(limit, ckpt.config.max_position_embeddings - prompt_tokens(ckpt, text)))


# -- what a step shows ---------------------------------------------------------------------


def uses_rope(config) -> bool:
    """Whether the model turns q and k by position (RoPE: Llama, Gemma 3) rather than adding learned
    position vectors (GPT-2)."""
    return hasattr(config, "rope_theta") or hasattr(config, "rope_local")


def group_size(config) -> int:
    """Query heads per K/V head (1: MHA; all of them: MQA)."""
    heads = config.num_attention_heads
    return heads // getattr(config, "num_key_value_heads", heads)


def kv_head(config, head: int) -> int:
    """The K/V head query head `head` reads."""
    return head // group_size(config)


def readers(config, group: int) -> list[int]:
    """The query heads that read K/V head `group`."""
    per = group_size(config)
    return list(range(group * per, (group + 1) * per))


def cache_rows(d: decoding.Decoding, step: int, layer: int, group: int) -> tuple[np.ndarray, np.ndarray]:
    """`(Lk, Dk)`, `(Lk, Dv)`: the keys and values of K/V head `group` that `layer`'s cache holds
    after `step` (positions `d.cache_rows(step, layer)`)."""
    i = d.kv_heads.index(group)
    return d.cached_keys(step, layer)[i], d.cached_values(step, layer)[i]


def row(d: decoding.Decoding, step: int, layer: int, head: int) -> np.ndarray:
    """`(Lk,)` the new token's attention at `step` over the keys the cache holds (head `head`)."""
    return d.steps[step].attention[layer][d.heads.index(head)]


def rows_so_far(d: decoding.Decoding, step: int, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """`(step + 1, p + 1)` every new token's query row up to `step` over positions 0 … p (p the
    position of `step`'s token), and where a key was not in the cache for that row (bool, True:
    not yet written, or dropped from a window)."""
    p = d.steps[step].position
    values, missing = np.zeros((step + 1, p + 1)), np.ones((step + 1, p + 1), bool)
    for r in range(step + 1):
        first, last = d.steps[r].first_key[layer], d.steps[r].position
        values[r, first : last + 1] = row(d, r, layer, head)
        missing[r, first : last + 1] = False
    return values, missing


def top_keys(weights: np.ndarray, tokens: list[str], first: int, k: int = 3) -> str:
    """The `k` keys with the most weight, with their positions: '“the” (position 4) 41 %, …'."""
    order = np.argsort(-weights, kind="stable")[:k]
    return ", ".join(
        f"“{escape_markdown(tokens[first + j].strip() or tokens[first + j])}” (position {first + j}) "
        f"{weights[j]:.0%}"
        for j in order
    )


def work_sentence(d: decoding.Decoding, step: int) -> str:
    """What the step computes with and without the cache, in words, from the library's counts."""
    s = d.steps[step]
    t, L, H = s.position + 1, len(d.windows), d.n_heads
    with_, without = d.total(step, cached=True), d.total(step, cached=False)
    windowed = [w for w in d.windows if w is not None and w < t]
    window_note = (
        f" {count(len(windowed), 'layer')} hold only their last {windowed[0]:,} keys (a sliding window)."
        if windowed
        else ""
    )
    return (
        f"The sequence has **{t} tokens** after this step. **With the cache**, the step runs the one new "
        f"position through each of the {L} layers, and each of the {H} query heads scores it against the "
        f"keys the layer holds: {with_.scores:,} scores in all. **Without it**, all {t} positions run "
        f"again, and each head scores every query i against keys 0 … i — t(t + 1)/2 = {t * (t + 1) // 2:,} "
        f"per head and layer: {without.scores:,} scores, {without.scores / with_.scores:.1f}× as many, "
        f"to draw the same token.{window_note}"
    )


# -- the KV cache's size -------------------------------------------------------------------


@results.bounded("decoding kv table", ttl=600)
def kv_rows(sources: tuple[tuple[str, str], ...]) -> list[dict]:
    """Each decoder on offer `(label, source)`: its K/V layout and KV-cache bytes (float32, as
    attnviz runs it) for one token and at each of `LENGTHS`: "180 MiB · MHA 540 MiB", its real
    layout's, then plain multi-head attention's; and the layers that keep only a window."""
    rows = []
    for label, source in sources:
        config = open_checkpoint(source).config
        kv = kv_cache_size(config)
        row = {
            "model": label,
            "K/V layout": f"{kv.layout}: {kv.query_heads} query heads on {count(kv.kv_heads, 'K/V head')}",
            "layers × head width": f"{kv.layers} × {kv.head_dim}",
        }
        for n, name in ((1, "per token"), *((n, f"at {n // 1024}k tokens") for n in LENGTHS)):
            row[name] = f"{size(kv_bytes(config, n))} · MHA {size(kv_bytes(config, n, mha=True))}"
        local = [w for w in kv.windows if w is not None]
        row["windows"] = (
            f"{len(local)} of {kv.layers} layers keep only {local[0]:,} tokens" if local else "none"
        )
        rows.append(row)
    return rows


def cache_check(config, cache_bytes: int, positions: int) -> tuple[bool, str]:
    """Whether this generation's `KVCache` held what `kv_bytes` says for its positions, in words."""
    expected = kv_bytes(config, positions)
    same = expected == cache_bytes
    return same, (
        f"Checked on this generation: its KV cache object held **{cache_bytes:,} bytes** ({size(cache_bytes)}) "
        f"after {positions} positions; `kv_bytes(config, {positions})` says {expected:,}"
        + (" — the same." if same else f" — {cache_bytes - expected:+,} bytes apart.")
    )
