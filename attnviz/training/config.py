"""What one training run may hold: the presets, the snapshot and probe caps, the thread count.

The model itself — `TrainConfig`, its weights (`param_shapes`, `init_params`, `check_params`) — is the
Training lab's model family, `attnviz.pretrained.families.lab` (a saved run opens as a checkpoint);
`attnviz.training` re-exports it.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from attnviz import formats
from attnviz.errors import BudgetError, SpecError
from attnviz.pretrained.families.lab import TrainConfig

MAX_SNAPSHOTS = 401  # snapshots kept per run (step 0 included)
SNAPSHOT_BUDGET = 64 * 2**20  # bytes of stored probe attentions per run
PROBE_SIZE = 64  # probe sequences the pattern scores average over
HELD_OUT_SIZE = 512
HELD_OUT_BUCKETS = 64  # one bucket in 64 of all sequences is held out
MAX_THREADS = 64  # never more intra-op threads than this, whatever the machine

# Settings that reach the targets in docs/training.md (benchmarks/training_results.py).
PRESETS: dict[str, TrainConfig] = {
    "reverse": TrainConfig(steps=400, snapshot_every=10),
    "copy": TrainConfig(task="copy", steps=400, snapshot_every=10),
    "sort": TrainConfig(task="sort", n_layers=2, n_heads=2, d_model=64, mlp=True, steps=1000, lr=0.003),
    "induction": TrainConfig(
        task="induction", seq_len=24, vocab=32, n_layers=2, n_heads=2, d_model=64, causal=True,
        steps=1000, lr=0.003, snapshot_every=10,
    ),
}  # fmt: skip


def check_budget(config: TrainConfig, budget: int = SNAPSHOT_BUDGET) -> None:
    """Refuse, before training, a run whose stored snapshots would exceed the caps.

    Raises:
        BudgetError: more than `MAX_SNAPSHOTS` snapshots, or more than `budget` bytes of them.
    """
    n = config.n_snapshots
    per = config.n_layers * config.n_heads * config.seq_len**2 * 4  # float32 (L, H, T, T)
    if n > MAX_SNAPSHOTS or n * per > budget:
        fewest = math.ceil(config.steps / max(1, min(MAX_SNAPSHOTS - 2, budget // per - 2)))
        raise BudgetError(
            f"snapshot_every: {config.steps} steps every {config.snapshot_every} keep {n} snapshots "
            f"({formats.size(n * per)}); a run keeps at most {MAX_SNAPSHOTS} and "
            f"{formats.size(budget)}. Allowed: snapshot_every ≥ {fewest}, or fewer steps.",
            n * per,
            budget,
        )


def check_threads(threads: Any, field: str = "threads") -> int:
    """An intra-op thread count from 1 to this machine's cores (`os.cpu_count()`, at most `MAX_THREADS`)."""
    most = min(MAX_THREADS, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= most:
        raise SpecError(field, threads, f"an integer from 1 to {most} (this machine's cores)")
    return int(threads)
