"""What one server lets the Training lab use: how many runs at once, how large, how long, how much disk.

A shared server (a class on one machine) reads these from the environment when
it starts (`TrainLimits.from_env`, `ATTNVIZ_TRAIN_*`, docs/security.md). Library
calls (`train`) are not limited by them; the app's runs are (its Training lab checks the size,
and the execution layer, `attnviz.exec`, bounds how many train at once — `ATTNVIZ_TRAIN_MAX_RUNS`
— and for how long).

A run's size is refused before anything is allocated (`check_size`), with the
estimate and what would fit: its work per step (parameters × batch × sequence
length, about the multiply-adds of one forward pass), its estimated peak memory,
its steps and the bytes of the snapshots it keeps.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from attnviz import formats
from attnviz.cache import MIB, env_number
from attnviz.errors import BudgetError
from attnviz.pretrained.families.lab import TrainConfig, param_shapes
from attnviz.training.config import PROBE_SIZE, check_budget


@dataclass(frozen=True)
class TrainLimits:
    """The server's bounds on training (defaults in brackets; environment variable in capitals).

    Attributes:
        work: parameters × batch × sequence length per step [5e8] (`ATTNVIZ_TRAIN_MAX_WORK`).
        memory_mb: estimated peak memory of one run, all its frameworks [256] (`ATTNVIZ_TRAIN_MB`).
        steps: steps per run [5000] (`ATTNVIZ_TRAIN_MAX_STEPS`).
        snapshot_mb: stored snapshots per framework [64] (`ATTNVIZ_TRAIN_SNAPSHOT_MB`).
        seconds: wall time of one run; then it stops, keeping what it learned [600]
            (`ATTNVIZ_TRAIN_MAX_SECONDS`).
        saved: runs saved for the Pretrained page, server-wide; the oldest is deleted [20]
            (`ATTNVIZ_TRAIN_SAVED`).
        saved_mb: bytes of saved runs on disk, server-wide [256] (`ATTNVIZ_TRAIN_SAVED_MB`).
    """

    work: float = 5e8
    memory_mb: float = 256
    steps: int = 5000
    snapshot_mb: float = 64
    seconds: float = 600
    saved: int = 20
    saved_mb: float = 256

    @classmethod
    def from_env(cls) -> TrainLimits:
        """The limits with each `ATTNVIZ_TRAIN_*` variable that is set (a bad value warns and keeps the default)."""
        d = cls()
        return cls(
            work=env_number("ATTNVIZ_TRAIN_MAX_WORK", d.work, minimum=1),
            memory_mb=env_number("ATTNVIZ_TRAIN_MB", d.memory_mb, minimum=1),
            steps=int(env_number("ATTNVIZ_TRAIN_MAX_STEPS", d.steps, minimum=1)),
            snapshot_mb=env_number("ATTNVIZ_TRAIN_SNAPSHOT_MB", d.snapshot_mb, minimum=1),
            seconds=env_number("ATTNVIZ_TRAIN_MAX_SECONDS", d.seconds, minimum=1),
            saved=int(env_number("ATTNVIZ_TRAIN_SAVED", d.saved, minimum=1)),
            saved_mb=env_number("ATTNVIZ_TRAIN_SAVED_MB", d.saved_mb, minimum=1),
        )

    def replace(self, **changes) -> TrainLimits:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Size:
    """A run's estimated size: `params` (count), `work` per step, `memory` and `snapshots` in bytes."""

    params: int
    work: int
    memory: int
    snapshots: int


def _activations(config: TrainConfig, batch: int) -> int:
    """Floats one step keeps for the backward pass (all layers, logits), an estimate."""
    B, T, D, H, V = batch, config.seq_len, config.d_model, config.n_heads, config.vocab
    Dk, Dv = config.head_dims
    per_layer = 8 * D + 3 * H * Dk + H * Dv + 2 * H * T + (9 * D if config.mlp else 0)
    return B * T * (config.n_layers * per_layer + 3 * V)


def estimate(config: TrainConfig, frameworks: int = 1) -> Size:
    """The size of training `config` in `frameworks` frameworks at once.

    Memory: per framework, weights × 4 (the weights, their gradients, Adam's two moments),
    1.5 × the activations of one training step, and one probe forward pass (`PROBE_SIZE`
    sequences, every layer's attention kept), in `config.dtype`; snapshots as `check_budget`
    counts them. Measured for 4 layers, d_model 256, 8 heads, T 64, vocab 256, MLP, batch 96:
    PyTorch grew 895 MiB, TensorFlow 1,060 MiB, estimate 1,112 MiB (TensorFlow adds about
    250 MiB once per process the first time it trains, not counted here).
    """
    params = sum(math.prod(s) for s in param_shapes(config).values())
    itemsize = 4 if config.dtype == "float32" else 8
    L, H, T = config.n_layers, config.n_heads, config.seq_len
    probe = PROBE_SIZE * L * H * T * T + _activations(config, PROBE_SIZE) // L
    per_fw = itemsize * (4 * params + 3 * _activations(config, config.batch) // 2 + probe)
    snapshots = config.n_snapshots * config.n_layers * config.n_heads * config.seq_len**2 * 4
    return Size(params, params * config.batch * config.seq_len, frameworks * per_fw, frameworks * snapshots)


def _largest_batch(config: TrainConfig, frameworks: int, limits: TrainLimits) -> int:
    """The largest batch (≥ 0) that fits the work and memory budgets with the other fields unchanged."""
    lo, hi = 0, config.batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        size = estimate(config.replace(batch=mid), frameworks)
        if size.work <= limits.work and size.memory <= limits.memory_mb * MIB:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_size(config: TrainConfig, frameworks: int = 1, limits: TrainLimits | None = None) -> Size:
    """Refuse a run over the server's budgets before anything is allocated; the estimate if it fits.

    Raises:
        BudgetError: over `limits.work`, `limits.memory_mb` or `limits.steps` (the message gives the
            estimate, the budget and the largest batch that fits), or over the snapshot budget.
    """
    limits = limits or TrainLimits.from_env()
    if config.steps > limits.steps:
        raise BudgetError(
            f"steps: got {config.steps}; this server trains at most {limits.steps} steps per run "
            f"(ATTNVIZ_TRAIN_MAX_STEPS). Allowed: steps ≤ {limits.steps}.",
            config.steps,
            limits.steps,
        )
    check_budget(config, int(limits.snapshot_mb * MIB))
    size = estimate(config, frameworks)
    over_work, over_memory = size.work > limits.work, size.memory > limits.memory_mb * MIB
    if over_work or over_memory:
        fits = _largest_batch(config, frameworks, limits)
        what = (
            f"a batch of at most {fits} fits at these sizes"
            if fits
            else "even a batch of 1 does not fit: fewer layers, a smaller d_model, vocabulary or sequence"
        )
        both = f" in {frameworks} frameworks" if frameworks > 1 else ""
        raise BudgetError(
            f"Training size{both}: {size.params:,} parameters × batch {config.batch} × sequence "
            f"{config.seq_len} = {size.work:.3g} per step (budget {limits.work:.3g}, ATTNVIZ_TRAIN_MAX_WORK), "
            f"estimated memory {formats.size(size.memory)} (budget {limits.memory_mb:,.0f} MiB, "
            f"ATTNVIZ_TRAIN_MB). Allowed: {what}.",
            size.memory if over_memory else size.work,
            int(limits.memory_mb * MIB) if over_memory else int(limits.work),
        )
    return size
