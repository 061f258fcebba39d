"""The neuron view: how one query token's attention comes out of q and k, number by number.

After bertviz's neuron view (Vig, 2019, "A Multiscale Visualization of
Attention in the Transformer Model"): for one layer, head and query token,
the query vector q, each key vector k_j, their element-wise product q ⊙ k_j,
its sum (the score q·k_j), the scaled score, the masked score and the
softmax. The numbers come from the steps a run records
(`Checkpoint.run(..., capture_layer=l)` or `run_attention(..., capture=True)`),
so they are the numbers the model used, in either framework.
Shapes: T keys, Dk head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError


@dataclass(frozen=True)
class NeuronView:
    """One query's attention in one head.

    Attributes:
        q: `(Dk,)` the query vector.
        k: `(T, Dk)` the key vectors.
        qk: `(T, Dk)` q ⊙ k_j, whose rows sum to `scores`.
        scores: `(T,)` q·k_j.
        scaled: `(T,)` scores · scale.
        masked: `(T,)` with blocked keys at -inf (None without a mask).
        weights: `(T,)` the softmax: the attention of this query.
    """

    q: np.ndarray
    k: np.ndarray
    qk: np.ndarray
    scores: np.ndarray
    scaled: np.ndarray
    masked: np.ndarray | None
    weights: np.ndarray


def neuron_view(steps: list, head: int, query: int, batch: int = 0) -> NeuronView:
    """The neuron view of `head` and `query` from a run's recorded `steps`.

    Raises:
        SpecError: the steps lack what is needed (capture was off), or `head` / `query` is out of range.
    """
    found = {s.name: s.value for s in steps}
    missing = [n for n in ("q_heads", "k_heads", "scores", "scaled", "softmax") if n not in found]
    if missing:
        raise SpecError("steps", f"{len(steps)} steps", "the steps of a captured layer (capture_layer=…)")
    _, H, Lq, _ = found["q_heads"].shape  # (B, H, Lq, Dk)
    if not (isinstance(head, int | np.integer) and 0 <= head < H):
        raise SpecError("head", head, f"0 … {H - 1}")
    if not (isinstance(query, int | np.integer) and 0 <= query < Lq):
        raise SpecError("query", query, f"0 … {Lq - 1}")
    # q and k as the scores use them: after rotary positions (q_rope, k_rope) and with each K/V
    # head repeated for the query heads it serves (k_repeated), where the layer has those steps.
    q = found.get("q_rope", found["q_heads"])[batch, head, query]  # (Dk,)
    k = found.get("k_repeated", found.get("k_rope", found["k_heads"]))[batch, head]  # (T, Dk)
    row = lambda name: found[name][batch, head, query] if name in found else None  # noqa: E731
    return NeuronView(q, k, q * k, row("scores"), row("scaled"), row("masked"), row("softmax"))
