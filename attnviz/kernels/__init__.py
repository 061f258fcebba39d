"""Attention algorithms replayed step by step, on real numbers: FlashAttention's tiles (`tiles`), the
KV cache's size (`kv_cache`) and decoding over it (`decoding`).

`tiled_attention(q, k, v, *, block_q, block_k, causal=False, framework="torch")` runs the FlashAttention
forward in the chosen framework (its math twice, `torch_tiles.py` and `tf_tiles.py`, imported on first use)
and returns the output, every tile's running max and denominator, and the pass's working memory.
`kv_bytes(config, tokens)` is what a decoder's cache holds after `tokens` positions.
`decoding.trace` / `decoding.time_per_token` run a loaded checkpoint's cached step (import
`attnviz.kernels.decoding` for them: it reads `attnviz.pretrained`).
Importing this package imports no framework.
"""

from attnviz.kernels.kv_cache import KVCacheSize, kv_bytes, kv_cache_size
from attnviz.kernels.tiles import Memory, Tile, TiledAttention, tiled_attention

__all__ = ["KVCacheSize", "Memory", "Tile", "TiledAttention", "kv_bytes", "kv_cache_size", "tiled_attention"]
