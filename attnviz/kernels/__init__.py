"""Attention algorithms replayed step by step, on real numbers: FlashAttention's tiles (`tiles`) and the
KV cache's size (`kv_cache`).

`tiled_attention(q, k, v, *, block_q, block_k, causal=False, framework="torch")` runs the FlashAttention
forward in the chosen framework (its math twice, `torch_tiles.py` and `tf_tiles.py`, imported on first use)
and returns the output, every tile's running max and denominator, and the pass's working memory.
Importing this package imports no framework.
"""

from attnviz.kernels.kv_cache import KVCacheSize, kv_cache_size
from attnviz.kernels.tiles import Memory, Tile, TiledAttention, tiled_attention

__all__ = ["KVCacheSize", "Memory", "Tile", "TiledAttention", "kv_cache_size", "tiled_attention"]
