"""The explorer's per-head summary table and what its caption says (`interp.scores.head_summary`).

`attnviz.interp` is imported at the table's first use, not with the page: importing the package
imports every analysis it offers (attribution patching, and through it the pretrained models'
package, ≈ 0.27 s), and on a server's first visit that import would come before the first chart
(docs/performance.md, "The first chart").
"""

from __future__ import annotations

import numpy as np

ENTROPY = (
    "Entropy: how spread a row's weights are (mean over the queries). “of max”: each row's entropy as a "
    "share of the most it can reach, log of the keys the mask allows that row (rows with one allowed "
    "key are left out) — near 100 % = spread evenly over what it may see; near 0 = focused."
)


def caption(summary: list[dict]) -> str:
    """The table's caption: the entropy's reading, and the rows with one allowed key left out, if any."""
    single = max((r["single_key_rows"] for r in summary), default=0)
    if not single:
        return ENTROPY
    return (
        f"{ENTROPY} “max weight”, “looks most at” and “share” also leave out the {single} "
        f"row{'s' * (single != 1)} with one allowed key (its weight is 1 whatever the head does), as the "
        "heatmaps' colour scale does."
    )


def table(weights: np.ndarray, k_labels: list[str], allowed: np.ndarray | None) -> tuple[list[dict], str]:
    """The table's rows (one per head) and its caption, from one batch item's `(H, Lq, Lk)` weights and
    its `(Lq, Lk)` allowed mask (None: no mask)."""
    from attnviz.interp.scores import head_summary, looks_most_at

    summary = head_summary(weights, k_labels, allowed)
    rows = [
        {
            "head": r["head"],
            "entropy (nats)": round(r["entropy"], 3),
            "of max": "—" if r["of_max"] is None else f"{r['of_max']:.0%}",
            "max weight": round(r["max_weight"], 3),
            "looks most at": looks_most_at(r),
            "share": f"{r['top_key_share']:.0%}",
        }
        for r in summary
    ]
    return rows, caption(summary)
