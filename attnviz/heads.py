"""Interpretable heads: hand-built W_Q / W_K whose attention pattern is known before the run.

Random weights give near-uniform maps; trained models learn a few recognisable
heads (Clark et al., 2019, "What Does BERT Look At?"; Olsson et al., 2022, on
previous-token heads; Xiao et al., 2023, on attention sinks). `build` writes
four of them by hand, so a small example in the explorer means something:

    head h shows PATTERNS[h % 4]:
      "previous token"  query i attends to key i − 1
      "same position"   query i attends to key i (itself: its position, not equal words —
                        a repeated word at another position gets nothing)
      "first token"     every query attends to key 0 (an "attention sink")
      "window"          query i attends to keys i − 2 … i + 2, nearest most

Attention on random content can only be positional if the input carries
position, so the input is `[content | position code]`: the last 3 features of
every token are `p_i = (1, cos θi, sin θi)` with `θ = π / L` (L the longer
sequence), a point on a half circle plus a constant. W_Q and W_K read only
those 3 features (their content rows are 0, so content never moves attention),
each head in its first 2 of `d_k` columns:

    k_j = a · (cos θj, sin θj)                          every head
    q_i = a · (cos θi, sin θi)                          same position, window
    q_i = a · (cos θ(i−1), sin θ(i−1)) = a · R(−θ) q    previous token: a shift by one
                                                        position is a fixed rotation
    q_i = a · (1, 0)                                    first token: the code of position 0,
                                                        read from the constant feature

so the scaled score is `c · cos(θ(i − j − shift))` (`c = a² · scale`), largest
exactly at the target key. θ ≤ π / L keeps every other key at least one step of
the circle away: `c = ln(199 (L − 1)) / (1 − cos θ)` then gives the target at
least 0.995 of each row's weight (0.99 after float32 rounding), whatever the content (a sharp head needs
large scores: about 7,000 at L = 64). The window head's `c` is the smallest
that keeps at least 0.955 of every row (0.95 after float32 rounding) within |i − j| ≤ 2 (with or without a
causal mask), so its band is as wide as that allows. W_V, W_O and the other
parameters are `init_params(spec)`'s; `b_q` and `b_k` are 0.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.errors import SpecError
from attnviz.params import init_params
from attnviz.spec import AttentionSpec

PATTERNS: tuple[str, ...] = ("previous token", "same position", "first token", "window")
CODE_WIDTH = 3  # features carrying the position: (1, cos θi, sin θi)
MIN_WIDTH = CODE_WIDTH + 1  # at least one feature of content left
WINDOW = 2  # the window head: keys i − WINDOW … i + WINDOW
SHARP = 0.995  # weight on the target key the sharp heads are built for (≥ 0.99 in float32)
WINDOW_SHARE = 0.955  # weight within the window the window head is built for (≥ 0.95 in float32)


def panel_titles(n_heads: int) -> list[str]:
    """A title per head naming the pattern it shows: "head 0: previous token", …"""
    return [f"head {h}: {PATTERNS[h % len(PATTERNS)]}" for h in range(n_heads)]


def position_code(length: int, period_len: int) -> np.ndarray:
    """`(length, 3)`: `(1, cos θi, sin θi)` for positions i, `θ = π / period_len`."""
    angle = np.arange(length) * (math.pi / period_len)
    return np.column_stack([np.ones(length), np.cos(angle), np.sin(angle)])


def _check(spec: AttentionSpec) -> None:
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"spec: got {type(spec).__name__}; allowed: an attnviz.AttentionSpec.")
    if spec.d_k < 2:
        raise SpecError(
            "d_k", spec.d_k, "at least 2 for interpretable heads (a query is a point on a circle)"
        )
    if spec.rope_base is not None:
        raise SpecError(
            "rope_base",
            spec.rope_base,
            "None for interpretable heads (their positions are written into the features; RoPE would turn them)",
        )
    if spec.d_model < MIN_WIDTH:
        raise SpecError(
            "d_model",
            spec.d_model,
            f"at least {MIN_WIDTH} for interpretable heads ({CODE_WIDTH} features carry the position)",
        )
    if spec.mode == "cross":
        if spec.d_kv_in < MIN_WIDTH:
            raise SpecError(
                "d_kv_in",
                spec.d_kv_in,
                f"at least {MIN_WIDTH} for interpretable heads ({CODE_WIDTH} features carry the position)",
            )
        if spec.len_kv != spec.len_q:
            raise SpecError(
                "len_kv",
                spec.len_kv,
                f"len_q = {spec.len_q} for interpretable heads in cross mode (query i is matched with key i)",
            )


def _with_code(name: str, x, shape: tuple[int, ...], code: np.ndarray, dtype: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.shape != shape:
        raise ValueError(f"{name}: got an array of shape {arr.shape}; allowed: shape {shape}.")
    out = np.array(arr, dtype=dtype)  # a copy: the caller's content stays as it was
    out[..., -CODE_WIDTH:] = code  # (B, L, 3) ← (L, 3)
    return out


def _sharp_c(theta: float, n_keys: int) -> float:
    """Scaled-score amplitude that gives the target ≥ SHARP of the row (see the module docstring)."""
    odds = SHARP / (1 - SHARP)
    return math.log(odds * max(n_keys - 1, 1)) / (1 - math.cos(theta))


def _window_share(c: float, theta: float, length: int) -> float:
    """The smallest share of a row within the window, over rows, with and without a causal mask."""
    d = np.arange(length)[:, None] - np.arange(length)[None, :]  # (L, L) = i − j
    logits = c * (np.cos(theta * d) - 1.0)
    inside = np.abs(d) <= WINDOW
    worst = 1.0
    for allowed in (np.ones_like(inside), d >= 0):
        w = np.where(allowed, np.exp(logits), 0.0)
        worst = min(worst, float(((w * inside).sum(1) / w.sum(1)).min()))
    return worst


def _window_c(theta: float, length: int) -> float:
    """The smallest amplitude (the widest band) that keeps ≥ WINDOW_SHARE within the window (bisection)."""
    lo, hi = 0.0, 1.0
    while _window_share(hi, theta, length) < WINDOW_SHARE:
        hi *= 2
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _window_share(mid, theta, length) >= WINDOW_SHARE else (mid, hi)
    return hi


def _head_maps(theta: float) -> dict[str, np.ndarray]:
    """Pattern → `(3, 2)` map from the code `(1, cos θi, sin θi)` to the query (x @ W layout)."""
    c, s = math.cos(theta), math.sin(theta)
    circle = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    return {
        "previous token": np.array([[0.0, 0.0], [c, -s], [s, c]]),  # R(−θ): code of i − 1
        "same position": circle,
        "first token": np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),  # (1, 0): code of 0
        "window": circle,
    }


def build(
    spec: AttentionSpec, x_q: np.ndarray, x_kv: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Parameters whose head h shows `PATTERNS[h % 4]`, and the inputs with position written in.

    Args:
        spec: the computation; needs `d_k ≥ 2`, `d_model ≥ 4` (and `d_kv_in ≥ 4`,
            `len_kv == len_q` in cross mode).
        x_q: `(B, Lq, d_model)` content (random or embedded words).
        x_kv: `(B, Lk, d_kv_in)`; in self mode `x_q` itself.

    Returns:
        `params` (the keys and shapes of `param_shapes(spec)`, in `spec.dtype`),
        `x_q` and `x_kv` as copies whose last 3 features are the position code
        (in self mode `x_kv` is the returned `x_q`).

    Raises:
        SpecError: the spec cannot host the heads (its `field` names the control).
        ValueError: an input of the wrong shape.
    """
    _check(spec)
    L = max(spec.len_q, spec.len_kv)
    theta = math.pi / L
    q_in = _with_code(
        "x_q", x_q, (spec.batch, spec.len_q, spec.d_model), position_code(spec.len_q, L), spec.dtype
    )
    if spec.mode == "self":
        kv_in = q_in
    else:
        shape = (spec.batch, spec.len_kv, spec.d_kv_in)
        kv_in = _with_code("x_kv", x_kv, shape, position_code(spec.len_kv, L), spec.dtype)

    params = {name: np.array(value, dtype=np.float64) for name, value in init_params(spec).items()}
    params["W_q"][:] = 0.0
    params["W_k"][:] = 0.0
    if spec.bias:
        params["b_q"][:] = 0.0
        params["b_k"][:] = 0.0
    maps = _head_maps(theta)
    amplitude = {p: _sharp_c(theta, spec.len_kv) for p in PATTERNS}
    amplitude["window"] = _window_c(theta, L)
    circle = maps["same position"]
    group = spec.n_heads // spec.n_kv_heads  # query heads reading one K/V head (1 unless grouped)
    for h in range(spec.n_heads):
        pattern = PATTERNS[h % len(PATTERNS)]
        g = h // group  # the K/V head that query head h reads: its keys are the circle times a_k
        shared = max(amplitude[PATTERNS[j % len(PATTERNS)]] for j in range(g * group, (g + 1) * group))
        a_k = math.sqrt(shared / spec.head_scale)
        a = amplitude[pattern] / (spec.head_scale * a_k) if a_k else 0.0  # score = a · a_k · scale · cos(…)
        cols = slice(h * spec.d_k, h * spec.d_k + 2)  # the head's first 2 of d_k columns
        params["W_q"][-CODE_WIDTH:, cols] = a * maps[pattern]
        params["W_k"][-CODE_WIDTH:, g * spec.d_k : g * spec.d_k + 2] = a_k * circle
    return {name: value.astype(spec.dtype) for name, value in params.items()}, q_in, kv_in


def targets(pattern: str, len_q: int, len_kv: int) -> np.ndarray:
    """Bool `(Lq, Lk)`: the keys each query of `pattern` should attend to (rows with none are not scored)."""
    d = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]  # i − j
    return {
        "previous token": d == 1,
        "same position": d == 0,
        "first token": np.broadcast_to(np.arange(len_kv)[None, :] == 0, d.shape),
        "window": np.abs(d) <= WINDOW,
    }[pattern]


def check(weights: np.ndarray) -> list[dict]:
    """How well each head shows its pattern.

    Args:
        weights: `(H, Lq, Lk)` attention weights of one batch item.

    Returns:
        Per head: `head`, `pattern` (`PATTERNS[h % 4]`), `score` (the smallest
        share of a row's weight on the pattern's keys, over the rows that have
        such a key; None when none has) and `rows` (how many rows were scored).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 3:
        raise ValueError(f"weights: got an array of shape {weights.shape}; allowed: (H, Lq, Lk).")
    H, Lq, Lk = weights.shape
    out = []
    for h in range(H):
        pattern = PATTERNS[h % len(PATTERNS)]
        target = targets(pattern, Lq, Lk)
        rows = target.any(axis=1)
        share = (weights[h] * target).sum(axis=1)[rows]
        out.append(
            {
                "head": h,
                "pattern": pattern,
                "score": float(share.min()) if rows.any() else None,
                "rows": int(rows.sum()),
            }
        )
    return out
