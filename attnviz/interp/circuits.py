"""From a toy circuit to a real one: do a model's induction heads do what the scan says?

Ablate the `k` heads the role scan ranks highest for induction, and — for comparison —
as many heads drawn at random from the rest, and measure the model's loss on the second
half of repeated random sequences (the half an induction head can predict). If the scan
found the circuit, the loss rises for the first and not for the second.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.interp.roles import RoleScan

RANDOM_DRAWS = 5


@dataclass(frozen=True)
class AblationComparison:
    """Second-half loss (nats per token) with and without ablations.

    Attributes:
        baseline: no head ablated.
        top: the `k` best induction heads ablated (`top_heads`).
        random: one loss per random draw of `k` other heads (`random_heads`), and their mean
            in `random_mean`.
    """

    baseline: float
    top: float
    top_heads: list[tuple[int, int]]
    random: list[float]
    random_heads: list[list[tuple[int, int]]]

    @property
    def random_mean(self) -> float:
        return float(np.mean(self.random))


def second_half_loss(logits: np.ndarray, ids: np.ndarray) -> float:
    """Mean cross-entropy of predicting `ids[t + 1]` from `logits[t]` for t in the second half.

    Args:
        logits: `(T, vocab)`; ids: `(T,)` with T = 2·half.
    """
    half = len(ids) // 2
    t = np.arange(half, len(ids) - 1)
    z = logits[t].astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-log_probs[np.arange(len(t)), ids[t + 1]].mean())


def loss_with(
    ckpt,
    ids: np.ndarray,
    framework: str,
    heads: list[tuple[int, int]],
    step: Callable[[], None] = lambda: None,
) -> float:
    """Mean second-half loss over the rows of `ids (N, T)` with `heads` zero-ablated; `step()` after
    each row's run (`induction_ablation` counts the runs there)."""
    ablate = {head: "zero" for head in heads} or None
    losses = []
    for row in ids:
        losses.append(
            second_half_loss(ckpt.run_ids([int(t) for t in row], framework, ablate=ablate).logits, row)
        )
        step()
    return float(np.mean(losses))


def induction_ablation(
    ckpt,
    scan: RoleScan,
    k: int,
    framework: str = "torch",
    *,
    seed: int = 0,
    monitor: Monitor | None = None,
) -> AblationComparison:
    """Ablate the top-`k` induction heads of `scan`, then `RANDOM_DRAWS` random sets of `k` others.

    `monitor` is told `(done, total)` after each of the model's runs; a stop ends the work (`Stop`).
    """
    L, H = scan.scores["induction"].shape
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= L * H // 2:
        raise SpecError("k", k, f"an integer 1 … {L * H // 2} (half the model's {L * H} heads)")
    top = [(layer, head) for layer, head, _ in scan.top("induction", int(k))]
    others = [(layer, head) for layer in range(L) for head in range(H) if (layer, head) not in top]
    rng = np.random.default_rng(seed)
    draws = [
        [others[i] for i in sorted(rng.choice(len(others), size=int(k), replace=False))]
        for _ in range(RANDOM_DRAWS)
    ]
    total, done, monitor = (2 + RANDOM_DRAWS) * len(scan.ids), itertools.count(1), watch(monitor)

    def step() -> None:
        monitor.step(next(done), total)

    return AblationComparison(
        baseline=loss_with(ckpt, scan.ids, framework, [], step),
        top=loss_with(ckpt, scan.ids, framework, top, step),
        top_heads=top,
        random=[loss_with(ckpt, scan.ids, framework, heads, step) for heads in draws],
        random_heads=draws,
    )
