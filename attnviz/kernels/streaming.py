"""Cache policies for a long text: the full cache, a sliding window, and a window with attention sinks.

StreamingLLM (Xiao et al., 2023, "Efficient Streaming Language Models with Attention Sinks"): a
decoder reading past its cache must evict keys. Evicting the oldest (a sliding window of W tokens)
throws away the first tokens, on which most heads of a trained model put much of their weight
whatever they are (the attention sink), and perplexity blows up once the window is full; keeping S
"sink" tokens (the first S) beside the window repairs it. As in the paper, positions are positions
*in the cache*: the sinks sit at 0 … S − 1, the window's keys at S …, the new token right after
them, so a key's rotary angle changes as older keys leave.

How the keys are turned: the attention body (`MultiHeadAttention`) turns each key by RoPE at the
position it enters at (`start` = the cache's length) and the cache holds keys after RoPE. A
`StreamingCache` keeps each key as the body made it and the position it was turned at (`turned`);
after an eviction the keys the body reads are those keys turned once more by (cache position −
`turned`) — rotations compose, R(c − p)·R(p)·k = R(c)·k — always from the key as it entered, so no
rounding builds up over thousands of evictions (turning the cache by −1 at every eviction would
add one rounding per eviction). Learned absolute positions (GPT-2) enter at the embedding: the new
token's position is its cache position and keys are never turned.

`nll(ckpt, text, framework, *, window=None, sinks=0)` is the per-token negative log-likelihood of a
text under a policy; `score` adds each layer's and head's weight on the first token; `generate`
draws new tokens over the same cache.
Shapes: T tokens, L layers, H query heads, Hkv K/V heads, Dk/Dv head widths, n new tokens, C the
cache's capacity (S + W).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.backends.common import KVCache, to_numpy
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import backend
from attnviz.pretrained.checks import check_text
from attnviz.pretrained.sampling import (
    MAX_NEW_TOKENS,
    check_k,
    check_temperature,
    decode,
    is_index,
    sampler,
)

MAX_WINDOW = 1 << 16
MAX_SINKS = 64
MAX_TOKENS = 8192  # tokens one `score` reads: one step each
TEXT_FILE = Path(__file__).parents[2] / "assets" / "streaming_text.txt"


@dataclass(frozen=True)
class Policy:
    """What a cache keeps: every key (`window` None), or the `sinks` first keys and the last
    `window` ones."""

    window: int | None = None
    sinks: int = 0

    def __post_init__(self):
        if self.window is not None and not (is_index(self.window) and 1 <= self.window <= MAX_WINDOW):
            raise SpecError(
                "window", self.window, f"None (the full cache) or an integer from 1 to {MAX_WINDOW}"
            )
        if not (is_index(self.sinks) and 0 <= self.sinks <= MAX_SINKS):
            raise SpecError("sinks", self.sinks, f"an integer from 0 to {MAX_SINKS}")
        if self.sinks and self.window is None:
            raise SpecError(
                "sinks", self.sinks, "0 with the full cache (window None): sinks sit beside a window"
            )

    @property
    def capacity(self) -> int | None:
        """How many keys the cache holds at most (None: no bound)."""
        return None if self.window is None else self.window + self.sinks

    @property
    def label(self) -> str:
        if self.window is None:
            return "full cache"
        return f"window {self.window}" + (
            f" + {self.sinks} sink{'s' * (self.sinks > 1)}" if self.sinks else ""
        )


def turn(k: np.ndarray, shift: np.ndarray, base: float) -> np.ndarray:
    """`k (1, Hkv, n, Dk)` with key j turned by RoPE through `shift[j]` positions (transformers'
    `rotate_half` layout: pair (i, i + Dk/2) by shift · base^(−2i/Dk)), in `k`'s dtype."""
    Dk = k.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, Dk, 2, dtype=np.float64) / Dk)  # (Dk/2,)
    angle = shift[:, None] * inv_freq  # (n, Dk/2)
    angle = np.concatenate([angle, angle], axis=-1)  # (n, Dk)
    half = Dk // 2
    rotated = np.concatenate([-k[..., half:], k[..., :half]], axis=-1)  # rotate_half(k)
    return (k * np.cos(angle) + rotated * np.sin(angle)).astype(k.dtype)


class StreamingCache(KVCache):
    """A `KVCache` that evicts by a `Policy` after each step: `Decoder.step` reads and extends it
    like any cache (`begin` returns the cache's length, so positions are cache positions).

    Every layer keeps the same positions; a layer with its own window (Gemma 3's local layers) still
    narrows its mask to it, over cache positions. `seen` counts every token run.
    """

    def __init__(self, decoder: Any, framework: str, policy: Policy, weights: bool = False):
        heads = [layer.heads for layer in decoder.layout.layers]
        super().__init__([None] * len(heads), weights)
        self.policy, self.seen = policy, 0
        self._bases = [h.rope_base for h in heads]
        self._backend = backend(framework)
        self._device = self._backend.resolve_device("cpu")
        self._k: list[np.ndarray | None] = [None] * len(heads)  # (1, Hkv, Lk, Dk): as the body turned them
        self._v: list[np.ndarray | None] = [None] * len(heads)  # (1, Hkv, Lk, Dv)
        self._turned = np.zeros(0, np.int64)  # (Lk,): the position each kept key was turned at

    def advance(self) -> None:
        """End the step; then, past the capacity, evict the oldest keys after the sinks and turn the
        rest to their new cache positions."""
        n, capacity = self._end - self.length, self.policy.capacity
        self.seen += n
        if capacity is None:
            super().advance()
            return
        self._turned = np.concatenate([self._turned, np.arange(self.length, self._end)])
        for i, layer in enumerate(self.layers):
            k, v = to_numpy(layer.k[:, :, -n:]), to_numpy(layer.v[:, :, -n:])  # (1, Hkv, n, ·): the new keys
            self._k[i] = k if self._k[i] is None else np.concatenate([self._k[i], k], axis=2)
            self._v[i] = v if self._v[i] is None else np.concatenate([self._v[i], v], axis=2)
        excess = len(self._turned) - capacity
        self.length = min(self._end, capacity)
        if excess <= 0:
            return
        S = self.policy.sinks
        kept = np.r_[0:S, S + excess : len(self._turned)]  # (C,): the sinks, then the newest
        self._turned = self._turned[kept]
        shift = np.arange(capacity) - self._turned  # (C,): ≤ 0, how far each key moved
        for i, layer in enumerate(self.layers):
            self._k[i], self._v[i] = self._k[i][:, :, kept], self._v[i][:, :, kept]
            k = self._k[i] if self._bases[i] is None else turn(self._k[i], shift, self._bases[i])
            layer.k, layer.v = self._tensor(k), self._tensor(self._v[i])

    def _tensor(self, array: np.ndarray) -> Any:
        return self._backend.to_tensor(np.ascontiguousarray(array), self._device)


@dataclass(frozen=True)
class Scored:
    """What `score` returns.

    Attributes:
        ids: `(T,)` the text's token ids.
        nll: `(T − 1,)` −log p(token t | what the policy keeps of tokens < t), nats.
        first: `(T − 1, L, H)` each head's weight on the text's first token when predicting token
            t + 1, NaN once the policy has evicted it; None unless asked for.
        policy: the policy.
        ended: "done" or "stopped".
    """

    ids: list[int]
    nll: np.ndarray
    first: np.ndarray | None
    policy: Policy
    ended: str = "done"

    @property
    def perplexity(self) -> float:
        return float(np.exp(self.nll.mean())) if len(self.nll) else math.nan


def score(
    ckpt: Any,
    text: str,
    framework: str,
    *,
    window: int | None = None,
    sinks: int = 0,
    first: bool = False,
    monitor: Monitor | None = None,
) -> Scored:
    """Read `text` one token at a time over a `StreamingCache` with the policy (`window` None: the
    full cache; `sinks` first tokens kept beside it): each token's NLL and, with `first`, each head's
    weight on the first token. `monitor` is told `(done, T − 1)` after each token; once it is
    stopped the run ends with the tokens so far (`ended` "stopped")."""
    return score_ids(
        ckpt,
        _decoder_ids(ckpt, text, Policy(window, sinks)),
        framework,
        window=window,
        sinks=sinks,
        first=first,
        monitor=monitor,
    )


def score_ids(
    ckpt: Any,
    ids: list[int],
    framework: str,
    *,
    window: int | None = None,
    sinks: int = 0,
    first: bool = False,
    monitor: Monitor | None = None,
) -> Scored:
    """`score` over token ids `(T,)` already encoded (a prefix of a long text)."""
    policy, model, monitor = Policy(window, sinks), ckpt.model(framework), watch(monitor)
    _check_ids(ckpt, ids, policy)
    cache = StreamingCache(model, framework, policy, weights=first)
    nll, shares, ended = [], [], "done"
    for t in range(len(ids) - 1):
        if t and monitor.stopped():
            ended = "stopped"
            break
        logits = model.step([ids[t]], cache)[-1].astype(np.float64)  # (V,)
        nll.append(np.logaddexp.reduce(logits) - logits[ids[t + 1]])
        if first:
            shares.append(_first_share(cache, t))
        monitor.report(t + 1, len(ids) - 1)
    first_share = np.array(shares, np.float32) if first else None  # (T − 1, L, H)
    return Scored(list(ids), np.array(nll), first_share, policy, ended)


def nll(ckpt: Any, text: str, framework: str, *, window: int | None = None, sinks: int = 0) -> np.ndarray:
    """`(T − 1,)`: token t's negative log-likelihood (nats) given what the policy keeps of tokens < t
    (`window` None: the full cache; else the `sinks` first tokens and the last `window`)."""
    return score(ckpt, text, framework, window=window, sinks=sinks).nll


def _first_share(cache: StreamingCache, t: int) -> np.ndarray:
    """`(L, H)`: the weight of the new query on key 0, the text's first token while it is kept."""
    policy = cache.policy
    kept = policy.capacity is None or policy.sinks > 0 or t <= policy.capacity  # evicted after step C
    rows = [to_numpy(w)[0, :, -1, 0] for w in cache.weights]  # L × (H,)
    return np.stack(rows) if kept else np.full((len(rows), len(rows[0])), np.nan)


def text_ids(ckpt: Any, text: str, tokens: int | None = None) -> list[int]:
    """`text`'s token ids (special tokens included, as `Checkpoint.encode`), the first `tokens` of
    them: a streaming cache reads texts longer than the model's positions."""
    check_text("text", text, "a non-empty string")
    return ckpt.tokenizer.encode(text).ids[:tokens]


def _decoder_ids(ckpt: Any, text: str, policy: Policy) -> list[int]:
    return _check_ids(ckpt, text_ids(ckpt, text), policy)


def _check_ids(ckpt: Any, ids: list[int], policy: Policy) -> list[int]:
    """`ids` if `ckpt` is a decoder, they are 2 to `MAX_TOKENS` tokens and the positions the policy
    gives them (at most its capacity) are the model's; else a `SpecError`."""
    if ckpt.kind != "decoder":
        raise SpecError("checkpoint", ckpt.name, "a decoder checkpoint", value_text="an encoder")
    if not 2 <= len(ids) <= MAX_TOKENS:
        raise SpecError("text", ids, f"2 to {MAX_TOKENS} tokens", value_text=f"{len(ids)} tokens")
    limit, used = ckpt.config.max_position_embeddings, len(ids) - 1  # the last token is never run
    if policy.capacity is not None and min(used, policy.capacity + 1) > limit:
        raise SpecError(
            "window",
            policy.window,
            f"a window and sinks of at most {limit - 1} tokens, the model's positions",
        )
    if policy.capacity is None and used > limit:
        raise SpecError("text", ids, f"at most {limit + 1} tokens with the full cache (the model's positions)",
                        value_text=f"{len(ids)} tokens")  # fmt: skip
    return ids


def bundled_text() -> str:
    """The long English text shipped with attnviz (`assets/streaming_text.txt`, ~2,700 SmolLM2 tokens):
    the "Execution model" and "Exceptions" sections of the Python Language Reference, as the standard
    library carries them in `pydoc_data.topics` (Python 3.11; PSF documentation licence)."""
    return TEXT_FILE.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Streamed:
    """What `generate` returns: the prompt's and the new tokens' ids, each new token's probability."""

    ids: list[int]
    prompt_length: int
    probabilities: list[float]

    @property
    def new_ids(self) -> list[int]:
        return self.ids[self.prompt_length :]


def generate(
    ckpt: Any,
    text: str,
    framework: str,
    *,
    window: int | None = None,
    sinks: int = 0,
    max_new_tokens: int = 20,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> Streamed:
    """`max_new_tokens` tokens after `text`, drawn at `temperature` (0: the most likely) over a
    `StreamingCache` with the policy. The prompt runs in chunks no eviction falls inside (each
    chunk fills the cache to one past its capacity at most), so every token sees what the policy
    keeps, as one token at a time would."""
    policy = Policy(window, sinks)
    ids = _decoder_ids(ckpt, text, policy)
    check_temperature(temperature), check_k("top_k", top_k)
    if not (is_index(max_new_tokens) and 1 <= max_new_tokens <= MAX_NEW_TOKENS):
        raise SpecError("max_new_tokens", max_new_tokens, f"an integer from 1 to {MAX_NEW_TOKENS}")
    model, pick = ckpt.model(framework), sampler(ckpt.n_tokens, temperature, top_k, seed)
    cache = StreamingCache(model, framework, policy)

    def step(_, new: list[int]) -> np.ndarray:
        """The new ids over the cache, the prompt in chunks: `logits (V,)` of the last."""
        done = 0
        while done < len(new):
            room = len(new) if policy.capacity is None else max(1, policy.capacity + 1 - cache.length)
            logits = model.step(new[done : done + room], cache)[-1]  # (V,)
            done += room
        return logits

    drawn, _ = decode(step, ids, max_new_tokens, pick)  # the one generation loop
    ids, probabilities = [*ids, *(d.token for d in drawn)], [d.probability for d in drawn]
    return Streamed(ids, len(ids) - max_new_tokens, probabilities)
