"""What a run returns: the output, the weights and every recorded step — and its downloads
(configuration as JSON, captured steps as .npz, weights as CSV)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Step:
    """One intermediate of the pipeline.

    Attributes:
        name: stable identifier, the same in both frameworks (see `STEP_DOCS`).
        shape: the tensor's shape.
        held: the tensor as a NumPy array, or (a step kept on a GPU) the framework's tensor until
            `value` is first read.
        code: the framework source lines that produced it (verbatim).
        fetch: `tensor → NumPy array`, the copy home still owed (None once `held` is NumPy).
    """

    name: str
    shape: tuple[int, ...]
    held: Any
    code: str
    fetch: Callable[[Any], np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def value(self) -> np.ndarray:
        """The tensor as a NumPy array: a step kept on the device is copied home at its first read
        (a page draws a few of a run's steps; the rest never cross)."""
        if self.fetch is not None:
            object.__setattr__(self, "held", self.fetch(self.held))
            object.__setattr__(self, "fetch", None)
        return self.held

    def __reduce__(self):
        """Pickled (to the server, to a cache) as NumPy: a device tensor never leaves its process."""
        return Step, (self.name, self.shape, self.value, self.code)


# Step name → what it holds, with the shape legend used throughout:
# B batch, H query heads, Hkv key/value heads (= H unless grouped), Lq/Lk query/key
# lengths, Dk/Dv head widths, D d_model.
STEP_DOCS = {
    "q_proj": ("Q = x_q·W_q + b_q", "(B, Lq, H*Dk)"),
    "k_proj": ("K = x_kv·W_k + b_k", "(B, Lk, Hkv*Dk)"),
    "v_proj": ("V = x_kv·W_v + b_v", "(B, Lk, Hkv*Dv)"),
    "q_heads": ("Q split into heads", "(B, H, Lq, Dk)"),
    "k_heads": ("K split into heads", "(B, Hkv, Lk, Dk)"),
    "v_heads": ("V split into heads", "(B, Hkv, Lk, Dv)"),
    "q_norm": ("each head's Q RMS-normalised and scaled (QK-norm, Gemma 3)", "(B, H, Lq, Dk)"),
    "k_norm": ("each head's K RMS-normalised and scaled (QK-norm)", "(B, Hkv, Lk, Dk)"),
    "q_rope": (
        "Q turned by position (RoPE): pair (i, i + Dk/2) by position · base^(−2i/Dk)",
        "(B, H, Lq, Dk)",
    ),
    "k_rope": ("K turned by position (RoPE), the same angles", "(B, Hkv, Lk, Dk)"),
    "k_repeated": ("each K head repeated for the H/Hkv query heads it serves", "(B, H, Lk, Dk)"),
    "v_repeated": ("each V head repeated for the H/Hkv query heads it serves", "(B, H, Lk, Dv)"),
    "scores": ("QKᵀ", "(B, H, Lq, Lk)"),
    "scaled": ("QKᵀ · scale", "(B, H, Lq, Lk)"),
    "masked": ("blocked scores (mask and sliding window) set to -inf", "(B, H, Lq, Lk)"),
    "softmax": ("attention weights, softmax over keys", "(B, H, Lq, Lk)"),
    "dropout": ("weights after dropout (training only)", "(B, H, Lq, Lk)"),
    "context": ("A·V per head", "(B, H, Lq, Dv)"),
    "merged": ("heads concatenated", "(B, Lq, H*Dv)"),
    "output_proj": ("merged·W_o + b_o", "(B, Lq, D)"),
    "residual_norm": ("LayerNorm(x_q + output), eps 1e-6", "(B, Lq, D)"),
}


def expected_steps(spec) -> list[str]:
    """Step names a run of `spec` records, in order."""
    names = [n for n in STEP_DOCS if n not in ("q_norm", "k_norm")]  # pretrained models only (Gemma 3)
    if spec.rope_base is None:
        names.remove("q_rope")
        names.remove("k_rope")
    if spec.n_kv_heads == spec.n_heads:
        names.remove("k_repeated")
        names.remove("v_repeated")
    if spec.mask == "none":
        names.remove("masked")
    if not (spec.training and spec.dropout > 0):
        names.remove("dropout")
    if not spec.residual_norm:
        names.remove("residual_norm")
    return names


class Recorder:
    """Collects a `Step` for each `record(name, tensor)` while a backend computes.

    The tensor is copied to NumPy at once (what a caller does with the
    tensor afterwards cannot change the step), unless the caller hands it over
    (`owned=True`: a fresh result nothing writes to afterwards). With `on_device` (a run on a
    GPU) the step keeps the framework's tensor where it is — a copy on the device unless owned —
    and is copied home only when its `value` is read. Each step's `code` comes from
    `codes` (name → the source lines that produced it, read from the backend
    by `attnviz.frameworks.step_code`), so the code shown is the code that ran. A
    disabled recorder keeps nothing; with it (and no autograd) PyTorch runs
    the same operations in place (`attention_in_place`), the fast path of
    `capture=False`, tested to give the captured numbers.
    """

    def __init__(
        self,
        enabled: bool = True,
        to_numpy: Callable[[Any], np.ndarray] = np.asarray,
        codes: dict[str, str] | None = None,
        *,
        on_device: bool = False,
    ):
        self.enabled = enabled
        self.to_numpy = to_numpy
        self.codes = codes or {}
        self.on_device = on_device
        self.steps: list[Step] = []

    def __call__(self, name: str, tensor: Any, *, owned: bool = False) -> None:
        """Keep `tensor` as step `name`. `owned`: the caller hands the tensor over — a fresh result
        nothing writes to afterwards — so the step may share its memory instead of copying it (at
        L = 1024, three 32 MiB copies were a third of what capture added to a pass)."""
        if not self.enabled:
            return
        code = self.codes.get(name, "")
        if self.on_device:
            kept = tensor if owned else _device_copy(tensor)
            self.steps.append(Step(name, tuple(tensor.shape), kept, code, self.to_numpy))
            return
        value = self.to_numpy(tensor)
        value = np.asarray(value) if owned else np.array(value, copy=True)
        self.steps.append(Step(name, tuple(value.shape), value, code))


def _device_copy(tensor: Any) -> Any:
    """A copy of `tensor` on its own device: PyTorch's `clone` (later in-place writes cannot reach the
    step); a tensor without one (TensorFlow's, immutable) is kept as it is."""
    clone = getattr(tensor, "clone", None)
    return tensor.detach().clone() if callable(clone) else tensor


@dataclass(frozen=True)
class AttentionResult:
    """The outcome of `run_attention`.

    Attributes:
        output: `(B, Lq, D)`.
        weights: `(B, H, Lq, Lk)`, softmax weights (before dropout).
        steps: the recorded `Step`s, in pipeline order; empty when
            `capture=False`.
        framework: "torch" or "tensorflow".
        device: "cpu" or "gpu", the device actually used.
        device_name: the framework's name for it.
        elapsed_s: wall time of the forward pass, device synchronised.
        empty_rows: bool `(B, Lq)`, query rows with no allowed key (their
            weights and context are all zero).
    """

    output: np.ndarray
    weights: np.ndarray
    steps: list[Step]
    framework: str
    device: str
    device_name: str
    elapsed_s: float
    empty_rows: np.ndarray = field(repr=False)

    def step(self, name: str) -> Step:
        """The step called `name` (KeyError listing the names if absent)."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step {name!r}; recorded: {[s.name for s in self.steps]}")


# -- downloads of a result ------------------------------------------------------------


def config_json(spec, **extra) -> bytes:
    """An `AttentionSpec`'s fields (plus `extra`, e.g. framework and device) as JSON."""
    return json.dumps({**spec.as_dict(), **extra}, indent=2).encode()


def steps_npz(result: AttentionResult) -> bytes:
    """Every captured step, plus output and weights, as a NumPy .npz archive."""
    buf = io.BytesIO()
    arrays = {f"{i:02d}_{s.name}": s.value for i, s in enumerate(result.steps)}
    np.savez_compressed(buf, **arrays, output=result.output, weights=result.weights)
    return buf.getvalue()


def weights_csv(result: AttentionResult, q_labels=None, k_labels=None) -> bytes:
    """Long-format CSV: batch, head, query, key, weight (one row per cell)."""
    import pandas as pd  # only when a CSV is asked for

    B, H, Lq, Lk = result.weights.shape
    b, h, i, j = (a.ravel() for a in np.indices((B, H, Lq, Lk)))
    frame = pd.DataFrame(
        {
            "batch": b,
            "head": h,
            "query_pos": i,
            "query": np.asarray(q_labels or range(Lq), dtype=object)[i],
            "key_pos": j,
            "key": np.asarray(k_labels or range(Lk), dtype=object)[j],
            "weight": result.weights.ravel(),
        }
    )
    return frame.to_csv(index=False, float_format="%.8g").encode()
