"""How big a decoder's KV cache is, from its config: bytes per token and at a context length, for the
model's real K/V layout (MHA, GQA or MQA) against plain multi-head attention.

A decoder keeps every layer's keys and values for every token it has seen, one row per **K/V head**:
grouped-query attention (Ainslie et al., 2023) lets several query heads read one K/V head, so the cache
shrinks by query heads / K/V heads (SmolLM2: 9 query heads on 3 K/V heads, 3× smaller; Gemma 3 270M:
4 on 1, multi-query attention). A sliding-window layer (Gemma 3's local layers, Beltagy et al., 2020)
keeps only its last `window` tokens, so past the window it adds nothing per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import SpecError

LENGTHS = (4096, 32768)  # the context lengths the page quotes


@dataclass(frozen=True)
class KVCacheSize:
    """A decoder's KV cache size.

    Attributes:
        layers: decoder layers (each caches its own K and V).
        query_heads, kv_heads: attention heads, and the K/V heads they share (equal for MHA).
        head_dim: the width of one head's key (and value) vector.
        itemsize: bytes per cached number (4: float32, as attnviz runs; 2: float16/bfloat16).
        windows: each layer's sliding window (None: every token), or () when no layer has one.
    """

    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    itemsize: int = 4
    windows: tuple[int | None, ...] = ()

    @property
    def layout(self) -> str:
        """'MHA', 'MQA' or 'GQA'."""
        return "MHA" if self.kv_heads == self.query_heads else "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def per_token(self) -> int:
        """Bytes one token adds while no window is full: K and V × layers × K/V heads × head_dim ×
        itemsize."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.itemsize

    @property
    def per_token_mha(self) -> int:
        """The same with one K/V head per query head (plain multi-head attention)."""
        return 2 * self.layers * self.query_heads * self.head_dim * self.itemsize

    def at(self, tokens: int, *, mha: bool = False) -> int:
        """Bytes for `tokens` cached tokens (one sequence); a window layer holds at most its window."""
        per_layer = (self.per_token_mha if mha else self.per_token) // self.layers  # one layer, one token
        windows = self.windows or (None,) * self.layers
        return sum(per_layer * (tokens if w is None else min(tokens, w)) for w in windows)


def layer_windows(config: Any) -> tuple[int | None, ...]:
    """Each layer's sliding window from a config that has local layers (`is_local(layer)` and
    `sliding_window`, Gemma 3), else ()."""
    if not hasattr(config, "is_local"):
        return ()
    return tuple(
        config.sliding_window if config.is_local(i) else None for i in range(config.num_hidden_layers)
    )


def kv_cache_size(config: Any, itemsize: int = 4) -> KVCacheSize:
    """The cache of a decoder `config` (`attnviz.pretrained` configs: `num_hidden_layers`,
    `num_attention_heads`, `head_dim`, and `num_key_value_heads` where K/V heads are grouped,
    `is_local` / `sliding_window` where layers have a window)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", heads)
    return KVCacheSize(
        config.num_hidden_layers, heads, kv_heads, config.head_dim, itemsize, layer_windows(config)
    )


def kv_bytes(config: Any, tokens: int, dtype_bytes: int = 4, *, mha: bool = False) -> int:
    """The bytes a `KVCache` of decoder `config` holds after `tokens` positions (`KVCache.nbytes`),
    with the model's real K/V layout, or with one K/V head per query head (`mha`).

    `kv_bytes(config, 1)` is the bytes per token; `LENGTHS` are the lengths a page quotes.

    Raises:
        SpecError: `tokens` is not an integer ≥ 0, or `dtype_bytes` not 1, 2, 4 or 8.
    """
    if not (_is_int(tokens) and tokens >= 0):
        raise SpecError("tokens", tokens, "an integer ≥ 0 (cached positions)")
    if not (_is_int(dtype_bytes) and dtype_bytes in (1, 2, 4, 8)):
        raise SpecError("dtype_bytes", dtype_bytes, "1, 2, 4 or 8 (bytes per cached number)")
    return kv_cache_size(config, int(dtype_bytes)).at(int(tokens), mha=mha)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)
