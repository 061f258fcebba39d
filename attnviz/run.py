"""`run_attention`: one spec, one framework, one device → an `AttentionResult`.

The plumbing, written once for every framework: checks, the memory budget,
inputs and parameters, the device, a layer per configuration (built once,
kept in a small cache, its parameters loaded each call), the recorder, the
clock. The math lives in each framework's backend module
(`attnviz.backends.Backend`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from attnviz import formats, masks
from attnviz.cache import MIB, ByteCache
from attnviz.errors import BudgetError, SpecError
from attnviz.frameworks import backend, check_device, check_framework, step_code
from attnviz.params import init_params, make_inputs, param_shapes
from attnviz.result import AttentionResult, Recorder
from attnviz.spec import AttentionSpec

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes; run_attention(memory_budget=...) adjusts it
DTYPE_MAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}


def estimate_bytes(spec: AttentionSpec, capture: bool = True) -> int:
    """Bytes a run of `spec` holds at its peak, counted from the shapes.

    Counts parameters, inputs, projections (and their per-head, rotated and
    repeated copies), the
    `(B, H, Lq, Lk)` score-sized grids alive at once — three in either
    framework (the live grid, the next one being written, and the weights
    handed back), one more with dropout — the output, and with `capture` a
    NumPy copy of every step. The allocator's slack is covered by a 25 %
    margin; `tests/backends/test_memory.py` checks the estimate against the peak
    resident memory measured in both frameworks.
    """
    B, H, Lq, Lk = spec.batch, spec.n_heads, spec.len_q, spec.len_kv
    hk, hv = H * spec.d_k, H * spec.d_v
    kvk, kvv = spec.n_kv_heads * spec.d_k, spec.n_kv_heads * spec.d_v
    n_params = sum(int(np.prod(s)) for s in param_shapes(spec).values())
    inputs = B * (Lq * spec.d_model + Lk * spec.d_kv_in)
    projections = 2 * B * (Lq * hk + Lk * kvk + Lk * kvv)  # projected, then split
    if spec.rope_base is not None:  # q and k turned: new tensors
        projections += B * (Lq * hk + Lk * kvk)
    if spec.n_kv_heads != H:  # K and V repeated for every query head
        projections += B * Lk * (hk + hv)
    per_grid = B * H * Lq * Lk
    n_grids = 3 + (spec.training and spec.dropout > 0)
    tail = B * Lq * (hv * 2 + spec.d_model * 2)
    total = n_params + inputs + projections + n_grids * per_grid + tail
    if capture:  # every recorded step is copied out once
        total += n_params + projections + (4 + (spec.mask != "none")) * per_grid + tail
    mask_bytes = 2 * B * Lq * Lk if spec.mask != "none" else 0  # the mask and its negation, 1 byte each
    return int(1.25 * (total * spec.itemsize + mask_bytes))


def check_budget(spec: AttentionSpec, capture: bool, memory_budget: int) -> None:
    """Refuse `spec` before anything is allocated when it needs more than `memory_budget` bytes."""
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, Real) or not memory_budget > 0:
        raise SpecError("memory_budget", memory_budget, "a number of bytes > 0 (float('inf') for no limit)")
    need = estimate_bytes(spec, capture)
    if need > memory_budget:
        raise BudgetError(
            f"spec: this configuration needs about {formats.size(need)} "
            f"(batch={spec.batch} × heads={spec.n_heads} × len_q={spec.len_q} × "
            f"len_kv={spec.len_kv}{', with every step captured' if capture else ''}), "
            f"over the memory budget of {formats.size(memory_budget)}; allowed: "
            "shorter sequences, fewer heads or a smaller batch"
            + (", or capture=False" if capture else "")
            + " (or raise memory_budget).",
            need,
            memory_budget,
        )


# -- inputs and parameters ----------------------------------------------------------------


def _norm(a: np.ndarray) -> float:
    """The Frobenius norm, in the array's own dtype (BLAS, no copy): inf or NaN when a value is."""
    return float(np.linalg.norm(a.reshape(-1)))


def _checked_array(name: str, value, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """`value` as a C-contiguous `dtype` array of `shape`, finite after the cast."""
    allowed = f"a real, finite array of shape {shape}"
    if getattr(value, "requires_grad", False) is True:  # a framework tensor in an autograd graph
        raise SpecError(
            name,
            None,
            f"{allowed}, e.g. a NumPy array (pass `tensor.detach().cpu().numpy()`: a run records no gradients)",
            value_text=f"a {type(value).__name__} that requires grad",
        )
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        raise SpecError(
            name, None, allowed, value_text="a ragged sequence (rows of different lengths)"
        ) from None
    except (TypeError, RuntimeError):  # e.g. a tensor on a GPU
        raise SpecError(
            name,
            None,
            f"{allowed}, e.g. a NumPy array",
            value_text=f"a {type(value).__name__} NumPy cannot read",
        ) from None
    if arr.dtype.kind not in "biuf":
        raise SpecError(name, None, allowed, value_text=f"an array of dtype {arr.dtype}")
    if arr.shape != shape:
        raise SpecError(name, None, allowed, value_text=f"an array of shape {arr.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = np.ascontiguousarray(arr, dtype=dtype)
        finite = np.isfinite(_norm(cast)) or bool(np.isfinite(cast).all())  # a finite norm: every value is
    if not finite:
        raise SpecError(
            name,
            None,
            f"{allowed}, each value within ±{DTYPE_MAX[dtype]:.3g} (the {dtype} range)",
            value_text="non-finite values"
            + (" after the cast to " + dtype if np.isfinite(arr).all() else ""),
        )
    return cast


def _inputs(spec: AttentionSpec, x_q, x_kv) -> tuple[np.ndarray, np.ndarray]:
    if x_q is None and x_kv is None:
        return make_inputs(spec)
    if x_q is None:
        raise SpecError("x_q", None, "an array (B, len_q, d_model) when x_kv is given, or neither")
    same = x_kv is x_q
    x_q = _checked_array("x_q", x_q, (spec.batch, spec.len_q, spec.d_model), spec.dtype)
    if spec.mode == "self":
        if x_kv is None or same:
            return x_q, x_q
        x_kv = _checked_array("x_kv", x_kv, (spec.batch, spec.len_kv, spec.d_kv_in), spec.dtype)
        if not np.array_equal(x_kv, x_q):
            raise SpecError(
                "x_kv",
                None,
                "None or x_q itself in self mode (keys and values come from x_q); "
                "for a second sequence use AttentionSpec(mode='cross', ...)",
                value_text="an array different from x_q",
            )
        return x_q, x_q
    if x_kv is None:
        raise SpecError("x_kv", None, "an array (B, len_kv, d_kv_in) in cross mode")
    return x_q, _checked_array("x_kv", x_kv, (spec.batch, spec.len_kv, spec.d_kv_in), spec.dtype)


def _params(spec: AttentionSpec, params) -> dict[str, np.ndarray]:
    if params is None:
        return init_params(spec)
    expected = param_shapes(spec)
    if not isinstance(params, dict) or set(params) != set(expected):
        got = sorted(params) if isinstance(params, dict) else type(params).__name__
        raise SpecError(
            "params", None, f"a dict with exactly the keys {sorted(expected)}", value_text=str(got)
        )
    return {k: _checked_array(f"params[{k!r}]", params[k], s, spec.dtype) for k, s in expected.items()}


def _check_products(spec: AttentionSpec, x_q, x_kv, params) -> None:
    """Refuse finite inputs whose scores would overflow the dtype (and so turn into NaN).

    |score| ≤ scale · ‖q_i‖ · ‖k_j‖ (Cauchy–Schwarz), and each projection is
    bounded by ‖x‖ · ‖W‖ + |b|, so bounding those products bounds every
    intermediate up to the softmax (which cannot overflow), the output, and
    the squares LayerNorm takes.
    """
    limit = DTYPE_MAX[spec.dtype] / 16  # headroom for the sums that follow
    with np.errstate(over="ignore", invalid="ignore"):
        norm = _norm
        bias = lambda n: norm(params[n]) if spec.bias else 0.0  # noqa: E731
        q = norm(x_q) * norm(params["W_q"]) + bias("b_q")
        k = norm(x_kv) * norm(params["W_k"]) + bias("b_k")
        v = norm(x_kv) * norm(params["W_v"]) + bias("b_v")
        out = v * norm(params["W_o"]) + bias("b_o")
        worst = max(spec.head_scale * q * k, v, out)
        if spec.residual_norm:  # LayerNorm squares x_q + out
            worst = max(worst, (norm(x_q) + out) ** 2)
    if not np.isfinite(worst) or worst > limit:
        raise SpecError(
            "x_q",
            None,
            f"inputs, parameters and scale whose products stay within the {spec.dtype} range "
            f"(±{DTYPE_MAX[spec.dtype]:.3g}): scale · |q| · |k| here is about {worst:.3g}; "
            "use smaller values, a smaller scale, or dtype='float64'",
            value_text="values that overflow the computation",
        )


# -- layers, built once per configuration ---------------------------------------------------


@dataclass
class _Held:
    """A built layer, the lock one call holds while it loads and runs it, and the parameters it
    holds now (the dict last loaded: a spec's cached defaults are loaded once, not each call)."""

    layer: object
    lock: threading.Lock
    loaded: dict | None = None


_LAYERS: OrderedDict[tuple, _Held] = OrderedDict()
_LAYERS_LOCK = threading.Lock()
MAX_LAYERS = 8  # configurations whose layer is kept (parameters loaded when they change)


def _layer_key(framework: str, spec: AttentionSpec, dev) -> tuple:
    fields = ("d_model", "n_heads", "d_k", "d_v", "d_kv_in", "bias", "dropout", "scale", "residual_norm")
    fields += ("n_kv_heads", "rope_base", "window")
    return (framework, str(dev), spec.dtype, spec.seed, *(getattr(spec, f) for f in fields))


def _layer(be, framework: str, spec: AttentionSpec, dev) -> _Held:
    key = _layer_key(framework, spec, dev)
    with _LAYERS_LOCK:
        if key in _LAYERS:
            _LAYERS.move_to_end(key)
            return _LAYERS[key]
    built = _Held(be.build_layer(spec, dev), threading.Lock())
    with _LAYERS_LOCK:
        _LAYERS[key] = built
        while len(_LAYERS) > MAX_LAYERS:
            _LAYERS.popitem(last=False)
    return built


# -- a spec's inputs, parameters and mask where the run uses them: built once, kept on its device --


@dataclass(frozen=True)
class _Placed:
    """What a spec alone fixes, on one device: its default parameters (NumPy, loaded into the layer
    once) and inputs (framework tensors), its mask (a tensor, or None) and its empty query rows.
    `params`/`x_q` are None where only the mask was asked for (the caller gave the arrays)."""

    params: dict[str, np.ndarray] | None
    x_q: object
    x_kv: object
    mask: object
    empty_rows: np.ndarray
    nbytes: int


# Entries are bounded by the bytes they hold on their device (the same count on the host for a
# CPU run); a GPU's default inputs at L = 4096, d_model 512 are 8 MiB, its mask 16 MiB.
PLACED_BYTES = 256 * MIB
_PLACED = ByteCache(PLACED_BYTES, size=lambda placed: placed.nbytes)


def _placed(be, framework: str, spec: AttentionSpec, dev, *, defaults: bool) -> _Placed:
    """The spec's mask (and with `defaults` its parameters and inputs, checked once) on `dev`."""
    key = (framework, str(dev), spec, defaults)
    return _PLACED.get_or_build(key, lambda: _place(be, spec, dev, defaults=defaults))


def _place(be, spec: AttentionSpec, dev, *, defaults: bool) -> _Placed:
    mask = masks.from_spec(spec)  # (B, Lq, Lk) or None
    tmask = None if mask is None else be.to_tensor(mask, dev)
    size = 0 if mask is None else mask.nbytes
    params = x_q = x_kv = None
    if defaults:
        params, (q, kv) = init_params(spec), make_inputs(spec)
        _check_products(spec, q, kv, params)
        x_q = be.to_tensor(q, dev)
        x_kv = x_q if kv is q else be.to_tensor(kv, dev)
        size += sum(a.nbytes for a in params.values()) + q.nbytes + (kv is not q) * kv.nbytes
    empty = masks.empty_rows(mask, spec.batch, spec.len_q)
    return _Placed(params, x_q, x_kv, tmask, empty, size)


_CONFIGURED: set[str] = set()


def run_attention(
    spec: AttentionSpec,
    framework: str = "torch",
    device: str = "cpu",
    *,
    x_q: np.ndarray | None = None,
    x_kv: np.ndarray | None = None,
    params: dict[str, np.ndarray] | None = None,
    capture: bool = True,
    memory_budget: float = DEFAULT_MEMORY_BUDGET,
) -> AttentionResult:
    """Run attnviz's multi-head attention for `spec` in `framework`.

    Args:
        spec: what to compute.
        framework: "torch" | "tensorflow".
        device: "cpu" | "gpu" | "auto" (the GPU when the framework sees one).
        x_q: `(B, Lq, d_model)`; None → `make_inputs(spec)`.
        x_kv: `(B, Lk, d_kv_in)` in cross mode; in self mode None or `x_q` itself.
        params: as from `init_params(spec)`; None → `init_params(spec)`.
        capture: record every step (False: the fast path, same numbers).
        memory_budget: bytes; larger configurations are refused up front.

    Returns:
        An `AttentionResult`.

    Raises:
        SpecError (a ValueError): bad framework, device, arrays, values that would
            overflow the dtype, or over the memory budget (`BudgetError`).
    """
    if not isinstance(spec, AttentionSpec):
        raise TypeError(f"spec: got {type(spec).__name__}; allowed: an attnviz.AttentionSpec.")
    check_framework(framework)
    check_device(device)
    check_budget(spec, capture, memory_budget)
    defaults = x_q is None and x_kv is None and params is None
    if not defaults:
        x_q, x_kv = _inputs(spec, x_q, x_kv)
        params = _params(spec, params)
        _check_products(spec, x_q, x_kv, params)
    be = backend(framework)
    if framework not in _CONFIGURED:
        be.configure()
        _CONFIGURED.add(framework)
    dev = be.resolve_device(device)
    placed = _placed(be, framework, spec, dev, defaults=defaults)
    held = _layer(be, framework, spec, dev)
    on_gpu = be.device_kind(dev) == "gpu"  # steps stay there until read
    codes = step_code(framework) if capture else None
    record = Recorder(capture, be.to_numpy, codes, on_device=on_gpu)
    with held.lock, be.inference():
        if defaults:
            if held.loaded is not placed.params:  # the spec's defaults: loaded once into this layer
                held.layer.load_params(placed.params)
                held.loaded = placed.params
            tq, tkv = placed.x_q, placed.x_kv
        else:
            held.layer.load_params(params)
            held.loaded = None  # the caller's arrays: loaded for this call, never taken as a default
            tq = be.to_tensor(x_q, dev)
            tkv = tq if x_kv is x_q else be.to_tensor(x_kv, dev)
        start = time.perf_counter()
        out, weights = be.forward(held.layer, tq, tkv, placed.mask, spec=spec, record=record)
        out, weights = be.to_numpy(out), be.to_numpy(weights)  # waits for the device
        elapsed = time.perf_counter() - start
    return AttentionResult(
        output=out,
        weights=weights,
        steps=record.steps,
        framework=framework,
        device=be.device_kind(dev),
        device_name=be.device_name(dev),
        elapsed_s=elapsed,
        empty_rows=placed.empty_rows.copy(),
    )


# -- steady-state timing ----------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Steady-state time of the fast path (`capture=False`), warm.

    Attributes:
        median_s, p25_s, p75_s: over `repeats` timed calls, after `warmup` untimed ones.
        first_s: the first call of this measurement (framework start-up and layer
            building included when it was the process's first).
        repeats: how many calls were timed.
        threads: the framework's intra-op thread count during the measurement.
    """

    median_s: float
    p25_s: float
    p75_s: float
    first_s: float
    repeats: int
    threads: int = 0

    @property
    def label(self) -> str:
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        return (
            f"median of {self.repeats} warm calls, fast path (no step capture), device synchronised{threads}"
        )


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
    memory_budget: float = DEFAULT_MEMORY_BUDGET,
) -> Timing:
    """Steady-state forward time of `spec` through `run_attention(..., capture=False)`.

    The same measurement `python -m attnviz.bench` makes (first call apart,
    warm-up, median of timed calls), so a time the app shows can be checked
    against the benchmark.
    """
    for name, value, least in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
            raise SpecError(name, value, f"an integer ≥ {least}")
    kwargs = {"x_q": x_q, "x_kv": x_kv, "params": params, "capture": False, "memory_budget": memory_budget}
    times = [run_attention(spec, framework, device, **kwargs).elapsed_s for _ in range(1 + warmup + repeats)]
    p25, median, p75 = np.percentile(times[1 + warmup :], [25, 50, 75])
    return Timing(float(median), float(p25), float(p75), times[0], repeats, backend(framework).get_threads())
