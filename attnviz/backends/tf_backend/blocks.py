"""The pieces TensorFlow's pretrained models are built from: attention with head replacement,
attention over a KV cache, LayerNorm, RMSNorm, activations. The twin of `torch_backend.blocks`,
name for name.

Shapes: T tokens, n new tokens, D hidden size, H query heads, Hkv K/V heads, Dh head width,
Lk cached keys.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnviz.backends.common import Replacement, RowEdit, Tap
from attnviz.backends.tf_backend.attention import (
    MultiHeadAttention,
    linear,
    rms_norm,
    rotary,
    rotate_half,
    scaled_dot_product_attention,
    tf,
)
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
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
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


def attend_cached(
    attention: MultiHeadAttention,
    x: tf.Tensor,
    past_k: tf.Tensor | None,
    past_v: tf.Tensor | None,
    start: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Self-attention for the new positions `x (B, n, D)`, the first at position `start`, over the
    cached `past_k (1, Hkv, Lp, Dk)`, `past_v (1, Hkv, Lp, Dv)` (None: nothing cached yet) and
    their own keys and values: the decoding step (B = 1), or B runs that share the cached prefix
    (a patching sweep's).

    The same math as `MultiHeadAttention.call` on the whole sequence, restricted to the new
    queries: K and V are kept per K/V head, after RoPE (turned at their own positions) and
    before they are repeated for the query heads. Written for a graph (`tf.function`): lengths
    are tensors.

    Returns:
        `output (B, n, D)`, the keys and values to cache, `(B, Hkv, Lp + n, Dk|Dv)`, and the new
        queries' attention weights over those keys, `(B, H, n, Lp + n)`.
    """
    # B is known when traced; n when eager, where a known length reads the cached rotary table
    B, n = x.shape[0], x.shape[1] or tf.shape(x)[1]
    H, Hkv, Dk, Dv = attention.n_heads, attention.n_kv_heads, attention.d_k, attention.d_v
    q = tf.transpose(tf.reshape(linear(x, attention.query), (B, n, H, Dk)), (0, 2, 1, 3))  # (B, H, n, Dk)
    k = tf.transpose(tf.reshape(linear(x, attention.key), (B, n, Hkv, Dk)), (0, 2, 1, 3))  # (B, Hkv, n, Dk)
    v = tf.transpose(tf.reshape(linear(x, attention.value), (B, n, Hkv, Dv)), (0, 2, 1, 3))  # (B, Hkv, n, Dv)
    if attention.qk_norm_eps is not None:  # QK-norm, before RoPE (Gemma 3)
        q = rms_norm(q, attention.q_norm, attention.qk_norm_eps)
        k = rms_norm(k, attention.k_norm, attention.qk_norm_eps)
    if attention.rope_base is not None:
        cos, sin = rotary(start + n, Dk, attention.rope_base, q)  # (start + n, Dk)
        cos, sin = cos[start:], sin[start:]  # (n, Dk): the new positions' angles
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
    if past_k is not None:
        k = tf.concat([tf.tile(past_k, (B, 1, 1, 1)), k], axis=2)  # (B, Hkv, Lk, Dk), Lk = Lp + n
        v = tf.concat([tf.tile(past_v, (B, 1, 1, 1)), v], axis=2)  # (B, Hkv, Lk, Dv)
    cached = (k, v)
    first = start + n - tf.shape(k)[2]  # the position of key 0
    offset = tf.range(start, start + n)[:, None] - tf.range(first, start + n)[None, :]  # (n, Lk): i − j
    near = offset >= 0 if attention.window is None else (offset >= 0) & (offset < attention.window)
    if Hkv != H:
        serves = tf.range(H) // (H // Hkv)  # query head h reads K/V head h // r (tf.repeat: ~15 eager ops)
        k = tf.gather(k, serves, axis=1)  # (B, H, Lk, Dk)
        v = tf.gather(v, serves, axis=1)  # (B, H, Lk, Dv)
    context, weights = scaled_dot_product_attention(
        q, k, v, near[None, None], scale=attention.scale
    )  # (B, H, n, Dv), (B, H, n, Lk)
    merged = tf.reshape(tf.transpose(context, (0, 2, 1, 3)), (B, n, H * Dv))  # (B, n, H*Dv)
    return linear(merged, attention.output_proj), *cached, weights  # (B, n, D)


def causal_mask(T: int, window: int | None = None) -> tf.Tensor:
    """`(1, T, T)`: key j ≤ query i (`attnviz.masks.causal`), and with a `window`, i − window < j
    (`attnviz.masks.window`)."""
    return tf.constant(causal(T) if window is None else sliding(T, size=window))[None]
