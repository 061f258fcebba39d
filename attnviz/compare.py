"""PyTorch against TensorFlow on identical parameters and inputs, step by step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.analysis import differences
from attnviz.params import init_params, make_inputs
from attnviz.result import AttentionResult
from attnviz.run import run_attention
from attnviz.spec import AttentionSpec

# Relative error (max |a - b| / max |b|) below which two frameworks agree.
TOLERANCE = {"float32": 1e-5, "float64": 1e-10}


@dataclass(frozen=True)
class Comparison:
    """Both runs and their per-step differences.

    Attributes:
        rows: per step: `step`, `shape`, `max_abs`, `rel`, `agree`.
        tolerance: the relative tolerance used.
        agree: every step within tolerance.
        comparable: False when dropout is active (each framework draws its own).
        median_s: per framework, the median forward time of `timing_repeats` fast-path
            calls (`capture=False`) made after the recorded run, which serves as warm-up.
    """

    torch: AttentionResult
    tensorflow: AttentionResult
    rows: list[dict]
    tolerance: float
    agree: bool
    comparable: bool
    median_s: dict[str, float]


def compare_frameworks(
    spec: AttentionSpec,
    device: str = "cpu",
    *,
    x_q=None,
    x_kv=None,
    params=None,
    timing_repeats: int = 5,
) -> Comparison:
    """Run `spec` in both frameworks with the same parameters and inputs, then time each."""
    params = init_params(spec) if params is None else params
    if x_q is None:
        x_q, x_kv = make_inputs(spec)
    kwargs = {"x_q": x_q, "x_kv": None if spec.mode == "self" else x_kv, "params": params}
    runs = {fw: run_attention(spec, fw, device, **kwargs) for fw in ("torch", "tensorflow")}
    median_s = {
        fw: float(np.median([run_attention(spec, fw, device, capture=False, **kwargs).elapsed_s
                             for _ in range(timing_repeats)]))
        for fw in runs
    }  # fmt: skip
    tol = TOLERANCE[spec.dtype]
    comparable = not (spec.training and spec.dropout > 0)
    rows = []
    for a, b in zip(runs["tensorflow"].steps, runs["torch"].steps, strict=True):
        d = differences(a.value, b.value)
        rows.append({"step": a.name, "shape": a.shape, **d, "agree": d["rel"] <= tol})
    agree = all(r["agree"] for r in rows if comparable or r["step"] not in _AFTER_DROPOUT)
    return Comparison(runs["torch"], runs["tensorflow"], rows, tol, agree, comparable, median_s)


_AFTER_DROPOUT = {"dropout", "context", "merged", "output_proj", "residual_norm"}


def weight_differences(comparison: Comparison, batch_index: int = 0) -> np.ndarray:
    """|TensorFlow − PyTorch| attention weights `(H, Lq, Lk)` for one batch item."""
    return np.abs(
        comparison.tensorflow.weights[batch_index].astype(np.float64)
        - comparison.torch.weights[batch_index].astype(np.float64)
    )
