"""From logits to probabilities, how far two runs' outputs are apart, and what `Checkpoint.generate`
returns.

Finite logits always give finite probabilities: the softmax subtracts the
largest logit in a way that cannot overflow, and the temperature has the
page slider's bounds (`TEMPERATURE`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import SpecError

MAX_NEW_TOKENS = 256
# (lowest non-zero, highest): the Pretrained page's slider; 0 means "always the most likely".
TEMPERATURE = (0.05, 2.0)


def is_index(value: Any) -> bool:
    """An integer (Python or NumPy), not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_temperature(temperature: Any) -> float:
    """`temperature` if it is 0 or within `TEMPERATURE`, else a `SpecError`."""
    lo, hi = TEMPERATURE
    ok = isinstance(temperature, int | float | np.floating) and not isinstance(temperature, bool)
    if not (ok and (temperature == 0 or lo <= temperature <= hi)):
        raise SpecError(
            "temperature", temperature, f"0 (always the most likely token) or a number from {lo} to {hi}"
        )
    return float(temperature)


def check_k(name: str, k: Any, none_ok: bool = True) -> int | None:
    """`k` if it is an integer ≥ 1 (or None where allowed), else a `SpecError` naming `name`."""
    if (k is None and none_ok) or (is_index(k) and k >= 1):
        return k
    raise SpecError(name, k, ("None (all tokens) or " if none_ok else "") + "an integer ≥ 1")


def next_token_probabilities(
    logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None
) -> np.ndarray:
    """softmax(logits / temperature) over the `top_k` largest logits (others 0), in float64.

    `temperature` 0 puts all the probability on the largest logit (the first, on ties).
    Finite `logits` give finite probabilities (`[1e308, -1e308, 0]` included).
    """
    temperature, top_k = check_temperature(temperature), check_k("top_k", top_k)
    z = np.asarray(logits, np.float64)
    if not (z.ndim == 1 and z.size and np.isfinite(z).all()):
        raise SpecError("logits", z, "a non-empty 1-D array of finite numbers", value_text=f"shape {z.shape}")
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[z.argmax()] = 1.0
        return probs
    if top_k is not None and top_k < z.size:
        z = np.where(z >= np.partition(z, -top_k)[-top_k], z, -np.inf)
    return _softmax(z, temperature)


def _softmax(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Halves first, so `z - max` cannot overflow; a gap that overflows after scaling is -inf → 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        gap = z / 2 - z.max(-1, keepdims=True) / 2  # ≤ 0, finite for finite z
        e = np.exp(np.where(np.isfinite(gap), gap * (2 / temperature), -np.inf))
    return e / e.sum(-1, keepdims=True)


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis of `logits (T, vocab)`, in float64."""
    return _softmax(np.asarray(logits, np.float64))


@dataclass(frozen=True)
class Generation:
    """What `Checkpoint.generate` returns.

    Attributes:
        output: `run` over prompt + new tokens (attentions, logits, tokens …).
        prompt_length: how many of `output.tokens` are the prompt.
        text: the whole sequence decoded.
        probabilities: each new token's probability when it was drawn.
        logits: `(new tokens, vocab)`, the next-token logits each new token was drawn from.
        cache_bytes: the KV cache's bytes at the end (keys and values of every layer, per K/V
            head), or None when generated without a cache.
        ended: why it ended: "limit" (the new tokens asked for), "end token" (one of `stop_at`
            was drawn, and kept) or "stopped" (`stop()` said so).
    """

    output: Any  # ModelOutput
    prompt_length: int
    text: str
    probabilities: list[float]
    logits: np.ndarray | None = None
    cache_bytes: int | None = None
    ended: str = "limit"

    @property
    def new_ids(self) -> list[int]:
        return self.output.ids[self.prompt_length :]


def draw(probs: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A token drawn from `probs` (the most likely at temperature 0)."""
    return int(rng.choice(len(probs), p=probs)) if temperature > 0 else int(probs.argmax())


@dataclass(frozen=True)
class Drawn:
    """One new token: its id, its probability when drawn, and the logits `(V,)` it was drawn from."""

    token: int
    probability: float
    logits: np.ndarray


def sampler(
    n_tokens: int, temperature: float = 0.0, top_k: int | None = None, seed: int = 0
) -> Callable[[np.ndarray], tuple[int, float]]:
    """`logits (V,) → (token, probability)`: drawn among the first `n_tokens` entries at
    `temperature` (0: the most likely) from the `top_k` most likely; the same `seed`, the same draws."""
    check_temperature(temperature), check_k("top_k", top_k)
    rng = np.random.default_rng(seed)

    def pick(logits: np.ndarray) -> tuple[int, float]:
        probs = next_token_probabilities(logits[:n_tokens], temperature, top_k)
        token = draw(probs, temperature, rng)
        return token, float(probs[token])

    return pick


def decode(
    next_logits: Callable[[list[int], list[int]], np.ndarray],
    ids: list[int],
    max_new_tokens: int,
    pick: Callable[[np.ndarray], tuple[int, float]],
    *,
    stop: Callable[[], bool] | None = None,
    stop_at: Collection[int] = (),
    observe: Callable[[Drawn, int], None] | None = None,
) -> tuple[list[Drawn], str]:
    """The one generation loop: `Checkpoint.generate`, the Decoding page's trace and the lessons all
    draw their tokens here.

    Args:
        next_logits: `(ids so far, ids not yet run) → logits (V,)` of the next token (a cached step
            runs only the new ids; a full pass reruns them all). Called for the prompt, then after
            each new token but the last (the last is drawn, never run).
        pick: `logits → (token, probability)` (`sampler`).
        stop: asked before each new token but the first; True ends the loop ("stopped").
        stop_at: token ids that end the loop once drawn (kept): "end token".
        observe: called with each `Drawn` and how many are drawn so far, as it is drawn.

    Returns:
        The tokens drawn, and why it ended: "limit", "end token" or "stopped".
    """
    ids, ends = list(ids), {int(i) for i in stop_at}
    logits, drawn = next_logits(ids, ids), []
    for _ in range(max_new_tokens):
        if stop is not None and drawn and stop():
            return drawn, "stopped"
        token, probability = pick(logits)
        drawn.append(Drawn(token, probability, logits))
        ids.append(token)
        if observe:
            observe(drawn[-1], len(drawn))
        if token in ends:
            return drawn, "end token"
        if len(drawn) < max_new_tokens:
            logits = next_logits(ids, [token])
    return drawn, "limit"


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cos(a, b) over the last axis (1 where both are zero vectors)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    dot, norms = (a * b).sum(-1), np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(dot, norms, out=np.ones_like(dot), where=norms > 0)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p ‖ q) = Σ p·log(p/q) in nats over the last axis (terms with p = 0 count 0)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    ratio = np.log(np.where(p > 0, p, 1.0)) - np.log(np.where(p > 0, q, 1.0))
    return (p * ratio).sum(-1)
