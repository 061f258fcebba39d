"""Attribution patching: a first-order estimate of every head's patching effect from one backward pass.

Patching head h of layer l moves its output from `z_corrupted` to `z_clean`; to first order the
logit difference then moves by `(z_clean − z_corrupted) · ∂(logit[answer] − logit[wrong])/∂z`, the
gradient taken on the corrupted run (Nanda, 2023, "Attribution patching"; Syed et al., 2023). One
clean forward, one corrupted forward and one backward give every head's estimate, against one
patched run per head for exact patching (`patching.sweep`). The estimate is linear: where a
head's effect goes through a saturated softmax (attention weights near 0 or 1, whose gradient is
small) or a sharp nonlinearity, it can miss it (Kramár et al., 2024, "AtP*").

Shapes: L layers, H heads, T tokens, D hidden size, Dh head width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.interp.patching import PatchingResult, check_gap, check_prompts
from attnviz.pretrained.sampling import check_k


def attribution(
    ckpt,
    clean: str,
    corrupted: str,
    answer: str | int,
    wrong: str | int,
    framework: str = "torch",
    *,
    device: str = "cpu",
) -> PatchingResult:
    """Every head's estimated share of `clean_diff − corrupted_diff`, as `patching.sweep` measures it.

    `restored[l, h]` is Σ over positions and head width of `(z_clean − z_corrupted) · ∂diff/∂z` at
    the corrupted run, divided by `clean_diff − corrupted_diff`; `z` is each head's input to the
    output projection, `diff = logit[answer] − logit[wrong]` at the last position.

    Args:
        clean, corrupted: two prompts with the same number of tokens.
        answer, wrong: token ids or one-token texts.
        device: "cpu" | "gpu" | "auto": where the forward and backward passes compute.
    """
    a, w, clean_ids, corrupted_ids = check_prompts(ckpt, clean, corrupted, answer, wrong)
    base = ckpt.run_ids(clean_ids, framework, head_outputs=True, device=device)
    model = ckpt.model(framework, device)
    direction = np.zeros(base.logits.shape[-1], np.float32)  # (V,): logit[answer] − logit[wrong]
    direction[a], direction[w] = 1.0, -1.0
    grads, z_corrupted, corrupted_diff = model.attention_gradients(corrupted_ids, direction)  # (L, T, D)
    clean_diff = float(base.logits[-1, a]) - float(base.logits[-1, w])
    gap = check_gap(clean_diff, corrupted_diff, corrupted)
    L, H, T, Dh = z_corrupted.shape
    W_o = np.stack([ckpt.layer_params(i)["W_o"] for i in range(L)]).astype(np.float64)  # (L, H·Dh, D)
    # a = merged @ W_o + b, merged = the heads side by side: ∂diff/∂z = ∂diff/∂a · W_oᵀ
    grad_z = np.einsum("ltD,lkD->ltk", grads.astype(np.float64), W_o).reshape(L, T, H, Dh)
    delta = base.head_outputs.astype(np.float64) - z_corrupted  # (L, H, T, Dh)
    restored = np.einsum("lhtd,lthd->lh", delta, grad_z) / gap
    labels = ckpt.labels
    return PatchingResult(
        restored, np.ones((L, H), bool), clean_diff, corrupted_diff, labels(clean_ids),
        labels(corrupted_ids), *labels([a, w]),
    )  # fmt: skip


@dataclass(frozen=True)
class Agreement:
    """How far the estimate can be trusted on one prompt pair: exact patching against attribution.

    Attributes:
        rho: Spearman's rank correlation over all heads (1: the same order; NaN where a map is
            constant, as `scipy.stats.spearmanr` gives).
        overlap: how many of the exact top `k` heads (by |restored|) the estimate's top `k` holds.
        k: the size of the top sets.
        disagree: the heads whose estimate misses the exact value most, as
            `(layer, head, exact, estimate)`, worst first.
    """

    rho: float
    overlap: int
    k: int
    disagree: list[tuple[int, int, float, float]]


def agreement(exact: np.ndarray, estimate: np.ndarray, k: int = 10, worst: int = 5) -> Agreement:
    """Compare `exact (L, H)` (`patching.sweep`) with `estimate (L, H)` (`attribution`).

    Spearman's ρ is Pearson's r of the two maps' ranks, tied values sharing their mean rank (as
    `scipy.stats.spearmanr`); the top sets rank heads by |value|.
    """
    x, y = np.asarray(exact, np.float64), np.asarray(estimate, np.float64)
    if x.ndim != 2 or x.shape != y.shape or not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise SpecError(
            "estimate", estimate, f"a finite (L, H) map of the exact map's shape {x.shape}",
            value_text=f"an array of shape {y.shape}",
        )  # fmt: skip
    check_k("k", k, none_ok=False)
    check_k("worst", worst, none_ok=False)
    H, (x, y), k = x.shape[1], (x.ravel(), y.ravel()), min(k, x.size)
    rx, ry = _ranks(x), _ranks(y)
    rho = float(np.corrcoef(rx, ry)[0, 1]) if rx.std() > 0 and ry.std() > 0 else float("nan")
    top_x, top_y = (set(np.argsort(-np.abs(v), kind="stable")[:k].tolist()) for v in (x, y))
    gaps = np.argsort(-np.abs(x - y), kind="stable")[:worst]
    return Agreement(rho, len(top_x & top_y), k, [(int(i // H), int(i % H), x[i], y[i]) for i in gaps])


def _ranks(v: np.ndarray) -> np.ndarray:
    """`(n,)` ranks 0 … n − 1 of `v (n,)`, tied values given the mean of the ranks they share."""
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(v.size)
    _, group, count = np.unique(v, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / count)[group]
