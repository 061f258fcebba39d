"""The layer configurations both backends are proven on, written once.

Keras's MultiHeadAttention takes any head widths (d_k ≠ d_v); torch's
MultiheadAttention only d_model / heads, so `same_width` derives its cases
from the same list.
"""

import numpy as np

RNG = np.random.default_rng(5)


def custom(batch: int, lq: int, lk: int) -> np.ndarray:
    """A random mask in which every query keeps at least one key (torch's MHA gives NaN for an empty
    row and Keras spreads it evenly, where attnviz gives zeros: tested apart)."""
    mask = RNG.random((batch, lq, lk)) < 0.5
    mask[..., 0] = True
    return mask


CASES = [
    {"n_heads": 1},
    {"n_heads": 4, "d_k": 6, "d_v": 3, "mask": "causal"},
    {"n_heads": 8, "bias": False, "mask": "causal"},
    {"n_heads": 2, "batch": 3, "d_k": 3, "d_v": 9, "mask": "padding", "valid_kv_len": (8, 5, 1)},
    {"n_heads": 4, "batch": 2, "mask": "custom", "custom_mask": custom(2, 8, 8)},
    {"n_heads": 4, "mode": "cross", "len_kv": 5, "d_kv_in": 12, "d_k": 7, "d_v": 2},
    {"n_heads": 2, "mode": "cross", "len_kv": 11, "d_kv_in": 7, "bias": False, "mask": "padding", "valid_kv_len": 6},
    {"n_heads": 3, "mode": "cross", "batch": 2, "len_kv": 3, "d_k": 4, "d_v": 5, "mask": "custom", "custom_mask": custom(2, 8, 3)},
]  # fmt: skip


def same_width(cases: list[dict], d_model: int = 32) -> list[dict]:
    """The cases with d_k = d_v = d_model / heads (heads made a divisor of d_model)."""
    out = []
    for case in cases:
        case = {k: v for k, v in case.items() if k not in ("d_k", "d_v")}
        if d_model % case["n_heads"]:
            case["n_heads"] = 2
        out.append(case)
    return out


def case_id(case: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items() if k != "custom_mask")[:60]
