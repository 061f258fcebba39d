"""Float64 NumPy attention: the oracle both backends are tested against.

A pure and simplified version of the pipeline (as Keras's `nn_test.py` keeps
for dot-product attention), recording the same steps under the same names.
No dropout: compare with `training=False` or `dropout=0`.
"""

from __future__ import annotations

import numpy as np

from attnviz import masks
from attnviz.spec import AttentionSpec


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None):
    """softmax(q·kᵀ·scale)·v in float64; returns `(context, weights, steps)`.

    `q (..., Lq, Dk)`, `k (..., Lk, Dk)`, `v (..., Lk, Dv)`, mask bool
    broadcastable to `(..., Lq, Lk)`, True = may attend.
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    steps = {"scores": q @ np.swapaxes(k, -1, -2)}
    steps["scaled"] = steps["scores"] * scale
    if mask is not None:
        steps["masked"] = np.where(mask, steps["scaled"], -np.inf)
    steps["softmax"] = masked_softmax(steps["scaled"], mask)
    steps["context"] = steps["softmax"] @ v
    return steps["context"], steps["softmax"], steps


def masked_softmax(logits, mask=None) -> np.ndarray:
    """Softmax over the last axis in float64; blocked entries (mask False) get exactly 0, and a row
    with nothing allowed is all 0."""
    logits = np.asarray(logits, dtype=np.float64)
    if mask is not None:
        logits = np.where(mask, logits, -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    exp = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
    total = exp.sum(axis=-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def rope(x, base: float) -> np.ndarray:
    """Rotary position embedding of `x (..., L, D)` in float64, positions 0…L−1 (Su et al., 2021).

    Written as the rotation it is: each pair (i, i + D/2) (transformers'
    `rotate_half` layout) turned by the angle position · base^(−2i/D).
    """
    x = np.asarray(x, dtype=np.float64)
    L, D = x.shape[-2:]
    angle = np.arange(L)[:, None] * base ** (-np.arange(0, D, 2) / D)  # (L, D/2)
    first, second = x[..., : D // 2], x[..., D // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def rope_band_scores(width: int, base: float, offsets, start: int = 0) -> np.ndarray:
    """q·k after RoPE for each frequency band, against the offset between the two positions.

    For band i, q and k are the same unit vector in pair (i, i + width/2); k sits at
    position `start` and q `offset` positions later. Each score is cos(offset · base^(−2i/width)),
    whatever `start` is (tests/backends/test_modern_attention.py checks it): RoPE scores see only offsets.

    Returns:
        `(width/2, len(offsets))` scores.
    """
    offsets = np.asarray(offsets, dtype=int)
    unit = np.eye(width)[: width // 2]  # (width/2, width): band i's vector
    length = start + int(offsets.max(initial=0)) + 1
    turned = rope(np.broadcast_to(unit[:, None], (width // 2, length, width)), base)  # (bands, L, width)
    return np.einsum("bnd,bd->bn", turned[:, start + offsets], turned[:, start])


def misread_weights(
    logits, mask, built_for: str, passed_to: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a mask built for one API does when another reads it (the mask explainer).

    Args:
        logits: one head's scaled scores `(Lq, Lk)`, before any mask.
        mask: bool `(Lq, Lk)`, True = may attend.
        built_for, passed_to: names in `masks.CONVENTIONS`.

    Returns:
        `intended (Lq, Lk)` weights, the mask as applied `(Lq, Lk)`, and the weights under it.
    """
    applied = masks.misread(mask, built_for, passed_to)
    return masked_softmax(logits, mask), applied, masked_softmax(logits, applied)


def layer_norm(x, gamma, beta, eps=1e-6):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def multi_head_attention(spec: AttentionSpec, params, x_q, x_kv) -> dict[str, np.ndarray]:
    """Every step of `spec` in float64, keyed by step name (see `STEP_DOCS`)."""
    p = {name: np.asarray(a, dtype=np.float64) for name, a in params.items()}
    x_q, x_kv = np.asarray(x_q, np.float64), np.asarray(x_kv, np.float64)
    B, Lq, Lk, H, Hkv = spec.batch, spec.len_q, spec.len_kv, spec.n_heads, spec.n_kv_heads
    bias = (lambda n: p[n]) if spec.bias else (lambda n: 0.0)
    steps = {
        "q_proj": x_q @ p["W_q"] + bias("b_q"),
        "k_proj": x_kv @ p["W_k"] + bias("b_k"),
        "v_proj": x_kv @ p["W_v"] + bias("b_v"),
    }
    split = lambda t, L, n, d: t.reshape(B, L, n, d).transpose(0, 2, 1, 3)  # noqa: E731
    q = steps["q_heads"] = split(steps["q_proj"], Lq, H, spec.d_k)
    k = steps["k_heads"] = split(steps["k_proj"], Lk, Hkv, spec.d_k)
    v = steps["v_heads"] = split(steps["v_proj"], Lk, Hkv, spec.d_v)
    if spec.rope_base is not None:
        q = steps["q_rope"] = rope(q, spec.rope_base)
        k = steps["k_rope"] = rope(k, spec.rope_base)
    if Hkv != H:  # query head h reads K/V head h // (H / Hkv)
        k = steps["k_repeated"] = k[:, np.arange(H) // (H // Hkv)]
        v = steps["v_repeated"] = v[:, np.arange(H) // (H // Hkv)]
    mask = masks.from_spec(spec)
    _, _, sdpa = scaled_dot_product_attention(
        q,
        k,
        v,
        None if mask is None else mask[:, None],
        scale=spec.head_scale,
    )
    steps.update(sdpa)
    steps["merged"] = steps["context"].transpose(0, 2, 1, 3).reshape(B, Lq, H * spec.d_v)
    steps["output_proj"] = steps["merged"] @ p["W_o"] + bias("b_o")
    if spec.residual_norm:
        steps["residual_norm"] = layer_norm(x_q + steps["output_proj"], p["ln_gamma"], p["ln_beta"])
    return steps
