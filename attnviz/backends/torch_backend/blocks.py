"""The pieces PyTorch's pretrained models are built from: attention with head replacement,
LayerNorm, activations. The twin of `tf_backend.blocks`, name for name.

Shapes: T tokens, D hidden size, H heads, Dh head width.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.common import Replacement, Tap
from attnviz.backends.torch_backend.attention import MultiHeadAttention
from attnviz.masks import causal
from attnviz.result import Recorder

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


def attend(
    attention: MultiHeadAttention,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    replace: dict[int, Replacement],
    keep: Recorder | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Self-attention over `x (1, T, D)` with some heads' outputs replaced.

    `replace` maps a head to "zero" (its output, and so its share of the output projection,
    removed), "mean" (its output replaced by its mean over positions) or a patch `z (T, Dh)`.
    The output projection is linear, so each is exact as `out - (context_h - new_h) @ W_o[h]`.

    Returns:
        `output (1, T, D)`, `weights (1, H, T, T)` (never replaced) and `context (1, H, T, Dh)`,
        the heads' outputs as the output projection received them.
    """
    tap = Tap(keep)
    out, weights = attention(x, x, mask, record=tap)
    context = tap.checked_context(bool(replace))
    if not replace:
        return out, weights, context
    Dh, heads = attention.d_v, list(context.unbind(1))  # H × (1, T, Dh)
    for h, how in replace.items():
        new = replacement(heads[h], how)
        W_h = attention.output_proj.weight[:, h * Dh : (h + 1) * Dh]  # (D, Dh), nn.Linear (out, in)
        out = out - (heads[h] - new) @ W_h.T  # (1, T, D)
        heads[h] = new
    return out, weights, torch.stack(heads, 1)


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


def causal_mask(T: int) -> torch.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`)."""
    return torch.from_numpy(causal(T))[None]
