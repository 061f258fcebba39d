"""Train a tiny transformer live, in PyTorch or TensorFlow, and watch its heads form.

The model (`attnviz.backends.torch_backend.train` / `tf_backend.train`, twins line for line):
token + position embeddings, then `n_layers` × [attnviz's own
`MultiHeadAttention`, residual + LayerNorm, optional ReLU MLP with residual +
LayerNorm] (post-LN, as in Vaswani et al., 2017), then an unembedding to
`vocab` logits. Both frameworks start from the same numpy weights
(`init_params`) and see the same numpy batches (`Batches`), so in float64
with plain SGD — or attnviz's Adam, written identically in both — their loss
curves agree to about 1e-15 (docs/training.md).

Tasks (inputs are `seq_len` tokens in `0 .. vocab-1`; position i predicts):
- copy: token i. reverse: token T−1−i. sort: the i-th smallest token.
- induction: random tokens in which a span of m distinct tokens occurs twice
  (m, both places and the gap drawn per sequence, so no fixed position or
  distance gives the answer); position i predicts token i+1 (next-token
  prediction with a causal mask). Loss and accuracy count predictions inside
  the second copy only, the part an induction head can predict (Olsson et
  al., 2022, "In-context learning and induction heads").

Held-out: sequences whose hash falls in one bucket of 64 (`held_out_rows`)
are never used for training; the held-out accuracy is measured on them.

Shapes: N probe sequences, L layers, H heads, T sequence length.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.errors import BudgetError, SpecError
from attnviz.frameworks import backend, check_framework

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


# -- data -------------------------------------------------------------------------------------


def held_out_rows(tokens: np.ndarray) -> np.ndarray:
    """Bool `(n,)`: which sequences belong to the held-out bucket (a fixed hash, 1 in 64)."""
    weights = np.array([(31**t) % 1_000_003 for t in range(tokens.shape[1])], np.int64)
    return ((tokens.astype(np.int64) * weights).sum(-1) * 2654435761 % 2**32) % HELD_OUT_BUCKETS == 0


def induction_halves(config: TrainConfig) -> tuple[int, int]:
    """The shortest and longest repeated span `m` of an induction sequence: ⌈T/6⌉ … T/3 (at least 2)."""
    return max(2, -(-config.seq_len // 6)), max(2, config.seq_len // 3)


def _draw(config: TrainConfig, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` sequences `(n, T)` and, for induction, where their second copy lies (bool `(n, T)`)."""
    T, V = config.seq_len, config.vocab
    if config.task != "induction":
        return rng.integers(0, V, size=(n, T)), np.zeros((n, T), bool)
    # Random tokens with a span r (m distinct tokens, none of them in the filler) written twice.
    # Span length, both places and the gap vary, so no fixed position or distance gives the
    # answer: only "find the earlier occurrence of this token and read what followed it" works.
    lo, hi = induction_halves(config)
    m = rng.integers(lo, hi + 1, size=(n, 1))
    free = T - 2 * m  # filler before, between and after the copies
    first = (rng.random((n, 1)) * (free + 1)).astype(int)
    gap = (rng.random((n, 1)) * (free - first + 1)).astype(int)
    second = first + m + gap
    perm = np.argsort(rng.random((n, V)), axis=1)
    r = perm[:, :hi]  # (n, m_max) distinct; the first m are used
    x = np.take_along_axis(perm, hi + rng.integers(0, V - hi, size=(n, T)), axis=1)  # filler: never in r
    j = np.arange(T)
    in_first, in_second = (j >= first) & (j < first + m), (j >= second) & (j < second + m)
    offset = np.clip(np.where(in_second, j - second, j - first), 0, hi - 1)
    x = np.where(in_first | in_second, np.take_along_axis(r, offset, axis=1), x)
    return x, in_second


def sample(
    config: TrainConfig, rng: np.random.Generator, n: int, *, held_out: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """`n` input sequences `(n, T)` int64 from the training part (or the held-out bucket),
    and where each one's second copy lies (induction; all False otherwise)."""
    xs, seconds = [], []
    got = 0
    for _ in range(10_000):
        x, second = _draw(config, rng, n if not held_out else max(n, 256) * HELD_OUT_BUCKETS // 4)
        keep = held_out_rows(x) == held_out
        xs.append(x[keep])
        seconds.append(second[keep])
        got += int(keep.sum())
        if got >= n:
            return np.concatenate(xs)[:n], np.concatenate(seconds)[:n]
    raise SpecError("seq_len", config.seq_len, "a task with enough distinct sequences to hold some out")


@dataclass(frozen=True)
class Batch:
    """Inputs `x (B, T)`, targets `y (B, T)`, and which positions count: `loss_w`, `acc_w (B, T)` float64."""

    x: np.ndarray
    y: np.ndarray
    loss_w: np.ndarray
    acc_w: np.ndarray


def make_batch(config: TrainConfig, x: np.ndarray, second: np.ndarray | None = None) -> Batch:
    """Targets and position weights for inputs `x (n, T)`.

    copy: y = x; reverse: y = x reversed; sort: y = sorted x; every position counts.
    induction: y[i] = x[i+1]; the loss and the accuracy count only predictions
    made inside the second copy (`second`, bool `(n, T)`) of a token that is also
    in it — each of which an induction head can read off the first copy. (The
    other predictions are pure chance: counting them adds only noise.)
    """
    n, T = x.shape
    loss_w = np.ones((n, T))
    if config.task == "copy":
        y = x.copy()
    elif config.task == "reverse":
        y = x[:, ::-1].copy()
    elif config.task == "sort":
        y = np.sort(x, axis=1)
    else:
        if second is None:
            raise SpecError("second", None, "a bool (n, T) array marking the second copy (induction)")
        y = np.zeros_like(x)
        y[:, :-1] = x[:, 1:]
        counted = np.zeros((n, T))
        counted[:, :-1] = second[:, :-1] & second[:, 1:]
        return Batch(x, y, counted, counted)
    return Batch(x, y, loss_w, loss_w)


class Batches:
    """Training batches, the same numpy arrays in every framework for one seed."""

    def __init__(self, config: TrainConfig):
        self.config = config
        self.rng = np.random.default_rng([config.seed, 1])

    def __next__(self) -> Batch:
        return make_batch(self.config, *sample(self.config, self.rng, self.config.batch))

    def __iter__(self):
        return self


def induction_probe(config: TrainConfig, n: int = PROBE_SIZE) -> np.ndarray:
    """Repeated random sequences `[r, r]` (`r` of T//2 distinct tokens when the vocabulary allows).

    Longer than any span the induction task trains on (≤ T/3), so a high score
    shows the general mechanism, not a memorised distance.
    """
    rng = np.random.default_rng([config.seed, 3])
    m = config.seq_len // 2
    if config.vocab >= m:
        half = np.argsort(rng.random((n, config.vocab)), axis=1)[:, :m]
    else:
        half = rng.integers(0, config.vocab, size=(n, m))
    x = np.concatenate([half, half], axis=1)
    return np.pad(x, ((0, 0), (0, config.seq_len - 2 * m)))  # odd T: one padding token at the end


def probe(config: TrainConfig, n: int = PROBE_SIZE) -> np.ndarray:
    """The fixed probe sequences `(n, T)` whose attention the snapshots keep.

    Held-out sequences of the task; for induction, `induction_probe`'s `[r, r]`.
    """
    if config.task == "induction":
        return induction_probe(config, n)
    return sample(config, np.random.default_rng([config.seed, 2]), n, held_out=True)[0]


def held_out(config: TrainConfig, n: int = HELD_OUT_SIZE) -> Batch:
    return make_batch(config, *sample(config, np.random.default_rng([config.seed, 4]), n, held_out=True))


# -- pattern scores ---------------------------------------------------------------------------


def mirror_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i puts on key T−1−i (the reverse task's anti-diagonal).

    Args:
        attn: `(..., N, T, T)` attention probabilities (N sequences).

    Returns:
        `(...)`: 1 for a perfect mirror, 1/T for uniform attention.
    """
    T = attn.shape[-1]
    i = np.arange(T)
    return attn[..., i, T - 1 - i].mean(axis=(-1, -2))


def previous_token_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i (i ≥ 1) puts on key i−1; `attn (..., N, T, T)` → `(...)`."""
    i = np.arange(1, attn.shape[-1])
    return attn[..., i, i - 1].mean(axis=(-1, -2))


def diagonal_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i puts on key i (itself); `attn (..., N, T, T)` → `(...)`."""
    i = np.arange(attn.shape[-1])
    return attn[..., i, i].mean(axis=(-1, -2))


def induction_score(attn: np.ndarray, half: int | None = None) -> np.ndarray:
    """Mean weight from a token in the second copy to the token after its first occurrence.

    On a repeated sequence `[r, r]` with `len(r) = half` (default T//2), query
    t ≥ half holds the token seen at t − half; an induction head attends to the
    token that followed it, key t − half + 1 (Olsson et al., 2022).

    Args:
        attn: `(..., N, T, T)` attention on repeated sequences.

    Returns:
        `(...)`: 1 for a perfect induction head.
    """
    half = attn.shape[-1] // 2 if half is None else half
    t = np.arange(half, 2 * half)
    return attn[..., t, t - half + 1].mean(axis=(-1, -2))


def entropy(attn: np.ndarray) -> np.ndarray:
    """Mean entropy (nats) of the attention rows: `(..., N, T, T)` → `(...)`; 0 = one key per query."""
    p = np.clip(attn, 0.0, 1.0)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(-1).mean(axis=(-1, -2))


SCORES = {
    "mirror": "weight on key T−1−i (reverse)",
    "previous_token": "weight on key i−1",
    "induction": "weight on the token after the earlier copy (repeated sequences)",
    "diagonal": "weight on itself (key i)",
    "entropy": "mean row entropy in nats (0 = focused)",
}


def pattern_scores(attn: np.ndarray, induction_attn: np.ndarray) -> dict[str, np.ndarray]:
    """Every score per head, each `(L, H)`.

    Args:
        attn: `(N, L, H, T, T)` on the task's probe.
        induction_attn: `(N, L, H, T, T)` on `induction_probe` sequences.
    """
    by_head = np.moveaxis(attn, 0, 2)  # (L, H, N, T, T)
    return {
        "mirror": mirror_score(by_head),
        "previous_token": previous_token_score(by_head),
        "induction": induction_score(np.moveaxis(induction_attn, 0, 2)),
        "diagonal": diagonal_score(by_head),
        "entropy": entropy(by_head),
    }


# -- training ---------------------------------------------------------------------------------


@dataclass
class TrainingRun:
    """A run so far (or finished).

    Attributes:
        history: one dict per step: `step` (1-based), `loss`, `accuracy` (training batch).
        snapshots: `(step, attentions (L, H, T, T))` for `probe[0]`, float32.
        scores: per snapshot, `step`, `elapsed_s` (training time so far), `held_out_accuracy`
            and each of `SCORES` as `(L, H)`.
        probe: `(N, T)` the probe sequences the scores average over.
        params: the final weights (numpy, `init_params` layout); None until finished.
        final_accuracy: held-out token accuracy at the end (None until finished).
        stopped: True when `should_stop` ended it early.
    """

    config: TrainConfig
    framework: str
    probe: np.ndarray
    history: list[dict[str, float]] = field(default_factory=list)
    snapshots: list[tuple[int, np.ndarray]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, np.ndarray] | None = None
    final_accuracy: float | None = None
    elapsed_s: float = 0.0
    stopped: bool = False

    @property
    def steps_done(self) -> int:
        return self.history[-1]["step"] if self.history else 0

    @property
    def finished(self) -> bool:
        return self.params is not None

    def score_series(self, name: str) -> np.ndarray:
        """`(snapshots, L, H)` of one score over time."""
        return np.stack([s[name] for s in self.scores])

    def history_csv(self) -> str:
        lines = ["step,loss,accuracy"]
        lines += [f"{h['step']},{h['loss']:.9g},{h['accuracy']:.6g}" for h in self.history]
        return "\n".join(lines) + "\n"

    def snapshots_npz(self) -> bytes:
        """`steps (S,)`, `attentions (S, L, H, T, T)`, `probe (N, T)` and every score `(S, L, H)`."""
        import io

        buf = io.BytesIO()
        arrays = {
            "steps": np.array([s for s, _ in self.snapshots]),
            "attentions": np.stack([a for _, a in self.snapshots]),
            "probe": self.probe,
            "held_out_accuracy": np.array([s["held_out_accuracy"] for s in self.scores]),
        }
        arrays |= {f"score_{name}": self.score_series(name) for name in SCORES}
        np.savez_compressed(buf, **arrays)
        return buf.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint directory (`config.json` + `model.safetensors`) that `load_checkpoint` opens."""
        if self.params is None:
            raise ValueError("save: the run has not finished; allowed: a finished or stopped run.")
        from safetensors.numpy import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {
            "model_type": MODEL_TYPE,
            "training_config": self.config.to_dict(),
            "framework": self.framework,
            "steps_done": self.steps_done,
            "final_accuracy": self.final_accuracy,
            "num_hidden_layers": self.config.n_layers,
            "num_attention_heads": self.config.n_heads,
            "hidden_size": self.config.d_model,
        }
        (path / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
        save_file(
            {k: np.ascontiguousarray(v) for k, v in self.params.items()}, str(path / "model.safetensors")
        )
        return path


def trainer_module(framework: str):
    """The framework's `train` module (`attnviz.backends.torch_backend.train` or its TensorFlow twin)."""
    check_framework(framework)
    module = backend(framework)
    if hasattr(module, "configure"):
        module.configure()
    return module.train


class Trainer:
    """Steps a model one at a time; `train` drives it, and the app interleaves two of them."""

    def __init__(
        self, config: TrainConfig, framework: str = "torch", params: dict[str, np.ndarray] | None = None
    ):
        check_budget(config)
        start = params if params is not None else init_params(config)
        self.model = trainer_module(framework).Model(config, start)
        self.config, self.batches = config, Batches(config)
        self.run = TrainingRun(config, framework, probe(config))
        self._induction_probe = induction_probe(config)
        self._held_out = held_out(config)
        self._elapsed = 0.0
        self._snapshot()

    @property
    def done(self) -> bool:
        return self.run.finished

    def held_out_accuracy(self) -> float:
        return self.model.accuracy(self._held_out)

    def _snapshot(self) -> None:
        attn = self.model.attentions(self.run.probe)  # (N, L, H, T, T)
        scores = pattern_scores(attn, self.model.attentions(self._induction_probe))
        step = self.run.steps_done
        self.run.snapshots.append((step, attn[0].astype(np.float32)))
        self.run.scores.append(
            {
                "step": step,
                "elapsed_s": self._elapsed,
                "held_out_accuracy": self.held_out_accuracy(),
                **scores,
            }
        )

    def step(self) -> None:
        """One optimisation step (and a snapshot when one is due)."""
        start = time.perf_counter()
        loss, accuracy = self.model.train_step(next(self.batches))
        self._elapsed += time.perf_counter() - start
        if not math.isfinite(loss):
            raise ValueError(
                f"lr: training diverged at step {self.run.steps_done + 1} (loss {loss}); allowed: a smaller lr."
            )
        self.run.history.append({"step": self.run.steps_done + 1, "loss": loss, "accuracy": accuracy})
        self.run.elapsed_s = self._elapsed
        if self.run.steps_done % self.config.snapshot_every == 0 and self.run.steps_done < self.config.steps:
            self._snapshot()

    def finish(self, stopped: bool = False) -> TrainingRun:
        """End the run: a last snapshot, the final weights and the held-out accuracy."""
        if not self.done:
            if self.run.snapshots[-1][0] != self.run.steps_done:
                self._snapshot()
            self.run.stopped = stopped
            self.run.final_accuracy = self.run.scores[-1]["held_out_accuracy"]
            self.run.params = self.model.params()
        return self.run


def train(
    config: TrainConfig,
    framework: str = "torch",
    *,
    callback: Callable[[TrainingRun], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    params: dict[str, np.ndarray] | None = None,
    threads: int = 1,
) -> TrainingRun:
    """Train `config` in `framework` with attnviz's own `MultiHeadAttention`.

    Args:
        callback: called with the run so far after each snapshot (step 0 included).
        should_stop: polled before every step; True ends training, keeping what was done.
        params: starting weights (default `init_params(config)`).
        threads: PyTorch intra-op threads for this call, in this thread only
            (restored after); tiny models are fastest on one. TensorFlow keeps
            the process's setting (its pools are fixed at start-up).

    Returns:
        The finished (or stopped) `TrainingRun`; `elapsed_s` counts the steps only.

    Raises:
        SpecError: a bad framework; BudgetError: too many snapshots (`check_budget`);
        ValueError: the loss diverged (lower `lr`).
    """
    trainer = Trainer(config, framework, params)
    if callback:
        callback(trainer.run)
    stopped = False
    with trainer_module(framework).thread_limit(threads):
        while trainer.run.steps_done < config.steps:
            if should_stop and should_stop():
                stopped = True
                break
            before = len(trainer.run.snapshots)
            trainer.step()
            if callback and len(trainer.run.snapshots) > before:
                callback(trainer.run)
        run = trainer.finish(stopped)
    if callback:
        callback(run)
    return run


def steps_per_second(
    config: TrainConfig,
    framework: str = "torch",
    impl: str = "attnviz",
    *,
    steps: int = 100,
    warmup: int = 10,
    threads: int = 1,
) -> float:
    """Training steps per second of `config`'s model, data excluded (batches made beforehand).

    `impl` "attnviz" uses attnviz's `MultiHeadAttention`; "native" the same model
    with the framework's own layer (`nn.MultiheadAttention(need_weights=False)` /
    `keras.layers.MultiHeadAttention`), everything else identical. `threads` as in `train`.
    """
    if impl not in ("attnviz", "native"):
        raise SpecError("impl", impl, "'attnviz' | 'native'")
    model = trainer_module(framework).Model(config, init_params(config), native=impl == "native")
    batches = Batches(config)
    data = [next(batches) for _ in range(warmup + steps)]
    with trainer_module(framework).thread_limit(threads):
        for batch in data[:warmup]:
            model.train_step(batch)
        start = time.perf_counter()
        for batch in data[warmup:]:
            model.train_step(batch)
        return steps / (time.perf_counter() - start)


# -- checkpoints ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainedOutput:
    """What `TrainedModel.run` returns (the fields `pretrained.EncoderOutput` has, plus logits).

    Attributes:
        tokens: the input tokens as text.
        attentions: `(L, H, T, T)`.
        last_hidden_state: `(T, d_model)`.
        logits: `(T, vocab)`.
    """

    tokens: list[str]
    attentions: np.ndarray
    last_hidden_state: np.ndarray
    framework: str
    logits: np.ndarray


class TrainedModel:
    """A saved training-lab model: `config`, `params`, and `run(text, framework)`."""

    def __init__(self, path: Path, config: TrainConfig, params: dict[str, np.ndarray], meta: dict):
        self.path, self.name, self.config, self.params, self.meta = path, path.name, config, params, meta
        self._models: dict[str, Any] = {}

    def encode(self, text: str) -> list[int]:
        """Token ids from text: integers in `0 .. vocab-1`, separated by spaces or commas."""
        words = text.replace(",", " ").split() if isinstance(text, str) else []
        V, T = self.config.vocab, self.config.seq_len
        allowed = f"1 to {T} integers from 0 to {V - 1}, separated by spaces"
        if not 1 <= len(words) <= T or not all(w.isdigit() and int(w) < V for w in words):
            raise SpecError("text", text, allowed)
        return [int(w) for w in words]

    def run(self, text: str, framework: str = "torch", text_pair: str | None = None) -> TrainedOutput:
        """Run the model on `text` in `framework`."""
        if text_pair:
            raise SpecError("text_pair", text_pair, "None (a training-lab model reads one sequence)")
        ids = np.array([self.encode(text)])
        if framework not in self._models:
            self._models[framework] = trainer_module(framework).Model(self.config, self.params)
        logits, hidden, attn = self._models[framework].forward_numpy(ids)
        return TrainedOutput([str(i) for i in ids[0]], attn[0], hidden[0], framework, logits[0])


def load_checkpoint(path: str | Path) -> TrainedModel:
    """Open a directory written by `TrainingRun.save`.

    Raises:
        ValueError: missing files, another `model_type`, or weights that do not fit the config.
    """
    from safetensors.numpy import load_file

    path = Path(path)
    config_file, weights_file = path / "config.json", path / "model.safetensors"
    if not config_file.exists() or not weights_file.exists():
        raise ValueError(f"source: {path} needs config.json and model.safetensors.")
    meta = json.loads(config_file.read_text())
    if meta.get("model_type") != MODEL_TYPE:
        raise ValueError(f"config.json: model_type {meta.get('model_type')!r}; allowed: {MODEL_TYPE!r}.")
    config = TrainConfig.from_dict(meta["training_config"])
    params = load_file(str(weights_file))
    shapes = param_shapes(config)
    if {k: tuple(v.shape) for k, v in params.items()} != shapes:
        raise ValueError(f"model.safetensors: the weights do not match config.json's sizes ({path}).")
    return TrainedModel(path, config, {k: params[k] for k in shapes}, meta)


# -- background runs (the app) ----------------------------------------------------------------


class TrainingJob:
    """Trains one or several frameworks from the same start in a background thread.

    The frameworks take turns, `snapshot_every` steps each, so their runs grow
    side by side; `runs` can be read at any time (lists only grow). `stop()`
    ends training and keeps what was done. Holds no Streamlit state.
    """

    def __init__(
        self, config: TrainConfig, frameworks: list[str], params: dict[str, np.ndarray] | None = None
    ):
        start = init_params(config) if params is None else params
        self.config = config
        self.trainers = {fw: Trainer(config, fw, start) for fw in frameworks}
        self.runs = {fw: t.run for fw, t in self.trainers.items()}
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="attnviz-training", daemon=True)

    def start(self) -> TrainingJob:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def done(self) -> bool:
        return all(run.finished for run in self.runs.values())

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _work(self) -> None:
        limits = contextlib.ExitStack()
        try:
            for fw in self.trainers:
                limits.enter_context(trainer_module(fw).thread_limit(1))  # this thread only
            while not self._stop.is_set() and any(
                r.steps_done < self.config.steps for r in self.runs.values()
            ):
                for trainer in self.trainers.values():
                    for _ in range(self.config.snapshot_every):
                        if self._stop.is_set() or trainer.run.steps_done >= self.config.steps:
                            break
                        trainer.step()
        except ValueError as error:  # diverged: keep what was trained, say why
            self.error = str(error)
        except Exception as error:  # the thread's end: say what happened rather than die silently
            self.error = f"training failed: {type(error).__name__}: {error}"
        finally:
            for trainer in self.trainers.values():
                trainer.finish(stopped=self._stop.is_set() or self.error is not None)
            limits.close()


SHARED_DIR = Path(tempfile.gettempdir()) / "attnviz-training"
_SHARED_ID = re.compile(r"^[0-9a-f]{16}$")


def share(run: TrainingRun) -> str:
    """Save `run` as a checkpoint under `SHARED_DIR` and return its id (for a link to the Pretrained page)."""
    run_id = uuid.uuid4().hex[:16]
    run.save(SHARED_DIR / run_id)
    return run_id


def shared_checkpoint(run_id: str) -> Path:
    """The checkpoint directory `share` wrote for `run_id`.

    Raises:
        SpecError: not an id `share` gives (16 hex digits), or no such checkpoint on this server.
    """
    if not isinstance(run_id, str) or not _SHARED_ID.match(run_id) or not (SHARED_DIR / run_id).is_dir():
        raise SpecError("trained", run_id, "the id of a run saved on this server by the Training lab")
    return SHARED_DIR / run_id
