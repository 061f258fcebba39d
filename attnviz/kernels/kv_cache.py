"""How big a decoder's KV cache is, from its config: bytes per token and at a context length, for the
model's real K/V layout (MHA, GQA or MQA) against plain multi-head attention.

A decoder keeps every layer's keys and values for every token it has seen, one row per **K/V head**:
grouped-query attention (Ainslie et al., 2023) lets several query heads read one K/V head, so the cache
shrinks by query heads / K/V heads (SmolLM2: 9 query heads on 3 K/V heads, 3× smaller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LENGTHS = (4096, 32768)  # the context lengths the page quotes


@dataclass(frozen=True)
class KVCacheSize:
    """A decoder's KV cache size.

    Attributes:
        layers: decoder layers (each caches its own K and V).
        query_heads, kv_heads: attention heads, and the K/V heads they share (equal for MHA).
        head_dim: the width of one head's key (and value) vector.
        itemsize: bytes per cached number (4: float32, as attnviz runs; 2: float16/bfloat16).
    """

    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    itemsize: int = 4

    @property
    def layout(self) -> str:
        """'MHA', 'MQA' or 'GQA'."""
        return "MHA" if self.kv_heads == self.query_heads else "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def per_token(self) -> int:
        """Bytes one token adds: K and V × layers × K/V heads × head_dim × itemsize."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.itemsize

    @property
    def per_token_mha(self) -> int:
        """The same with one K/V head per query head (plain multi-head attention)."""
        return 2 * self.layers * self.query_heads * self.head_dim * self.itemsize

    def at(self, tokens: int, *, mha: bool = False) -> int:
        """Bytes for `tokens` cached tokens (one sequence)."""
        return tokens * (self.per_token_mha if mha else self.per_token)


def kv_cache_size(config: Any, itemsize: int = 4) -> KVCacheSize:
    """The cache of a decoder `config` (`attnviz.pretrained` configs: `num_hidden_layers`,
    `num_attention_heads`, `head_dim`, and `num_key_value_heads` where K/V heads are grouped)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", heads)
    return KVCacheSize(config.num_hidden_layers, heads, kv_heads, config.head_dim, itemsize)
