"""The pieces TensorFlow's pretrained models are built from: attention with head replacement,
attention over a KV cache, LayerNorm, RMSNorm, activations. The twin of `torch_backend.blocks`,
name for name.

Shapes: T tokens, n new tokens, D hidden size, H query heads, Hkv K/V heads, Dh head width,
Lk cached keys.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnviz.backends.common import LayerKV, Replacement, RowEdit, Tap
from attnviz.backends.tf_backend.attention import MultiHeadAttention, tf
from attnviz.masks import causal
from attnviz.masks import window as sliding
from attnviz.result import Recorder

ACTIVATIONS = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
    "silu": tf.nn.silu,
}


def attend(
    attention: MultiHeadAttention,
    x: tf.Tensor,
    mask: tf.Tensor | None,
    replace: dict[int, Replacement],
    keep: Recorder | None = None,
    edit: RowEdit | None = None,
    *,
    past: LayerKV | None = None,
    start=0,
    causal: bool = False,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
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
    where, rows = tf.constant(edit.where), tf.constant(edit.rows)  # (H, T, T)
    return lambda weights: tf.where(where, rows, weights)


def replaced(
    attention: MultiHeadAttention, out: tf.Tensor, context: tf.Tensor, replace: dict[int, Replacement]
) -> tuple[tf.Tensor, tf.Tensor]:
    """`attend`'s replacement alone: `output (1, T, D)` and `context (1, H, T, Dh)` of one attention
    pass with `replace`'s heads replaced (a patching sweep applies several to one pass)."""
    if not replace:
        return out, context
    Dh, heads = attention.d_v, tf.unstack(context, axis=1)  # H × (1, T, Dh)
    for h, how in replace.items():
        new = replacement(heads[h], how)
        W_h = attention.output_proj.kernel[h * Dh : (h + 1) * Dh]  # (Dh, D), Dense (in, out)
        out = out - tf.matmul(heads[h] - new, W_h)  # (1, T, D)
        heads[h] = new
    return out, tf.stack(heads, 1)


def replacement(old: tf.Tensor, how: Replacement) -> tf.Tensor:
    """What replaces one head's output `old (1, T, Dh)`."""
    if isinstance(how, np.ndarray):
        return tf.cast(how, old.dtype)[None]  # (1, T, Dh)
    if how == "mean":
        return tf.broadcast_to(tf.reduce_mean(old, 1, keepdims=True), tf.shape(old))
    return tf.zeros_like(old)


def layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, eps: float) -> tf.Tensor:
    """LayerNorm over the last axis (biased variance)."""
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + eps) * gamma + beta


def causal_mask(T: int, window: int | None = None) -> tf.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`), and with a `window`, i − window < j
    (`attnviz.masks.window`)."""
    return tf.constant(causal(T) if window is None else sliding(T, size=window))[None]
