"""The backend contract: what each framework module implements, and nothing else.

attnviz writes the attention math twice — `torch_backend` and `tf_backend`,
line for line, with the same names (as d2l keeps its framework variants side
by side) — and the plumbing once: `attnviz.run.run_attention` drives either
module through the `Backend` protocol below. A new framework is a new module
that satisfies it plus one row in `attnviz.frameworks.FRAMEWORKS`.

A new attention variant is not a new forward: both `MultiHeadAttention` classes
call `after_split_heads(q, k, v, start=..., record=...)` between splitting heads and
the scores (QK-norm and rotary positions live there; what it returns for the new keys
is what a KV cache keeps) and `after_weights(weights)` between the weights and the
values, as Keras's `MultiHeadAttention._compute_attention` is its documented override
point. The same body serves a full pass, a cached decoding step (`past=`, a
`common.LayerKV`, and `start=`) and cross-attention over a memory computed once.

The Training lab's model (`train.Model` in each framework) reads its configuration and batches
through `TrainSettings` and `TrainBatch` below: `attnviz.training` passes its `TrainConfig` and
`Batch` in, and no backend imports `attnviz.training` (which reaches the backends through
`attnviz.frameworks.backend`, the one string import).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np


class Backend(Protocol):
    """What `run_attention`, the benchmark and the encoders need from a framework module.

    Shapes: B batch, H heads, Lq/Lk lengths, D d_model, Dkv key/value input width.
    """

    def version(self) -> str:
        """The framework's version string."""

    def configure(self) -> None:
        """Process-wide settings a run needs (full float32: TF32 off; TensorFlow: GPU memory growth).

        Called by `run_attention` where a run starts, never at import."""

    def gpu_available(self) -> bool: ...

    def resolve_device(self, device: str) -> Any:
        """'cpu' | 'gpu' | 'auto' → the framework's device; 'gpu' without one is a `SpecError`."""

    def device_kind(self, dev: Any) -> str:
        """'cpu' or 'gpu'."""

    def device_name(self, dev: Any) -> str:
        """The framework's name for `dev` (with the GPU's model)."""

    def to_tensor(self, array: np.ndarray, dev: Any) -> Any: ...

    def to_numpy(self, tensor: Any) -> np.ndarray: ...

    def sync(self, dev: Any) -> None:
        """Wait until the device has finished (for honest timing)."""

    def matmul(self, a: Any, b: Any) -> Any:
        """`a @ b` (the benchmark's ceiling)."""

    def set_threads(self, threads: int) -> None: ...

    def get_threads(self) -> int: ...

    def inference(self) -> AbstractContextManager:
        """A context in which no gradients are recorded."""

    def build_layer(self, spec: Any, dev: Any) -> Any:
        """A `MultiHeadAttention` shaped for `spec` on `dev` (parameters loaded separately)."""

    def forward(
        self, layer: Any, x_q: Any, x_kv: Any, mask: Any, *, spec: Any, record: Any
    ) -> tuple[Any, Any]:
        """`(output (B, Lq, D), weights (B, H, Lq, Lk))` of `layer` with `spec`'s dropout settings."""


class TrainSettings(Protocol):
    """What a backend's `train.Model` reads of the run's configuration (`training.TrainConfig`)."""

    n_layers: int
    n_heads: int
    d_model: int
    seq_len: int
    causal: bool  # query i sees keys ≤ i
    mlp: bool  # a ReLU MLP after each attention
    dtype: str  # "float32" | "float64"
    lr: float
    optimizer: str  # "sgd" | "adam"

    @property
    def head_dims(self) -> tuple[int, int]:
        """`(d_k, d_v)`."""


class TrainBatch(Protocol):
    """One batch (`training.Batch`): tokens, targets and the positions the loss and accuracy count.

    Shapes: B batch, T sequence length; every field `(B, T)`.
    """

    x: np.ndarray  # input tokens
    y: np.ndarray  # target tokens
    loss_w: np.ndarray  # weight of each position in the loss
    acc_w: np.ndarray  # weight of each position in the accuracy
