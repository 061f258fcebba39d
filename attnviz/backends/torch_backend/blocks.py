"""The pieces PyTorch's pretrained models are built from: attention with head replacement,
attention over a KV cache, LayerNorm, RMSNorm, activations. The twin of `tf_backend.blocks`,
name for name.

Shapes: T tokens, n new tokens, D hidden size, H query heads, Hkv K/V heads, Dh head width,
Lk cached keys.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.common import Replacement, RowEdit, Tap
from attnviz.backends.torch_backend.attention import (
    MultiHeadAttention,
    attention_in_place,
    rms_norm,
    rotary,
    rotate_half,
)
from attnviz.masks import causal
from attnviz.masks import window as sliding
from attnviz.result import Recorder

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def attend(
    attention: MultiHeadAttention,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    replace: dict[int, Replacement],
    keep: Recorder | None = None,
    edit: RowEdit | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-attention over `x (1, T, D)` with some heads' outputs replaced, some rows edited.

    `replace` maps a head to "zero" (its output, and so its share of the output projection,
    removed), "mean" (its output replaced by its mean over positions) or a patch `z (T, Dh)`.
    The output projection is linear, so each is exact as `out - (context_h - new_h) @ W_o[h]`.
    `edit`'s rows replace the softmax's in the attention's `after_weights` hook, before V.

    Returns:
        `output (1, T, D)`, `weights (1, H, T, T)` (those that multiplied V: `edit`'s rows in
        place, never replaced) and `context (1, H, T, Dh)`, the heads' outputs as the output
        projection received them.
    """
    tap, rows = Tap(keep), edited_rows(edit)
    out, weights = attention(x, x, mask, record=tap, after_weights=rows)
    context = tap.checked_context(bool(replace))
    out, context = replaced(attention, out, context, replace)
    return out, weights if rows is None else rows(weights), context


def edited_rows(edit: RowEdit | None) -> Callable | None:
    """The `after_weights` hook that puts `edit`'s rows in place: `weights (B, H, Lq, Lk)` → the
    same with each edited (head, query) row replaced; None for no edit."""
    if edit is None:
        return None
    where, rows = torch.from_numpy(edit.where), torch.from_numpy(edit.rows)  # (H, T, T)
    return lambda weights: torch.where(where, rows, weights)


def replaced(
    attention: MultiHeadAttention, out: torch.Tensor, context: torch.Tensor, replace: dict[int, Replacement]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`attend`'s replacement alone: `output (1, T, D)` and `context (1, H, T, Dh)` of one attention
    pass with `replace`'s heads replaced (a patching sweep applies several to one pass)."""
    if not replace:
        return out, context
    Dh, heads = attention.d_v, list(context.unbind(1))  # H × (1, T, Dh)
    for h, how in replace.items():
        new = replacement(heads[h], how)
        W_h = attention.output_proj.weight[:, h * Dh : (h + 1) * Dh]  # (D, Dh), nn.Linear (out, in)
        out = out - (heads[h] - new) @ W_h.T  # (1, T, D)
        heads[h] = new
    return out, torch.stack(heads, 1)


def replacement(old: torch.Tensor, how: Replacement) -> torch.Tensor:
    """What replaces one head's output `old (1, T, Dh)`."""
    if isinstance(how, np.ndarray):
        return torch.from_numpy(how).to(old.dtype)[None]  # (1, T, Dh)
    if how == "mean":
        return old.mean(1, keepdim=True).expand_as(old)
    return torch.zeros_like(old)


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last axis (biased variance)."""
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def attend_cached(
    attention: MultiHeadAttention,
    x: torch.Tensor,
    past_k: torch.Tensor | None,
    past_v: torch.Tensor | None,
    start: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-attention for the new positions `x (B, n, D)`, the first at position `start`, over the
    cached `past_k (1, Hkv, Lp, Dk)`, `past_v (1, Hkv, Lp, Dv)` (None: nothing cached yet) and
    their own keys and values: the decoding step (B = 1), or B runs that share the cached prefix
    (a patching sweep's).

    The same math as `MultiHeadAttention.forward` on the whole sequence, restricted to the new
    queries: K and V are kept per K/V head, after RoPE (turned at their own positions) and
    before they are repeated for the query heads.

    Returns:
        `output (B, n, D)`, the keys and values to cache, `(B, Hkv, Lp + n, Dk|Dv)`, and the new
        queries' attention weights over those keys, `(B, H, n, Lp + n)`.
    """
    B, n = x.shape[:2]
    H, Hkv, Dk, Dv = attention.n_heads, attention.n_kv_heads, attention.d_k, attention.d_v
    q = attention.query(x).view(B, n, H, Dk).transpose(1, 2)  # (B, H, n, Dk)
    k = attention.key(x).view(B, n, Hkv, Dk).transpose(1, 2)  # (B, Hkv, n, Dk)
    v = attention.value(x).view(B, n, Hkv, Dv).transpose(1, 2)  # (B, Hkv, n, Dv)
    if attention.qk_norm_eps is not None:  # QK-norm, before RoPE (Gemma 3)
        q = rms_norm(q, attention.q_norm, attention.qk_norm_eps)
        k = rms_norm(k, attention.k_norm, attention.qk_norm_eps)
    if attention.rope_base is not None:
        cos, sin = rotary(start + n, Dk, attention.rope_base, q)  # (start + n, Dk)
        cos, sin = cos[start:], sin[start:]  # (n, Dk): the new positions' angles
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    if past_k is not None:
        k = torch.cat([past_k.expand(B, -1, -1, -1), k], dim=2)  # (B, Hkv, Lk, Dk), Lk = Lp + n
        v = torch.cat([past_v.expand(B, -1, -1, -1), v], dim=2)  # (B, Hkv, Lk, Dv)
    cached = (k, v)
    first = start + n - k.shape[2]  # the position of key 0
    offset = torch.arange(start, start + n)[:, None] - torch.arange(first, start + n)  # (n, Lk): i − j
    near = offset >= 0 if attention.window is None else (offset >= 0) & (offset < attention.window)
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)  # (B, H, Lk, Dk)
        v = v.repeat_interleave(H // Hkv, dim=1)  # (B, H, Lk, Dv)
    context, weights = attention_in_place(q, k, v, near[None, None], attention.scale)  # (B, H, n, Dv|Lk)
    out = attention.output_proj(context.transpose(1, 2).reshape(B, n, H * Dv))  # (B, n, D)
    return out, *cached, weights


def causal_mask(T: int, window: int | None = None) -> torch.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`), and with a `window`, i − window < j
    (`attnviz.masks.window`)."""
    return torch.from_numpy(causal(T) if window is None else sliding(T, size=window))[None]
