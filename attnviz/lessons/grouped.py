"""Modern attention, the K/V heads: which query heads share one (GQA), and what the KV cache costs.

Grouped-query attention (Ainslie et al., 2023) lets r = H / Hkv query heads read one K/V head;
attnviz repeats each K/V head r times side by side, as Llama's `repeat_kv` does, so query head h
reads K/V head ⌊h / r⌋. The answer of `kv_groups` is read off the model's own run (which query
heads' keys are the K/V head's keys); the cache sizes come from `attnviz.kernels.kv_cache`, the
numbers the FlashAttention page's table shows. `gemma_cache` runs only where Gemma 3 270M is
installed (multi-query attention, and 15 of its 18 layers keep a window of 512 tokens).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attnviz.kernels import kv_cache_size
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CELLS, NUMBERS, Exercise, Link, Part, rng

LESSON = "modern"
LENGTH = 4096  # the context length the cache exercises ask about
KIB, MIB = 2**10, 2**20
REL = 0.01  # a size is right within 1 % (or the last decimal shown)
ITEMSIZES = {
    4: "float32 (4 bytes per number, as attnviz runs)",
    2: "bfloat16 (2 bytes, as models are served)",
}


def _model_link(ckpt, text: str, layer: int) -> Link:
    return Link(
        "pretrained",
        "Open this on the Pretrained model page",
        {},
        {"pre.checkpoint": ckpt.name, "pre.text": text, "pre.layer": str(layer)},
    )


def _heads_text(heads) -> str:
    return ", ".join(f"head {h}" for h in heads) if len(heads) else "no head"


def kv_groups(seed: int, step: int = 0, *, ckpt=None) -> Exercise:
    """Which query heads read K/V head g? Read off the run: their keys are that K/V head's keys."""
    ckpt = ckpt or checkpoints.load()
    g = rng(seed, step, LESSON)
    text, layer, cap = checkpoints.pooled(ckpt, int(g.integers(checkpoints.POOL)))
    H, Hkv, T = cap.k_repeated.shape[0], cap.k_rope.shape[0], len(cap.tokens)
    group, r = int(g.integers(Hkv)), H // Hkv
    reads = np.array([np.array_equal(cap.k_repeated[h], cap.k_rope[group]) for h in range(H)])  # (H,)
    heads = tuple(int(h) for h in np.flatnonzero(reads))
    options = tuple(f"head {h}" for h in range(H))
    arithmetic = f"{H} query heads share {Hkv} K/V heads, so each K/V head serves {H} / {Hkv} = {r}"

    def check(picked) -> tuple[bool, str]:
        chosen = np.flatnonzero(np.asarray(picked, bool).reshape(-1))
        if np.array_equal(chosen, heads):
            return True, (
                f"Right: {arithmetic}, side by side: query head h reads K/V head ⌊h / {r}⌋. In layer "
                f"{layer} their keys are the very same numbers; only their queries differ, so each still "
                "looks for something else."
            )
        if len(chosen) != r:
            return False, f"You picked {len(chosen)}. {arithmetic}."
        if all(h % Hkv == group for h in chosen):
            return False, (
                f"Those are one head in every {Hkv}. The K/V heads are repeated, not interleaved: neighbouring "
                "query heads share one."
            )
        if len({int(h) // r for h in chosen}) == 1:
            return False, (
                f"Those {r} heads do share a K/V head, but another one: count the blocks of {r} from head 0."
            )
        return False, f"Query heads that share a K/V head are neighbours: {arithmetic}, in a row."

    return Exercise(
        step=step,
        key="kv_groups",
        title="Shared K/V heads",
        seed=seed,
        intro=(
            "A decoder caches every layer's keys and values for every token it has seen. **Grouped-query "
            "attention** (GQA) shrinks that cache: several query heads read the same **K/V head**, so fewer keys "
            "and values are computed and kept. Each query head still has its own W_Q."
        ),
        given=(
            f"**{ckpt.name}**: {ckpt.config.num_hidden_layers} layers, each with **{H} query heads** and "
            f"**{Hkv} K/V heads** (head width {cap.q.shape[-1]}). Layer **{layer}** reads the {T} tokens of "
            f"*{text}*"
        ),
        parts=(
            Part(
                f"Which query heads read **K/V head {group}**? Pick every one (heads count from 0).",
                CELLS,
                reads[None],
                check,
                _heads_text(heads),
                options=options,
                rows=(f"K/V head {group}",),
                row_label="{row} is read by",
            ),
        ),
        hint="Divide the query heads among the K/V heads: how many each, and in which order?",
        explanation=(
            f"{arithmetic}: K/V head {group} serves **{_heads_text(heads)}** (query head h reads K/V head "
            f"⌊h / {r}⌋, as Llama's repeat_kv lays them out). The figure shows those heads in layer {layer}: the "
            "same keys, different queries, different patterns. The cache keeps "
            f"{Hkv} heads' keys and values per layer instead of {H}."
        ),
        data={
            "weights": cap.weights[list(heads)],
            "tokens": cap.tokens,
            "heads": heads,
            "n_heads": H,
            "n_kv_heads": Hkv,
            "layer": layer,
            "group": group,
        },
        link=_model_link(ckpt, text, layer),
        lesson=LESSON,
    )


# -- cache sizes ---------------------------------------------------------------------------------------


def _near(typed: float, value: float, decimals: int = 2) -> bool:
    return abs(typed - value) <= max(REL * abs(value), 0.6 * 10.0**-decimals)


def _size_check(fields: tuple[str, ...], answers: tuple[float, ...], mistakes, right: str):
    """A numbers check: each field against its answer; a wrong field named with the mistake it matches.

    Args:
        mistakes: per field, `[(value, why), …]`: what a typical slip gives, and what to say about it.
    """

    def check(typed) -> tuple[bool, str]:
        typed = [float(x) for x in typed]
        off = [i for i, (t, a) in enumerate(zip(typed, answers, strict=True)) if not _near(t, a)]
        if not off:
            return True, right
        said: dict[str, list[str]] = {}  # why → the fields it is said of, once (issue 46, point 15)
        for i in off:
            why = next((w for value, w in mistakes[i] if _near(typed[i], value)), None)
            said.setdefault(why or "not within 1 %; work it out factor by factor", []).append(fields[i])
        return False, " ".join(f"{' and '.join(names)}: {why}." for why, names in said.items())

    return check


def _slips(answer: float, layers: int, itemsize: int) -> list[tuple[float, str]]:
    """What the usual slips give for a cache size `answer`, each with why it is off."""
    return [
        (
            answer / 2,
            f"that is half the size: a cache keeps a key and a value per token, {itemsize} bytes per number",
        ),
        (answer * 2, f"that is twice the size: K and V are counted once each, {itemsize} bytes per number"),
        (answer / layers, f"that is one layer's share; each of the {layers} layers keeps its own"),
        (answer * KIB, "that is in the unit below; divide by 1,024"),
        (answer / KIB, "that is in the unit above; multiply by 1,024"),
    ]


def _worked(layers: int, kv: int, width: int, itemsize: int) -> str:
    b = 2 * layers * kv * width * itemsize
    return f"2 (K and V) × {layers} layers × {kv} K/V heads × {width} × {itemsize} bytes = {b:,} bytes"


def _tiles_table_note(itemsize: int) -> str:
    """How the FlashAttention page's KV-cache table (float32, as attnviz runs) reads against these numbers."""
    if itemsize == 4:
        return "The FlashAttention page's table shows the same numbers for every decoder on offer."
    return (
        f"The FlashAttention page's table counts float32 (4 bytes), as attnviz runs, so its numbers are "
        f"{4 // itemsize}× these, for every decoder on offer."
    )


def kv_cache(seed: int, step: int = 1, *, ckpt=None) -> Exercise:
    """KV-cache bytes per token and at `LENGTH` tokens: this model's K/V heads against MHA's (SmolLM2's
    config, read without its weights, or `ckpt`'s)."""
    name = ckpt.name if ckpt else checkpoints.SMOLLM2
    config = ckpt.config if ckpt else checkpoints.config(name)
    itemsize = int(rng(seed, step, LESSON).choice(list(ITEMSIZES)))
    size = kv_cache_size(config, itemsize)
    L, H, Hkv, Dh = size.layers, size.query_heads, size.kv_heads, size.head_dim
    layout = size.layout
    fields = (
        f"{layout}, per token (KiB)",
        "MHA, per token (KiB)",
        f"{layout}, {LENGTH:,} tokens (MiB)",
        f"MHA, {LENGTH:,} tokens (MiB)",
    )
    answers = (
        size.per_token / KIB,
        size.per_token_mha / KIB,
        size.at(LENGTH) / MIB,
        size.at(LENGTH, mha=True) / MIB,
    )
    worked = (
        f"per token {_worked(L, Hkv, Dh, itemsize)} = {answers[0]:.2f} KiB; MHA {_worked(L, H, Dh, itemsize)} = "
        f"{answers[1]:.2f} KiB ({H // Hkv}× more). At {LENGTH:,} tokens: {answers[2]:.2f} MiB against "
        f"{answers[3]:.2f} MiB."
    )
    as_mha = f"that is what MHA would keep; {layout} caches only the {Hkv} K/V heads of each layer"
    as_gqa = f"that counts {layout}'s {Hkv} K/V heads; MHA has one K/V head per query head, {H}"
    mistakes = [
        [(answers[1], as_mha), *_slips(answers[0], L, itemsize)],
        [(answers[0], as_gqa), *_slips(answers[1], L, itemsize)],
        [(answers[3], as_mha), *_slips(answers[2], L, itemsize)],
        [(answers[2], as_gqa), *_slips(answers[3], L, itemsize)],
    ]
    lengths = np.arange(0, 2 * LENGTH + 1, 256)
    return Exercise(
        step=step,
        key="kv_cache",
        title="The KV cache",
        seed=seed,
        intro=(
            "To write token t + 1 a decoder reuses every earlier token's keys and values instead of recomputing "
            "them: the **KV cache**. It grows by the same number of bytes with every token; with long contexts it, "
            "not the weights, fills the memory. Sharing K/V heads shrinks it."
        ),
        given=(
            f"**{name}**: {L} layers; {H} query heads on **{Hkv} K/V heads** ({layout}); head width "
            f"{Dh}. The cache holds {ITEMSIZES[itemsize]}. MHA would give every query head its own K/V head. "
            "1 KiB = 1,024 bytes, 1 MiB = 1,024 KiB."
        ),
        parts=(
            Part(
                f"How big is the cache per token, and at **{LENGTH:,} tokens**, for {layout} and for MHA? "
                "(to 2 decimals; within 1 % is right)",
                NUMBERS,
                answers,
                _size_check(fields, answers, mistakes, f"Right: {worked}"),
                ", ".join(f"{a:.2f}" for a in answers),
                options=fields,
                bounds=(0.0, 1e7),
            ),
        ),
        hint="Per token, every layer keeps one key and one value vector per K/V head. Multiply it out.",
        explanation=worked + " " + _tiles_table_note(itemsize),
        data={
            "model": name,
            "per_token": {
                f"MHA ({H} K/V heads)": size.per_token_mha,
                f"{layout} ({Hkv} K/V heads)": size.per_token,
            },
            "lengths": lengths,
            "curves": {
                f"MHA ({H} K/V heads)": np.array([size.at(int(n), mha=True) for n in lengths]),
                f"{layout} ({Hkv} K/V heads)": np.array([size.at(int(n)) for n in lengths]),
            },
            "length": LENGTH,
        },
        link=Link("tiles", "Open the FlashAttention page (its KV-cache table)", {}, {}),
        lesson=LESSON,
    )


def gemma_cache(seed: int, step: int = 6, *, ckpt=None) -> Exercise:
    """Gemma 3 at `LENGTH` tokens: one K/V head, and local layers that keep only their window."""
    name = ckpt.name if ckpt else checkpoints.GEMMA
    config = ckpt.config if ckpt else checkpoints.config(name)
    itemsize = int(rng(seed, step, LESSON).choice(list(ITEMSIZES)))
    size = kv_cache_size(config, itemsize)
    flat = dataclasses.replace(size, windows=())
    L, Hkv, Dh = size.layers, size.kv_heads, size.head_dim
    local = [i for i, w in enumerate(size.windows) if w is not None]
    window = next((w for w in size.windows if w is not None), None)
    full = [i for i in range(L) if i not in local]
    fields = ("every layer keeps every token (MiB)", "with the windows (MiB)")
    answers = (flat.at(LENGTH) / MIB, size.at(LENGTH) / MIB)
    layer_token = 2 * Hkv * Dh * itemsize  # one layer, one token
    kept = min(LENGTH, window or LENGTH)
    worked = (
        f"one layer keeps 2 × {Hkv} × {Dh} × {itemsize} = {layer_token:,} bytes per token. Every layer, every "
        f"token: {L} × {LENGTH:,} × {layer_token:,} bytes = {answers[0]:.2f} MiB. With the windows: "
        f"{len(local)} local layers × {kept:,} + {len(full)} global layers × {LENGTH:,} tokens, × {layer_token:,} "
        f"bytes = {answers[1]:.2f} MiB."
    )
    only_windows = (len(local) + len(full)) * kept * layer_token / MIB
    mistakes = [
        _slips(answers[0], L, itemsize),
        [
            (answers[0], f"that is without the windows: a local layer keeps only its last {window} tokens"),
            (
                only_windows,
                f"the {len(full)} global layers keep every token; only the local ones are windowed",
            ),
            *_slips(answers[1], L, itemsize),
        ],
    ]
    lengths = np.arange(0, 2 * LENGTH + 1, 256)
    return Exercise(
        step=step,
        key="gemma_cache",
        title="Gemma's cache",
        seed=seed,
        intro=(
            "Gemma 3 shrinks its cache twice: **multi-query attention** (all query heads read one K/V head) and "
            f"**sliding windows**: most layers are *local*, attending only to the last {window} tokens, so past "
            "the window they keep no more keys and values; a few *global* layers see everything."
        ),
        given=(
            f"**{name}**: {L} layers with {size.query_heads} query heads on **{Hkv} K/V head**, head width "
            f"**{Dh}**; layers {', '.join(map(str, full))} are global, the other {len(local)} local with a window "
            f"of **{window}** tokens. The cache holds {ITEMSIZES[itemsize]}. 1 MiB = 1,024 × 1,024 bytes."
        ),
        parts=(
            Part(
                f"How big is the cache at **{LENGTH:,} tokens**, without and with the windows? (to 2 decimals; "
                "within 1 % is right)",
                NUMBERS,
                answers,
                _size_check(fields, answers, mistakes, f"Right: {worked}"),
                ", ".join(f"{a:.2f}" for a in answers),
                options=fields,
                bounds=(0.0, 1e7),
            ),
        ),
        hint="Work out one layer's bytes per token first; then count the tokens each kind of layer keeps.",
        explanation=worked
        + f" The windows keep the cache {answers[0] / answers[1]:.1f}× smaller here; the longer "
        "the context, the more they save.",
        data={
            "model": name,
            "lengths": lengths,
            "curves": {
                "every layer keeps every token": np.array([flat.at(int(n)) for n in lengths]),
                f"local layers keep {window}": np.array([size.at(int(n)) for n in lengths]),
            },
            "length": LENGTH,
        },
        link=Link("tiles", "Open the FlashAttention page (its KV-cache table)", {}, {}),
        lesson=LESSON,
    )
