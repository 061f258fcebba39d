"""The pieces PyTorch's pretrained models are built from: attention with head replacement and
edited rows (over a KV cache when given one), LayerNorm, RMSNorm, activations. The twin of `tf_backend.blocks`,
name for name.

Shapes: T tokens, n new tokens, D hidden size, H query heads, Hkv K/V heads, Dh head width,
Lk cached keys.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.common import LayerKV, Replacement, RowEdit, Tap
from attnviz.backends.torch_backend.attention import MultiHeadAttention
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
    *,
    past: LayerKV | None = None,
    start: int = 0,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-attention over `x (B, T, D)` (positions `start …`, after what `past` caches, which it
    extends) with some heads' outputs replaced, some rows edited.

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
    out, weights = attention(
        x, x, mask, past=past, start=start, causal=causal, record=tap, after_weights=rows
    )
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


def causal_mask(T: int, window: int | None = None) -> torch.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`), and with a `window`, i − window < j
    (`attnviz.masks.window`)."""
    return torch.from_numpy(causal(T) if window is None else sliding(T, size=window))[None]
