"""The tasks' data: batches, the probe sequences the snapshots keep, and the held-out bucket.

Tasks (inputs are `seq_len` tokens in `0 .. vocab-1`; position i predicts):
copy: token i. reverse: token T−1−i. sort: the i-th smallest token. induction:
random tokens in which a span of m distinct tokens occurs twice; position i
predicts token i+1, counted only inside the second copy (Olsson et al., 2022).
Sequences whose hash falls in one bucket of 64 (`held_out_rows`) are never trained on.
Shapes: n sequences, T sequence length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.pretrained.families.lab import TrainConfig
from attnviz.training.config import HELD_OUT_BUCKETS, HELD_OUT_SIZE, PROBE_SIZE


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
