"""The pieces TensorFlow's pretrained models are built from: attention with head replacement,
LayerNorm, activations. The twin of `torch_backend.blocks`, name for name.

Shapes: T tokens, D hidden size, H heads, Dh head width.
"""

from __future__ import annotations

import numpy as np

from attnviz.backends.common import Replacement, Tap
from attnviz.backends.tf_backend.attention import MultiHeadAttention, tf
from attnviz.masks import causal
from attnviz.result import Recorder

ACTIVATIONS = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
}


def attend(
    attention: MultiHeadAttention,
    x: tf.Tensor,
    mask: tf.Tensor | None,
    replace: dict[int, Replacement],
    keep: Recorder | None = None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
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
    Dh, heads = attention.d_v, tf.unstack(context, axis=1)  # H × (1, T, Dh)
    for h, how in replace.items():
        new = replacement(heads[h], how)
        W_h = attention.output_proj.kernel[h * Dh : (h + 1) * Dh]  # (Dh, D), Dense (in, out)
        out = out - tf.matmul(heads[h] - new, W_h)  # (1, T, D)
        heads[h] = new
    return out, weights, tf.stack(heads, 1)


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


def causal_mask(T: int) -> tf.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`)."""
    return tf.constant(causal(T))[None]
