"""What a training run is: `TrainConfig` (validated on construction), the presets, the size caps, the weights.

`param_shapes` names every parameter and `init_params` draws the starting weights
both frameworks load (numpy, `x @ W` layout). The framework trainers
(`backends/*/train.py`) import this module and `data`, never the loop.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import BudgetError, SpecError

TASKS = ("copy", "reverse", "sort", "induction")
OPTIMIZERS = ("sgd", "adam")
DTYPES = ("float32", "float64")
LIMITS = {  # inclusive bounds of the integer fields
    "seq_len": (2, 64),
    "vocab": (2, 256),
    "n_layers": (1, 4),
    "n_heads": (1, 8),
    "d_model": (2, 256),
    "d_k": (1, 256),
    "d_v": (1, 256),
    "steps": (1, 100_000),
    "batch": (1, 1024),
    "seed": (0, 2**32 - 1),
    "snapshot_every": (1, 100_000),
}
LR_MAX = 10.0
MAX_SNAPSHOTS = 401  # snapshots kept per run (step 0 included)
SNAPSHOT_BUDGET = 64 * 2**20  # bytes of stored probe attentions per run
PROBE_SIZE = 64  # probe sequences the pattern scores average over
HELD_OUT_SIZE = 512
HELD_OUT_BUCKETS = 64  # one bucket in 64 of all sequences is held out
MODEL_TYPE = "attnviz-training"
MAX_THREADS = 64  # never more intra-op threads than this, whatever the machine
PARAM_MAX = 1e4  # the largest |weight| a run may start from (larger ones overflow float32 activations)


def _allowed_int(name: str) -> str:
    lo, hi = LIMITS[name]
    return f"an integer from {lo} to {hi}"


@dataclass(frozen=True)
class TrainConfig:
    """What to train: the task, the model's sizes and the optimisation.

    `d_k`/`d_v` None → `d_model // n_heads`. `causal` applies a decoder-style
    mask (query i sees keys ≤ i); induction needs it, reverse and sort cannot
    work with it. `mlp` False → attention-only. A snapshot (probe attentions
    and pattern scores) is taken every `snapshot_every` steps and at the end.
    """

    task: str = "reverse"
    seq_len: int = 8
    vocab: int = 10
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 32
    d_k: int | None = None
    d_v: int | None = None
    causal: bool = False
    mlp: bool = False
    steps: int = 1500
    batch: int = 64
    lr: float = 0.01
    optimizer: str = "adam"
    seed: int = 0
    dtype: str = "float32"
    snapshot_every: int = 25

    def __post_init__(self):
        def bad(name: str, allowed: str):
            raise SpecError(name, getattr(self, name), allowed, prefix="TrainConfig.")

        if self.task not in TASKS:
            bad("task", " | ".join(map(repr, TASKS)))
        for name in LIMITS:
            value = getattr(self, name)
            if value is None and name in ("d_k", "d_v"):
                continue
            lo, hi = LIMITS[name]
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= value <= hi:
                bad(
                    name,
                    _allowed_int(name) + (" or None (d_model // n_heads)" if name in ("d_k", "d_v") else ""),
                )
        for name in ("causal", "mlp"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                bad(name, "True or False")
        lr = self.lr
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (0 < lr <= LR_MAX):
            bad("lr", f"a number in (0, {LR_MAX:g}]")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", " | ".join(map(repr, OPTIMIZERS)))
        if self.dtype not in DTYPES:
            bad("dtype", " | ".join(map(repr, DTYPES)))
        if (self.d_k is None or self.d_v is None) and self.d_model % self.n_heads:
            bad("n_heads", f"a divisor of d_model={self.d_model} (or set d_k and d_v)")
        if self.task == "induction":
            if not self.causal:
                bad("causal", "True for the induction task (it is next-token prediction)")
            if self.seq_len < 6:
                bad("seq_len", "≥ 6 for induction (two copies of a span of at least 2, and room between)")
            need = self.seq_len - -(-self.seq_len // 4)
            if self.vocab < need:
                bad(
                    "vocab",
                    f"≥ {need} for induction with seq_len {self.seq_len} (distinct tokens but the repeat)",
                )
        elif self.causal and self.task in ("reverse", "sort"):
            bad(
                "causal",
                f"False for {self.task!r}: position i's answer may lie after i, which a causal mask hides",
            )

    @property
    def head_dims(self) -> tuple[int, int]:
        """`(d_k, d_v)` with None resolved."""
        default = self.d_model // self.n_heads
        return (self.d_k or default, self.d_v or default)

    # The Hugging Face names `pretrained.Checkpoint.config` has, so the Pretrained page can show a
    # trained model (`TrainedModel.config`) the way it shows any other checkpoint.
    @property
    def num_hidden_layers(self) -> int:
        return self.n_layers

    @property
    def num_attention_heads(self) -> int:
        return self.n_heads

    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def n_snapshots(self) -> int:
        return (self.steps - 1) // self.snapshot_every + 2  # step 0, every snapshot_every, the end

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        if not isinstance(data, dict):
            raise SpecError("config", data, "a dict of TrainConfig fields", prefix="TrainConfig.")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise SpecError("config", sorted(unknown), "TrainConfig field names", prefix="TrainConfig.")
        return cls(**data)


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
            f"({n * per / 2**20:.1f} MiB); a run keeps at most {MAX_SNAPSHOTS} and "
            f"{budget / 2**20:.0f} MiB. Allowed: snapshot_every ≥ {fewest}, or fewer steps.",
            n * per,
            budget,
        )


# -- parameters -----------------------------------------------------------------------------


def param_shapes(config: TrainConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in a fixed order (weights in `x @ W` layout)."""
    V, T, D, H = config.vocab, config.seq_len, config.d_model, config.n_heads
    Dk, Dv = config.head_dims
    shapes: dict[str, tuple[int, ...]] = {"embed.token": (V, D), "embed.position": (T, D)}
    for i in range(config.n_layers):
        p = f"layers.{i}."
        shapes |= {
            p + "attn.W_q": (D, H * Dk), p + "attn.b_q": (H * Dk,),
            p + "attn.W_k": (D, H * Dk), p + "attn.b_k": (H * Dk,),
            p + "attn.W_v": (D, H * Dv), p + "attn.b_v": (H * Dv,),
            p + "attn.W_o": (H * Dv, D), p + "attn.b_o": (D,),
            p + "ln1.gamma": (D,), p + "ln1.beta": (D,),
        }  # fmt: skip
        if config.mlp:
            shapes |= {
                p + "mlp.W_in": (D, 4 * D), p + "mlp.b_in": (4 * D,),
                p + "mlp.W_out": (4 * D, D), p + "mlp.b_out": (D,),
                p + "ln2.gamma": (D,), p + "ln2.beta": (D,),
            }  # fmt: skip
    return shapes | {"unembed.W": (D, V), "unembed.b": (V,)}


def init_params(config: TrainConfig) -> dict[str, np.ndarray]:
    """Deterministic starting weights (numpy, `config.dtype`) that both frameworks load.

    Embeddings ~ N(0, 1); weights ~ N(0, 1/fan_in); biases 0; LayerNorm gains 1.
    Drawn from `numpy.random.default_rng(config.seed)` in `param_shapes` order.
    """
    rng = np.random.default_rng(config.seed)
    params = {}
    for name, shape in param_shapes(config).items():
        last = name.rsplit(".", 1)[-1]
        if name.startswith("embed."):
            value = rng.standard_normal(shape)
        elif last.startswith("W"):
            value = rng.standard_normal(shape) / math.sqrt(shape[0])
        elif last == "gamma":
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        params[name] = value.astype(config.dtype)
    return params


def check_params(config: TrainConfig, params: Any) -> dict[str, np.ndarray]:
    """Starting weights a run can use: `param_shapes`' names and shapes, finite real numbers,
    each |value| ≤ `PARAM_MAX`; returned as `config.dtype` arrays.

    Raises:
        SpecError: naming the weight (`params['layers.0.attn.W_q']`) and what it must be.
    """
    shapes = param_shapes(config)
    if not isinstance(params, dict):
        raise SpecError("params", params, "a dict of arrays named as param_shapes(config) names them")
    extra = sorted(set(params) - set(shapes), key=str)
    if extra:
        raise SpecError(
            "params", extra, f"only the names of param_shapes(config), e.g. {next(iter(shapes))!r}"
        )
    out = {}
    for name, shape in shapes.items():
        field = f"params[{name!r}]"
        if name not in params:
            raise SpecError(field, None, f"an array of shape {shape} (the weight is missing)")
        try:
            value = np.asarray(params[name])
        except Exception:  # arrays that numpy cannot even build (ragged lists)
            value = np.asarray(None)
        if value.dtype.kind not in "fiu" or value.dtype == np.bool_:
            raise SpecError(field, params[name], f"real numbers of shape {shape}")
        if value.shape != shape:
            raise SpecError(field, params[name], f"shape {shape}", value_text=f"shape {value.shape}")
        finite = bool(np.isfinite(value).all())
        worst = float(np.max(np.abs(value), initial=0.0)) if finite else math.inf
        if not worst <= PARAM_MAX:
            raise SpecError(
                field,
                params[name],
                f"finite values with |w| ≤ {PARAM_MAX:g}",
                value_text=f"an array with largest |w| {worst:g}" if finite else "an array with NaN or inf",
            )
        out[name] = value.astype(config.dtype)
    return out


def check_threads(threads: Any, field: str = "threads") -> int:
    """An intra-op thread count from 1 to this machine's cores (`os.cpu_count()`, at most `MAX_THREADS`)."""
    most = min(MAX_THREADS, os.cpu_count() or 1)
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= most:
        raise SpecError(field, threads, f"an integer from 1 to {most} (this machine's cores)")
    return int(threads)
