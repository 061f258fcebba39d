"""Attention masks as boolean NumPy arrays: True = may attend.

attnviz has one convention. The seeds disagree (seed 000's PyTorch code keeps
positions where `mask == 1`, its TensorFlow code and seed 003 add
`mask * -1e9`, so 1 = blocked); `CONVENTIONS` and `to_convention` spell out
each framework's convention for the app's explainer.
"""

from __future__ import annotations

import numpy as np

from attnviz.spec import AttentionSpec


def causal(len_q: int, len_kv: int | None = None) -> np.ndarray:
    """Query i may attend to keys 0..i. Shape `(Lq, Lk)`."""
    len_kv = len_q if len_kv is None else len_kv
    return np.tril(np.ones((len_q, len_kv), dtype=bool))


def window(len_q: int, len_kv: int | None = None, size: int = 1) -> np.ndarray:
    """The causal sliding window (Mistral): query i may attend key j iff `i − size < j ≤ i`. Shape `(Lq, Lk)`."""
    len_kv = len_q if len_kv is None else len_kv
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]  # (Lq, Lk) = i - j
    return (offset >= 0) & (offset < size)


def padding(valid_kv_len, len_q: int, len_kv: int) -> np.ndarray:
    """Keys at positions >= valid length are padding. Shape `(B, Lq, Lk)`."""
    valid = np.atleast_1d(np.asarray(valid_kv_len))  # (B,)
    keep = np.arange(len_kv)[None, :] < valid[:, None]  # (B, Lk)
    return np.broadcast_to(keep[:, None, :], (len(valid), len_q, len_kv)).copy()


def sliding_window(len_q: int, len_kv: int, width: int, causal_only: bool = True) -> np.ndarray:
    """Query i sees keys within `width` positions (only earlier ones if causal: `window`)."""
    if causal_only:
        return window(len_q, len_kv, width)
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]  # (Lq, Lk) = i - j
    return np.abs(offset) < width


def strided(len_q: int, len_kv: int, stride: int) -> np.ndarray:
    """Sparse-Transformer-style: key j visible if (i - j) is a multiple of stride."""
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]
    return offset % stride == 0


def block_diagonal(len_q: int, len_kv: int, block: int) -> np.ndarray:
    """Queries and keys in the same block of `block` positions see each other."""
    return (np.arange(len_q)[:, None] // block) == (np.arange(len_kv)[None, :] // block)


def from_spec(spec: AttentionSpec) -> np.ndarray | None:
    """The spec's mask (its sliding window included) as bool `(B, Lq, Lk)`, or None when nothing is blocked."""
    if spec.mask == "none":
        return None
    if spec.mask == "causal" and spec.window is not None:
        mask = window(spec.len_q, spec.len_kv, spec.window)
    elif spec.mask == "causal":
        mask = causal(spec.len_q, spec.len_kv)
    elif spec.mask == "padding":
        mask = padding(spec.valid_kv_len, spec.len_q, spec.len_kv)
    else:
        mask = np.asarray(spec.custom_mask)
    return np.broadcast_to(mask, (spec.batch, spec.len_q, spec.len_kv)).copy()


def empty_rows(mask: np.ndarray | None, batch: int, len_q: int) -> np.ndarray:
    """Query rows with no allowed key: bool `(B, Lq)`."""
    if mask is None:
        return np.zeros((batch, len_q), dtype=bool)
    return ~np.asarray(mask).any(axis=-1)


# How each API reads a mask. `attend` is the value that means "may attend"; `title` names
# the convention in a panel, `code` is a short call that passes such a mask.
CONVENTIONS = {
    "attnviz / torch SDPA attn_mask (bool)": {
        "attend": True,
        "title": "attnviz · SDPA (bool)",
        "code": "F.scaled_dot_product_attention(\n    q, k, v, attn_mask=mask)",
        "meaning": "True = may attend",
    },
    "torch.nn.MultiheadAttention attn_mask / key_padding_mask (bool)": {
        "attend": False,
        "title": "torch MultiheadAttention (bool)",
        "code": "mha(x, x, x, attn_mask=~mask)",
        "meaning": "True = blocked",
    },
    "keras.layers.MultiHeadAttention attention_mask": {
        "attend": 1,
        "title": "Keras MultiHeadAttention",
        "code": "mha(x, x, attention_mask=mask)",
        "meaning": "1 = may attend",
    },
    "additive mask · −1e9 (TensorFlow tutorial style)": {
        "attend": 0,
        "title": "additive mask · −1e9",
        "code": "logits += mask * -1e9",
        "meaning": "1 = blocked",
    },
}


def to_convention(mask: np.ndarray, convention: str) -> np.ndarray:
    """Encode a True = attend mask the way `convention` expects it."""
    attend = CONVENTIONS[convention]["attend"]
    mask = np.asarray(mask, dtype=bool)
    encoded = mask if attend else ~mask
    return encoded if isinstance(attend, bool) else encoded.astype(np.int64)


def from_convention(encoded: np.ndarray, convention: str) -> np.ndarray:
    """Decode `encoded` as `convention` reads it back into True = attend."""
    attend = CONVENTIONS[convention]["attend"]
    return np.asarray(encoded) == attend


def misread(mask: np.ndarray, built_for: str, passed_to: str) -> np.ndarray:
    """The mask an API expecting `passed_to` applies when given `mask` encoded for `built_for`."""
    return from_convention(to_convention(mask, built_for), passed_to)
