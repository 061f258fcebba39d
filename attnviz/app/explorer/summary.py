"""The explorer's per-head summary table and what its caption says (`interp.scores.head_summary`)."""

from __future__ import annotations

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
