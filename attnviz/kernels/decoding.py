"""Decoding, step by step: what a decoder computes for each new token over its KV cache, and what it
would compute again without one (issue 29 §2).

A decoder generates one token at a time. Without a cache, the step that adds the token at position p
runs all t = p + 1 positions through every layer again, and each layer's attention scores every query
i against keys 0…i: t(t + 1)/2 scores per head. With a cache (`backends.common.KVCache`), each layer
keeps the keys and values of the positions it has seen, so the step runs one position and scores one
query against the t keys it holds — or, on a sliding-window layer, the last `window` of them.

`trace` runs a real generation through the model's cached step (`Decoder.step`, the one `generate`
uses) and keeps, for the layers and heads asked for, each new token's attention row as the step
computed it and the rows the cache holds after it; `time_per_token` measures one step against one
full pass at each position; `work` is the count of both, per head and layer.

Shapes: P prompt tokens, T = P + new tokens, p the new token's position, t = p + 1, H query heads,
Hkv K/V heads, Dk/Dv head widths, Lk the keys a step reads.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz import formats
from attnviz.backends.common import to_numpy
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import check_framework
from attnviz.pretrained.sampling import (
    MAX_NEW_TOKENS,
    Drawn,
    check_k,
    check_temperature,
    decode,
    is_index,
    next_token_probabilities,
    sampler,
)

MAX_TRACE_BYTES = 64 * 2**20  # what a trace may keep: attention rows and cached K/V rows, float32
MAX_REPEATS = 25


@dataclass(frozen=True)
class Work:
    """What one step computes in one layer: positions run through it and attention scores (q·k
    products) per head."""

    positions: int
    scores: int


def work(t: int, window: int | None = None, *, cached: bool) -> Work:
    """The work of the step that brings a sequence to `t` tokens, in a layer with sliding `window`
    (None: every earlier key).

    Cached: one position, its query against the keys the cache holds, min(t, window). Uncached: all
    t positions, query i (1-based) against min(i, window) keys: Σ i = t(t + 1)/2, or with a window w
    < t, w(w + 1)/2 + (t − w)·w.
    """
    if cached:
        return Work(1, t if window is None else min(t, window))
    w = t if window is None else min(t, window)
    return Work(t, w * (w + 1) // 2 + (t - w) * w)


@dataclass(frozen=True)
class DecodingStep:
    """One generated token, run through the layers over the cache.

    Attributes:
        position: the token's position p.
        token: its id; `text` as text; `probability` when it was drawn.
        attention: `{layer: (heads, Lk)}` the token's query row over the keys the layer's cache holds
            after the step (positions `first_key[layer] … p`), from the cached step itself.
        first_key: `{layer: position}` of the first key the cache holds (0, or p − window + 1).
        cached, uncached: `Work` of every layer (all of them, not only those kept), with and
            without the cache.
    """

    position: int
    token: int
    text: str
    probability: float
    attention: dict[int, np.ndarray]
    first_key: dict[int, int]
    cached: tuple[Work, ...]
    uncached: tuple[Work, ...]


@dataclass(frozen=True)
class Decoding:
    """A generation traced step by step (`trace`).

    Attributes:
        framework: "torch" or "tensorflow".
        ids: `(T,)` prompt and new token ids; `tokens` as text; `prompt_length` = P.
        layers, heads: the layers and query heads kept; `kv_heads` the K/V heads those heads read.
        n_heads: query heads per layer (for totals over heads).
        windows: every layer's sliding window (None: none).
        steps: one per new token.
        keys, values: `{layer: (len(kv_heads), rows, Dk|Dv)}` every key and value row the layer's
            cache held, in position order from `origin[layer]` (0, unless the prompt was longer
            than the layer's window); `cached_keys` / `cached_values` give a step's rows.
        cache_bytes: what the generation's `KVCache` held when its last token was drawn (every
            layer's keys and values, per K/V head): `Checkpoint.generate`'s `cache_bytes`.
        model_probabilities: each new token's probability under the model at temperature 1 (the
            softmax of the logits it was drawn from), whatever the temperature it was drawn at.
    """

    framework: str
    ids: list[int]
    tokens: list[str]
    prompt_length: int
    layers: tuple[int, ...]
    heads: tuple[int, ...]
    kv_heads: tuple[int, ...]
    n_heads: int
    windows: tuple[int | None, ...]
    steps: list[DecodingStep]
    keys: dict[int, np.ndarray]
    values: dict[int, np.ndarray]
    origin: dict[int, int]
    cache_bytes: int = 0
    model_probabilities: tuple[float, ...] = ()

    @property
    def cached_positions(self) -> int:
        """The positions the generation's cache held at its end (`cache_bytes`): every token but the
        last new one, which is drawn from the logits and never run."""
        return len(self.ids) - 1

    def cache_rows(self, step: int, layer: int) -> range:
        """The positions whose keys and values `layer`'s cache holds after `step`."""
        return range(self.steps[step].first_key[layer], self.steps[step].position + 1)

    def cached_keys(self, step: int, layer: int) -> np.ndarray:
        """`(len(kv_heads), Lk, Dk)`: `layer`'s cached keys after `step` (RoPE applied, per K/V head)."""
        return self._rows(self.keys, step, layer)

    def cached_values(self, step: int, layer: int) -> np.ndarray:
        """`(len(kv_heads), Lk, Dv)`: `layer`'s cached values after `step`."""
        return self._rows(self.values, step, layer)

    def _rows(self, table: dict[int, np.ndarray], step: int, layer: int) -> np.ndarray:
        rows = self.cache_rows(step, layer)
        start = rows.start - self.origin[layer]
        return table[layer][:, start : start + len(rows)]

    def total(self, step: int, *, cached: bool) -> Work:
        """The whole model's work at `step`: positions run, and scores over every layer and head."""
        work_ = self.steps[step].cached if cached else self.steps[step].uncached
        return Work(work_[0].positions, sum(w.scores for w in work_) * self.n_heads)


def trace(
    ckpt: Any,
    text: str,
    framework: str = "torch",
    new_tokens: int = 8,
    *,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> Decoding:
    """Generate `new_tokens` tokens after `text` over a KV cache and keep each step's view of it.

    The tokens are those `ckpt.generate(text, framework, new_tokens, temperature, top_k, seed)`
    draws; each is then run through the layers as the cached step does (the last one too, so its
    attention row is shown). Only the `layers` and query `heads` asked for (None: all) are kept, and
    each K/V row once (`Decoding.cached_keys` slices them per step): memory grows with T, not T².
    `device` ("cpu" | "gpu" | "auto"): where the model and its cache live (rows are copied home).
    `monitor`: told `(tokens drawn, new_tokens)` as each token is drawn.

    Raises:
        SpecError: `ckpt` not a decoder, a bad framework, `new_tokens`, `layers`, `heads`,
            `temperature`, `top_k` or `seed`, or a selection whose trace would exceed `MAX_TRACE_BYTES`.
    """
    ids, model = _prepare(ckpt, text, framework, new_tokens, device)
    cfg = ckpt.config
    layers = _selection("layers", layers, cfg.num_hidden_layers)
    heads = _selection("heads", heads, cfg.num_attention_heads)
    group = cfg.num_attention_heads // getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    kv_heads = tuple(sorted({h // group for h in heads}))  # the K/V head each query head reads
    _check_size(cfg, len(ids), new_tokens, len(layers), len(heads), len(kv_heads))
    check_temperature(temperature), check_k("top_k", top_k)
    if not (is_index(seed) and seed >= 0):
        raise SpecError("seed", seed, "an integer ≥ 0")
    pick = sampler(ckpt.n_tokens, temperature, top_k, seed)
    kv, drawn = model.new_cache(weights=True), []
    windows = tuple(kv.windows)
    keys, values, steps = {i: [] for i in layers}, {i: [] for i in layers}, []

    def run(ids_so_far: list[int], new: list[int]) -> np.ndarray:
        """The cached step, then what it left in the cache: the prompt's rows, or a new token's."""
        logits = model.step(new, kv)[-1]  # (V,)
        rows = slice(None) if not steps and not drawn else slice(-1, None)  # the prompt: every row
        for i in layers:
            keys[i].append(to_numpy(kv.keys[i])[0, list(kv_heads), rows])  # (Hkv', rows, Dk)
            values[i].append(to_numpy(kv.values[i])[0, list(kv_heads), rows])
        if drawn:
            steps.append(_step(ckpt, kv, new[0], drawn[-1].probability, layers, list(heads), windows))
        return logits

    monitor = watch(monitor)

    def observe(d: Drawn, n: int) -> None:
        drawn.append(d)
        monitor.report(n, new_tokens)

    decode(run, ids, new_tokens, pick, observe=observe)
    cache_bytes = kv.nbytes  # the generation's own cache: its last token is drawn, never run
    ids = [*ids, *(d.token for d in drawn)]
    run(ids, ids[-1:])  # … here it runs too, so its attention row can be shown
    origin = {i: len(ids) - new_tokens - keys[i][0].shape[1] for i in layers}
    return Decoding(
        framework, ids, ckpt.labels(ids), len(ids) - new_tokens, layers, heads, kv_heads,
        cfg.num_attention_heads, windows, steps,
        {i: np.concatenate(k, axis=1) for i, k in keys.items()},
        {i: np.concatenate(v, axis=1) for i, v in values.items()}, origin, cache_bytes,
        tuple(_model_probability(d, ckpt.n_tokens) for d in drawn),
    )  # fmt: skip


def _model_probability(drawn: Drawn, n_tokens: int) -> float:
    """The drawn token's probability at temperature 1, over the first `n_tokens` logits."""
    return float(next_token_probabilities(drawn.logits[:n_tokens])[drawn.token])


def _step(
    ckpt: Any, kv: Any, token: int, probability: float, layers: tuple, heads: list, windows: tuple
) -> DecodingStep:
    """What the cache `kv` shows after the step that ran `token`."""
    p = kv.length - 1
    # (heads, Lk): the row over the keys the cache holds now. A window layer's step also read the key
    # that falls out of its window (masked, weight 0), then dropped it from the cache.
    attention = {i: to_numpy(kv.weights[i])[0, heads, -1, -kv.keys[i].shape[2] :] for i in layers}
    return DecodingStep(
        position=p,
        token=token,
        text=ckpt.labels([token])[0],
        probability=probability,
        attention=attention,
        first_key={i: p + 1 - attention[i].shape[-1] for i in layers},
        cached=tuple(work(p + 1, w, cached=True) for w in windows),
        uncached=tuple(work(p + 1, w, cached=False) for w in windows),
    )


@dataclass(frozen=True)
class TokenTimes:
    """Seconds per generated token against position, with and without the cache (`time_per_token`).

    Attributes:
        positions: `(n,)` the position p each step runs (P … P + n − 1).
        cached: `(n,)` median seconds of one cached step at p (one position over p cached keys).
        uncached: `(n,)` median seconds of a full pass over positions 0 … p (what `generate(...,
            cache=False)` runs for that token).
        prompt: median seconds of the prompt's own cached step (P positions: the wait before the
            first new token, the same work with or without a cache).
        runs_cached, runs_uncached: `(repeats, n)` every measurement.
        ids: the prompt and the greedy tokens that were run.
    """

    framework: str
    positions: np.ndarray
    cached: np.ndarray
    uncached: np.ndarray
    prompt: float
    runs_cached: np.ndarray
    runs_uncached: np.ndarray
    ids: list[int]


def time_per_token(
    ckpt: Any,
    text: str,
    framework: str = "torch",
    new_tokens: int = 16,
    repeats: int = 3,
    *,
    device: str = "cpu",
) -> TokenTimes:
    """Measure one cached step and one full pass at each position of a greedy generation of
    `new_tokens` tokens after `text`, `repeats` times, interleaved position by position (a burst of
    load hits both alike); medians. Both paths run once first, untimed (TensorFlow traces its step
    graph on first use). `device`: where the model runs (each timed call ends with its logits on
    the host, so a GPU's work is finished inside the time).

    Raises:
        SpecError: as `trace`, or `repeats` not 1 … `MAX_REPEATS`.
    """
    ids, model = _prepare(ckpt, text, framework, new_tokens, device)
    if not (is_index(repeats) and 1 <= repeats <= MAX_REPEATS):
        raise SpecError("repeats", repeats, f"an integer 1 … {MAX_REPEATS}")
    P = len(ids)
    ids = _greedy(model, ids, new_tokens, ckpt.n_tokens)  # untimed: warms the cached path
    model(ids[: P + 1])  # and the full pass
    cached, uncached, prompt = np.empty((repeats, new_tokens)), np.empty((repeats, new_tokens)), []
    for r in range(repeats):
        kv = model.new_cache()
        prompt.append(_seconds(lambda kv=kv: model.step(ids[:P], kv)))
        for n, p in enumerate(range(P, P + new_tokens)):
            cached[r, n] = _seconds(lambda p=p, kv=kv: model.step([ids[p]], kv))
            uncached[r, n] = _seconds(lambda p=p: model(ids[: p + 1]))
    return TokenTimes(
        framework, np.arange(P, P + new_tokens), np.median(cached, axis=0), np.median(uncached, axis=0),
        statistics.median(prompt), cached, uncached, ids,
    )  # fmt: skip


def _greedy(model: Any, ids: list[int], n: int, n_tokens: int) -> list[int]:
    """`ids` and `n` greedy tokens after them, over a cache (the last one drawn, not run)."""
    kv = model.new_cache()
    drawn, _ = decode(lambda _, new: model.step(new, kv)[-1], ids, n, sampler(n_tokens))
    return [*ids, *(d.token for d in drawn)]


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _prepare(
    ckpt: Any, text: str, framework: str, new_tokens: Any, device: str = "cpu"
) -> tuple[list[int], Any]:
    """The prompt's ids and the framework's model on `device`, after checking the checkpoint and
    `new_tokens`."""
    if ckpt.kind != "decoder":
        raise SpecError("checkpoint", ckpt.name, "a decoder checkpoint", value_text="an encoder")
    check_framework(framework)
    ids = list(ckpt.encode(text)[0])
    positions = ckpt.config.max_position_embeddings
    room = min(positions - len(ids), MAX_NEW_TOKENS)
    if not (is_index(new_tokens) and 1 <= new_tokens <= room):
        raise SpecError(
            "new_tokens",
            new_tokens,
            f"1 … {room} (the model has {positions} positions; the text uses {len(ids)})",
        )
    return ids, ckpt.model(framework, device)


def _selection(name: str, chosen: Any, count: int) -> tuple[int, ...]:
    """`chosen` (None: all of `range(count)`) as sorted distinct indices, or a `SpecError`."""
    if chosen is None:
        return tuple(range(count))
    allowed = f"None (all) or a non-empty list of distinct integers 0 … {count - 1}"
    try:
        values = list(chosen)
    except TypeError:
        raise SpecError(name, chosen, allowed) from None
    if not values or len(set(values)) != len(values):
        raise SpecError(name, chosen, allowed)
    if not all(is_index(v) and 0 <= v < count for v in values):
        raise SpecError(name, chosen, allowed)
    return tuple(sorted(int(v) for v in values))


def _check_size(cfg: Any, P: int, n: int, layers: int, heads: int, kv_heads: int) -> None:
    """Refuse a trace whose kept rows would exceed `MAX_TRACE_BYTES`: per kept layer, each step's
    attention row (at most T keys per head) and every K and V row (float32)."""
    T, Dh = P + n, cfg.head_dim
    need = 4 * layers * (n * heads * T + kv_heads * T * 2 * Dh)
    if need > MAX_TRACE_BYTES:
        raise SpecError(
            "layers",
            f"{layers} layers × {heads} heads",
            f"a selection whose trace fits {formats.size(MAX_TRACE_BYTES)} (this one needs "
            f"{formats.size(need)} over {T} tokens): fewer layers or heads, or fewer new tokens",
        )
