"""Deterministic parameters and inputs, shared by both frameworks.

Layout is `x @ W` (in_features, out_features); query head h uses columns
`h*d_k:(h+1)*d_k` of W_q and rows `h*d_v:(h+1)*d_v` of W_o; K/V head g uses
columns `g*d_k:(g+1)*d_k` of W_k and `g*d_v:(g+1)*d_v` of W_v (g < n_kv_heads).
Both backends load these same arrays.

A sentence becomes inputs too (`tokenize`, `embed`): one position per word, each word's vector
drawn from a hash of its lower-cased text (so a repeated word gets the same vector, and its
attention pattern repeats), plus the sinusoidal position encoding of "Attention Is All You Need"
§3.5.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from attnviz.spec import AttentionSpec


def _uniform(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    bound = 1.0 / np.sqrt(fan_in)  # nn.Linear's default range
    return rng.uniform(-bound, bound, size=shape)


def param_shapes(spec: AttentionSpec) -> dict[str, tuple[int, ...]]:
    """Name → shape of every parameter the spec needs, in creation order."""
    hk, hv = spec.n_heads * spec.d_k, spec.n_heads * spec.d_v
    kvk, kvv = spec.n_kv_heads * spec.d_k, spec.n_kv_heads * spec.d_v
    shapes = {
        "W_q": (spec.d_model, hk),
        "W_k": (spec.d_kv_in, kvk),
        "W_v": (spec.d_kv_in, kvv),
        "W_o": (hv, spec.d_model),
    }
    if spec.bias:
        shapes.update(b_q=(hk,), b_k=(kvk,), b_v=(kvv,), b_o=(spec.d_model,))
    if spec.residual_norm:
        shapes.update(ln_gamma=(spec.d_model,), ln_beta=(spec.d_model,))
    return shapes


def init_params(spec: AttentionSpec) -> dict[str, np.ndarray]:
    """Parameters drawn from `spec.seed`, in `spec.dtype`.

    Returns:
        `W_q (d_model, H*d_k)`, `W_k (d_kv_in, Hkv*d_k)`, `W_v (d_kv_in, Hkv*d_v)`,
        `W_o (H*d_v, d_model)`; `b_q, b_k, b_v, b_o` when `spec.bias`;
        `ln_gamma, ln_beta (d_model,)` when `spec.residual_norm`.
    """
    rng = np.random.default_rng([spec.seed, 0])
    fan_in = {"q": spec.d_model, "k": spec.d_kv_in, "v": spec.d_kv_in, "o": spec.n_heads * spec.d_v}
    params = {}
    for name, shape in param_shapes(spec).items():
        if name == "ln_gamma":  # near 1, but not 1, so a missed load shows
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name == "ln_beta":
            value = 0.1 * rng.standard_normal(shape)
        else:
            value = _uniform(rng, fan_in[name[-1]], shape)
        params[name] = value.astype(spec.dtype)
    return params


def make_inputs(spec: AttentionSpec) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal inputs drawn from `spec.seed`.

    Returns:
        `x_q (B, Lq, d_model)` and `x_kv (B, Lk, d_kv_in)`; in self mode
        `x_kv` is `x_q`.
    """
    rng = np.random.default_rng([spec.seed, 1])
    x_q = rng.standard_normal((spec.batch, spec.len_q, spec.d_model)).astype(spec.dtype)
    if spec.mode == "self":
        return x_q, x_q
    x_kv = rng.standard_normal((spec.batch, spec.len_kv, spec.d_kv_in)).astype(spec.dtype)
    return x_q, x_kv


# -- sentences as inputs ----------------------------------------------------------

MAX_WORDS = 512  # words and marks of a sentence kept
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def tokenize(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """Words and punctuation marks, in order, at most `max_words` of them."""
    return _WORD.findall(text or "")[:max_words]


def word_vector(word: str, width: int) -> np.ndarray:
    """A standard-normal vector of `width`, fixed by the word (case-insensitive)."""
    digest = hashlib.blake2b(word.lower().encode("utf-8"), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(width)


def positional_encoding(length: int, width: int) -> np.ndarray:
    """Sinusoidal encoding `(length, width)`: sin on even columns, cos on odd."""
    pos = np.arange(length)[:, None]
    rate = 1.0 / np.power(10000.0, (2 * (np.arange(width) // 2)) / width)
    angles = pos * rate[None, :]
    return np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))


def embed(tokens: list[str], width: int, batch: int = 1, dtype: str = "float32") -> np.ndarray:
    """`(batch, len(tokens), width)`: word vectors + positions, the same for every batch item."""
    words = np.stack([word_vector(t, width) for t in tokens]) if tokens else np.zeros((0, width))
    x = words + positional_encoding(len(tokens), width)
    return np.broadcast_to(x, (batch, *x.shape)).astype(dtype)


# SmolLM2-135M (HuggingFaceTB), the Llama-family model the app runs offline: its attention sizes.
SMOLLM2_135M = {"n_layers": 30, "n_heads": 9, "n_kv_heads": 3, "head_dim": 64}


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_k: int, d_v: int, itemsize: int) -> int:
    """Bytes a decoder's KV cache grows by per token: every layer keeps each K/V head's key and value."""
    return n_layers * n_kv_heads * (d_k + d_v) * itemsize


def kv_cache_table(n_layers: int, n_heads: int, n_kv_heads: int, d_k: int, d_v: int, itemsize: int) -> dict:
    """KV-cache bytes per token for MHA (a K/V head per query head), this grouping (GQA) and MQA (one).

    Returns:
        label → bytes per token; the GQA row only when `1 < n_kv_heads < n_heads`.
    """
    rows = {f"MHA ({n_heads} K/V heads)": n_heads}
    if 1 < n_kv_heads < n_heads:
        rows[f"GQA ({n_kv_heads} K/V heads)"] = n_kv_heads
    rows["MQA (1 K/V head)"] = 1
    return {label: kv_cache_bytes(n_layers, kv, d_k, d_v, itemsize) for label, kv in rows.items()}
