"""`run_attention`: one spec, one framework, one device → an `AttentionResult`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz import masks
from attnviz.frameworks import backend, check_device, check_framework
from attnviz.params import init_params, make_inputs, param_shapes
from attnviz.result import AttentionResult
from attnviz.spec import AttentionSpec

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes; run_attention(memory_budget=...) adjusts it


def estimate_bytes(spec: AttentionSpec, capture: bool = True) -> int:
    """Bytes a run of `spec` holds at its peak, counted from the shapes.

    Counts parameters, inputs, projections, the `(B, H, Lq, Lk)` score-sized
    tensors alive at once, and — with `capture` — a NumPy copy of every step.
    """
    B, H, Lq, Lk = spec.batch, spec.n_heads, spec.len_q, spec.len_kv
    hk, hv = H * spec.d_k, H * spec.d_v
    n_params = sum(int(np.prod(s)) for s in param_shapes(spec).values())
    inputs = B * (Lq * spec.d_model + Lk * spec.d_kv_in)
    projections = 2 * B * (Lq * hk + Lk * hk + Lk * hv)  # projected, then split
    per_grid = B * H * Lq * Lk
    n_grids = 3 + (spec.mask != "none") + (spec.training and spec.dropout > 0)
    tail = B * Lq * (H * spec.d_v * 2 + spec.d_model * 2)
    total = n_params + inputs + projections + n_grids * per_grid + tail
    if capture:
        total *= 2  # every recorded step is copied out once
    mask_bytes = per_grid // H if spec.mask != "none" else 0
    return int(total * spec.itemsize + mask_bytes)


def check_budget(spec: AttentionSpec, capture: bool, memory_budget: int) -> None:
    need = estimate_bytes(spec, capture)
    if need > memory_budget:
        raise ValueError(
            f"spec: this configuration needs about {need / 2**20:,.0f} MiB "
            f"(batch={spec.batch} × heads={spec.n_heads} × len_q={spec.len_q} × "
            f"len_kv={spec.len_kv}{', with every step captured' if capture else ''}), "
            f"over the memory budget of {memory_budget / 2**20:,.0f} MiB; allowed: "
            "shorter sequences, fewer heads or a smaller batch"
            + (", or capture=False" if capture else "")
            + " (or raise memory_budget)."
        )


def _checked_array(name: str, value, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise ValueError(f"{name}: got an array of shape {arr.shape}; allowed: shape {shape}.")
    if not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise ValueError(f"{name}: got non-finite or non-numeric values; allowed: finite numbers.")
    return np.ascontiguousarray(arr, dtype=dtype)


def _inputs(spec, x_q, x_kv) -> tuple[np.ndarray, np.ndarray]:
    if x_q is None and x_kv is None:
        return make_inputs(spec)
    if x_q is None:
        raise ValueError("x_q: got None while x_kv was given; allowed: give x_q, or neither.")
    x_q = _checked_array("x_q", x_q, (spec.batch, spec.len_q, spec.d_model), spec.dtype)
    if spec.mode == "self":
        if x_kv is not None:
            raise ValueError("x_kv: got an array in self mode; allowed: None (keys come from x_q).")
        return x_q, x_q
    if x_kv is None:
        raise ValueError("x_kv: got None in cross mode; allowed: an array (B, len_kv, d_kv_in).")
    return x_q, _checked_array("x_kv", x_kv, (spec.batch, spec.len_kv, spec.d_kv_in), spec.dtype)


def _params(spec, params) -> dict[str, np.ndarray]:
    if params is None:
        return init_params(spec)
    expected = param_shapes(spec)
    if set(params) != set(expected):
        raise ValueError(f"params: got keys {sorted(params)}; allowed: exactly {sorted(expected)}.")
    return {k: _checked_array(f"params[{k!r}]", params[k], s, spec.dtype) for k, s in expected.items()}


def run_attention(
    spec: AttentionSpec,
    framework: str = "torch",
    device: str = "cpu",
    *,
    x_q: np.ndarray | None = None,
    x_kv: np.ndarray | None = None,
    params: dict[str, np.ndarray] | None = None,
    capture: bool = True,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> AttentionResult:
    """Run attnviz's multi-head attention for `spec` in `framework`.

    Args:
        spec: what to compute.
        framework: "torch" | "tensorflow".
        device: "cpu" | "gpu" | "auto" (the GPU when the framework sees one).
        x_q: `(B, Lq, d_model)`; None → `make_inputs(spec)`.
        x_kv: `(B, Lk, d_kv_in)` in cross mode; None in self mode.
        params: as from `init_params(spec)`; None → `init_params(spec)`.
        capture: record every step (False: the fast path, same numbers).
        memory_budget: bytes; larger configurations are refused up front.

    Returns:
        An `AttentionResult`.

    Raises:
        ValueError: bad framework, device, arrays, or over the memory budget.
    """
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"spec: got {type(spec).__name__}; allowed: an attnviz.AttentionSpec.")
    check_framework(framework)
    check_device(device)
    check_budget(spec, capture, memory_budget)
    x_q, x_kv = _inputs(spec, x_q, x_kv)
    params = _params(spec, params)
    mask = masks.from_spec(spec)
    raw = backend(framework).run(spec, params, x_q, x_kv, mask, device=device, capture=capture)
    return AttentionResult(
        framework=framework, empty_rows=masks.empty_rows(mask, spec.batch, spec.len_q), **raw
    )


@dataclass(frozen=True)
class Timing:
    """Steady-state time of the fast path (`capture=False`), warm.

    Attributes:
        median_s, p25_s, p75_s: over `repeats` timed calls, after `warmup` untimed ones.
        first_s: the first call of this measurement (framework start-up and layer
            building included when it was the process's first).
        repeats: how many calls were timed.
    """

    median_s: float
    p25_s: float
    p75_s: float
    first_s: float
    repeats: int

    @property
    def label(self) -> str:
        return f"median of {self.repeats} warm calls, fast path (no step capture), device synchronised"


def time_attention(
    spec: AttentionSpec,
    framework: str = "torch",
    device: str = "cpu",
    *,
    x_q=None,
    x_kv=None,
    params=None,
    warmup: int = 2,
    repeats: int = 7,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Timing:
    """Steady-state forward time of `spec` through `run_attention(..., capture=False)`.

    The same measurement `python -m attnviz.bench` makes for its attnviz rows
    (first call apart, warm-up, median of timed calls), so a time the app
    shows can be checked against the benchmark.
    """
    kwargs = {"x_q": x_q, "x_kv": x_kv, "params": params, "capture": False, "memory_budget": memory_budget}
    times = [run_attention(spec, framework, device, **kwargs).elapsed_s for _ in range(1 + warmup + repeats)]
    p25, median, p75 = np.percentile(times[1 + warmup :], [25, 50, 75])
    return Timing(float(median), float(p25), float(p75), times[0], repeats)
