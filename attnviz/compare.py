"""PyTorch against TensorFlow on identical parameters and inputs, step by step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.params import init_params, make_inputs
from attnviz.result import AttentionResult
from attnviz.run import Timing, run_attention, time_attention
from attnviz.spec import AttentionSpec

# Relative error (max |a - b| / max |b|) below which two frameworks agree.
TOLERANCE = {"float32": 1e-5, "float64": 1e-10}


def differences(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """max |a - b| and that over max |b| (finite entries only; ±inf must match)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    same_inf = bool((np.isfinite(a) == np.isfinite(b)).all() and (a[~finite] == b[~finite]).all())
    max_abs = float(np.abs(a[finite] - b[finite]).max(initial=0.0))
    scale = float(np.abs(b[finite]).max(initial=0.0))
    if not same_inf:  # blocked (-inf) cells in one and not the other
        return {"max_abs": float("inf"), "rel": float("inf")}
    return {"max_abs": max_abs, "rel": max_abs / scale if scale else max_abs}


@dataclass(frozen=True)
class Comparison:
    """Both runs and their per-step differences.

    Attributes:
        rows: per step: `step`, `shape`, `max_abs`, `rel`, `compared` (False for the
            steps from dropout on when dropout is active: each framework draws its own
            mask, so they are not expected to agree) and `agree` (None when not compared).
        tolerance: the relative tolerance used.
        agree: every compared step within tolerance.
        comparable: False when dropout is active (each framework draws its own).
        worst: the compared row with the largest relative error.
        median_s: per framework, the steady-state forward time (`run.time_attention`:
            median of `timing_repeats` warm fast-path calls, after warm-up).
        timings: per framework, the whole `Timing` (quartiles, repeats, first call).
    """

    torch: AttentionResult
    tensorflow: AttentionResult
    rows: list[dict]
    tolerance: float
    agree: bool
    comparable: bool
    median_s: dict[str, float]
    timings: dict[str, Timing]

    @property
    def worst(self) -> dict:
        return max((r for r in self.rows if r["compared"]), key=lambda r: r["rel"])

    @property
    def excluded(self) -> list[str]:
        """Steps not compared (after dropout)."""
        return [r["step"] for r in self.rows if not r["compared"]]

    def verdict(self) -> str:
        """One sentence that covers the compared steps only, and says which were left out."""
        w = self.worst
        head = (
            f"Agree: every compared step within relative error {self.tolerance:.0e}; "
            f"largest is {w['rel']:.2e} at '{w['step']}'."
            if self.agree
            else "Disagree at: "
            + ", ".join(r["step"] for r in self.rows if r["agree"] is False)
            + f" (tolerance {self.tolerance:.0e}; largest {w['rel']:.2e} at '{w['step']}')."
        )
        if self.excluded:
            head += (
                f" Steps after dropout are not compared ({', '.join(self.excluded)}): "
                "each framework draws its own dropout mask."
            )
        return head


def compare_frameworks(
    spec: AttentionSpec,
    device: str = "cpu",
    *,
    x_q=None,
    x_kv=None,
    params=None,
    timing_repeats: int = 7,
) -> Comparison:
    """Run `spec` in both frameworks with the same parameters and inputs, then time each."""
    params = init_params(spec) if params is None else params
    if x_q is None:
        x_q, x_kv = make_inputs(spec)
    kwargs = {"x_q": x_q, "x_kv": None if spec.mode == "self" else x_kv, "params": params}
    runs = {fw: run_attention(spec, fw, device, **kwargs) for fw in ("torch", "tensorflow")}
    timings = {fw: time_attention(spec, fw, device, repeats=timing_repeats, **kwargs) for fw in runs}
    median_s = {fw: t.median_s for fw, t in timings.items()}
    tol = TOLERANCE[spec.dtype]
    comparable = not (spec.training and spec.dropout > 0)
    rows = []
    for a, b in zip(runs["tensorflow"].steps, runs["torch"].steps, strict=True):
        d = differences(a.value, b.value)
        compared = comparable or a.name not in _AFTER_DROPOUT
        rows.append(
            {
                "step": a.name,
                "shape": a.shape,
                **d,
                "compared": compared,
                "agree": d["rel"] <= tol if compared else None,
            }
        )
    agree = all(r["agree"] for r in rows if r["compared"])
    return Comparison(runs["torch"], runs["tensorflow"], rows, tol, agree, comparable, median_s, timings)


_AFTER_DROPOUT = {"dropout", "context", "merged", "output_proj", "residual_norm"}


def weight_differences(comparison: Comparison, batch_index: int = 0) -> np.ndarray:
    """|TensorFlow − PyTorch| attention weights `(H, Lq, Lk)` for one batch item."""
    return np.abs(
        comparison.tensorflow.weights[batch_index].astype(np.float64)
        - comparison.torch.weights[batch_index].astype(np.float64)
    )


def tolerance_units(comparison: Comparison, batch_index: int = 0) -> np.ndarray:
    """The weights' differences `(H, Lq, Lk)` for one batch item in units of the tolerance.

    Each cell is |TensorFlow − PyTorch| / (tolerance · max |PyTorch weights|): the verdict's
    relative error, cell by cell, so 1 is the tolerance and the largest cell over all batch
    items is the softmax step's relative error over the tolerance.
    """
    scale = comparison.tolerance * float(np.abs(comparison.torch.weights.astype(np.float64)).max())
    return weight_differences(comparison, batch_index) / (scale or comparison.tolerance)
