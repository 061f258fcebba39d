"""Downloads: configuration as JSON, captured steps as .npz, weights as CSV."""

from __future__ import annotations

import io
import json

import numpy as np

from attnviz.result import AttentionResult
from attnviz.spec import AttentionSpec


def config_json(spec: AttentionSpec, **extra) -> bytes:
    """The spec's fields (plus `extra`, e.g. framework and device) as JSON."""
    return json.dumps({**spec.as_dict(), **extra}, indent=2).encode()


def steps_npz(result: AttentionResult) -> bytes:
    """Every captured step, plus output and weights, as a NumPy .npz archive."""
    buf = io.BytesIO()
    arrays = {f"{i:02d}_{s.name}": s.value for i, s in enumerate(result.steps)}
    np.savez_compressed(buf, **arrays, output=result.output, weights=result.weights)
    return buf.getvalue()


def weights_csv(result: AttentionResult, q_labels=None, k_labels=None) -> bytes:
    """Long-format CSV: batch, head, query, key, weight (one row per cell)."""
    import pandas as pd  # only when a CSV is asked for

    B, H, Lq, Lk = result.weights.shape
    b, h, i, j = (a.ravel() for a in np.indices((B, H, Lq, Lk)))
    frame = pd.DataFrame(
        {
            "batch": b,
            "head": h,
            "query_pos": i,
            "query": np.asarray(q_labels or range(Lq), dtype=object)[i],
            "key_pos": j,
            "key": np.asarray(k_labels or range(Lk), dtype=object)[j],
            "weight": result.weights.ravel(),
        }
    )
    return frame.to_csv(index=False, float_format="%.8g").encode()
