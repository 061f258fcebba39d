"""Attention masks as boolean NumPy arrays: True = may attend.

attnviz has one convention. The seeds disagree (seed 000's PyTorch code keeps
positions where `mask == 1`, its TensorFlow code and seed 003 add
`mask * -1e9`, so 1 = blocked); `CONVENTIONS` and `to_convention` spell out
each framework's convention for the app's explainer. A custom mask travels in a
link as text (`encode_mask` / `decode_mask`: three URL-safe forms, read back at any shape).
"""

from __future__ import annotations

import base64
import re

import numpy as np

from attnviz.errors import SpecError
from attnviz.spec import AttentionSpec


def causal(len_q: int, len_kv: int | None = None) -> np.ndarray:
    """Query i may attend to keys 0..i. Shape `(Lq, Lk)`."""
    len_kv = len_q if len_kv is None else len_kv
    return np.tril(np.ones((len_q, len_kv), dtype=bool))


def window(len_q: int, len_kv: int | None = None, size: int = 1) -> np.ndarray:
    """The causal sliding window (Mistral): query i may attend key j iff `i − size < j ≤ i`. Shape `(Lq, Lk)`."""
    len_kv = len_q if len_kv is None else len_kv
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]  # (Lq, Lk) = i - j
    return (offset >= 0) & (offset < size)


def padding(valid_kv_len, len_q: int, len_kv: int) -> np.ndarray:
    """Keys at positions >= valid length are padding. Shape `(B, Lq, Lk)`."""
    valid = np.atleast_1d(np.asarray(valid_kv_len))  # (B,)
    keep = np.arange(len_kv)[None, :] < valid[:, None]  # (B, Lk)
    return np.broadcast_to(keep[:, None, :], (len(valid), len_q, len_kv)).copy()


def sliding_window(len_q: int, len_kv: int, width: int, causal_only: bool = True) -> np.ndarray:
    """Query i sees keys within `width` positions (only earlier ones if causal: `window`)."""
    if causal_only:
        return window(len_q, len_kv, width)
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]  # (Lq, Lk) = i - j
    return np.abs(offset) < width


def strided(len_q: int, len_kv: int, stride: int) -> np.ndarray:
    """Sparse-Transformer-style: key j visible if (i - j) is a multiple of stride."""
    offset = np.arange(len_q)[:, None] - np.arange(len_kv)[None, :]
    return offset % stride == 0


def block_diagonal(len_q: int, len_kv: int, block: int) -> np.ndarray:
    """Queries and keys in the same block of `block` positions see each other."""
    return (np.arange(len_q)[:, None] // block) == (np.arange(len_kv)[None, :] // block)


def from_spec(spec: AttentionSpec) -> np.ndarray | None:
    """The spec's mask (its sliding window included) as bool `(B, Lq, Lk)`, or None when nothing is blocked."""
    if spec.mask == "none":
        return None
    if spec.mask == "causal" and spec.window is not None:
        mask = window(spec.len_q, spec.len_kv, spec.window)
    elif spec.mask == "causal":
        mask = causal(spec.len_q, spec.len_kv)
    elif spec.mask == "padding":
        mask = padding(spec.valid_kv_len, spec.len_q, spec.len_kv)
    else:
        mask = np.asarray(spec.custom_mask)
    return np.broadcast_to(mask, (spec.batch, spec.len_q, spec.len_kv)).copy()


def empty_rows(mask: np.ndarray | None, batch: int, len_q: int) -> np.ndarray:
    """Query rows with no allowed key: bool `(B, Lq)`."""
    if mask is None:
        return np.zeros((batch, len_q), dtype=bool)
    return ~np.asarray(mask).any(axis=-1)


# How each API reads a mask. `attend` is the value that means "may attend"; `title` names
# the convention in a panel, `code` is a short call that passes such a mask.
CONVENTIONS = {
    "attnviz / torch SDPA attn_mask (bool)": {
        "attend": True,
        "title": "attnviz · SDPA (bool)",
        "code": "F.scaled_dot_product_attention(\n    q, k, v, attn_mask=mask)",
        "meaning": "True = may attend",
    },
    "torch.nn.MultiheadAttention attn_mask / key_padding_mask (bool)": {
        "attend": False,
        "title": "torch MultiheadAttention (bool)",
        "code": "mha(x, x, x, attn_mask=~mask)",
        "meaning": "True = blocked",
    },
    "keras.layers.MultiHeadAttention attention_mask": {
        "attend": 1,
        "title": "Keras MultiHeadAttention",
        "code": "mha(x, x, attention_mask=mask)",
        "meaning": "1 = may attend",
    },
    "additive mask · −1e9 (TensorFlow tutorial style)": {
        "attend": 0,
        "title": "additive mask · −1e9",
        "code": "logits += mask * -1e9",
        "meaning": "1 = blocked",
    },
}


def to_convention(mask: np.ndarray, convention: str) -> np.ndarray:
    """Encode a True = attend mask the way `convention` expects it."""
    attend = CONVENTIONS[convention]["attend"]
    mask = np.asarray(mask, dtype=bool)
    encoded = mask if attend else ~mask
    return encoded if isinstance(attend, bool) else encoded.astype(np.int64)


def from_convention(encoded: np.ndarray, convention: str) -> np.ndarray:
    """Decode `encoded` as `convention` reads it back into True = attend."""
    attend = CONVENTIONS[convention]["attend"]
    return np.asarray(encoded) == attend


def misread(mask: np.ndarray, built_for: str, passed_to: str) -> np.ndarray:
    """The mask an API expecting `passed_to` applies when given `mask` encoded for `built_for`."""
    return from_convention(to_convention(mask, built_for), passed_to)


# -- custom mask text encoding ----------------------------------------------------
#
# Three forms, all made of URL-safe characters (letters, digits, "-", "_", "."), so a
# link carries them without percent-escapes:
#   rows      "1000.1100.1110.1111"     one 0/1 row per query, joined by "."; readable,
#                                       written up to READABLE_SIDE × READABLE_SIDE
#   runs      "r4x4.1.1.3.2.2.3.1.4"    shape, first value, then the lengths (base 36)
#                                       of the runs of equal cells, row by row
#   packed    "p4x4.yMw"                shape, then the cells as bits, base64url
# Larger masks take the shorter of runs and packed: a 512 × 512 mask needs at most
# 43,700 characters packed, a few thousand as runs when it has structure.

READABLE_SIDE = 16
MAX_MASK_CODE = 60_000  # characters; the server refuses URLs far above this (~130 kB)
_SHAPED = re.compile(r"([rp])(\d{1,4})x(\d{1,4})\.(.*)", re.DOTALL)


def _runs(flat: np.ndarray) -> str:
    edges = np.flatnonzero(np.diff(flat.astype(np.int8))) + 1
    lengths = np.diff(np.concatenate([[0], edges, [flat.size]]))
    return ".".join(np.base_repr(int(n), 36).lower() for n in lengths)


def encode_mask(mask: np.ndarray) -> str:
    """A bool `(Lq, Lk)` mask as text for the URL (see the forms above).

    Raises:
        SpecError: (field "custom_mask") the code would not fit in a link.
    """
    m = np.asarray(mask, bool)
    len_q, len_kv = m.shape
    if len_q <= READABLE_SIDE and len_kv <= READABLE_SIDE:
        return ".".join("".join("1" if v else "0" for v in row) for row in m)
    flat = m.ravel()
    shape = f"{len_q}x{len_kv}"
    runs = f"r{shape}.{int(flat[0])}.{_runs(flat)}"
    packed = f"p{shape}." + base64.urlsafe_b64encode(np.packbits(flat).tobytes()).decode().rstrip("=")
    code = min(runs, packed, key=len)
    if len(code) > MAX_MASK_CODE:
        raise SpecError(
            "custom_mask",
            f"a {len_q} × {len_kv} mask",
            f"a mask whose link code fits in {MAX_MASK_CODE:,} characters (this one needs {len(code):,}); "
            "use a preset or smaller lengths",
        )
    return code


def _decode_shaped(kind: str, len_q: int, len_kv: int, body: str) -> np.ndarray:
    cells = len_q * len_kv
    if kind == "p":
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        flat = np.unpackbits(np.frombuffer(raw, np.uint8))[:cells].astype(bool)
    else:
        first, *lengths = body.split(".")
        counts = [int(n, 36) for n in lengths]
        if first not in ("0", "1") or sum(counts) != cells or min(counts, default=0) < 1:
            raise ValueError("runs")  # checked before np.repeat allocates anything
        values = (np.arange(len(counts)) + int(first)) % 2 == 1
        flat = np.repeat(values, counts)
    if flat.size != cells:
        raise ValueError("size")
    return flat.reshape(len_q, len_kv)


def read_mask(code: str) -> np.ndarray | None:
    """The mask a code describes at its own shape; None for an empty code.

    Raises:
        ValueError: the code is not one of the forms above.
    """
    code = (code or "").strip()
    if not code:
        return None
    shaped = _SHAPED.fullmatch(code)
    if shaped:
        kind, len_q, len_kv, body = shaped.groups()
        if not 0 < int(len_q) * int(len_kv) <= 1024 * 1024:
            raise ValueError("shape")
        return _decode_shaped(kind, int(len_q), int(len_kv), body)
    rows = code.split(".")
    if not set(code) <= {"0", "1", "."} or any(not r for r in rows):
        raise ValueError("rows")
    width = max(len(r) for r in rows)
    out = np.ones((len(rows), width), bool)
    for i, row in enumerate(rows):
        out[i, : len(row)] = [c == "1" for c in row]
    return out


def mask_code_problem(code: str) -> SpecError | None:
    """Why a mask code from a link cannot be read, or None."""
    try:
        read_mask(code)
    except (ValueError, TypeError):
        return SpecError(
            "custom_mask",
            str(code)[:40],
            "0/1 rows joined by '.', or a code written by this app (r…/p…)",
        )
    return None


def decode_mask(code: str, len_q: int, len_kv: int) -> np.ndarray:
    """The stored mask, cropped or extended (new cells allowed) to `(Lq, Lk)`.

    An empty or unreadable code gives the causal-looking default (lower
    triangle), a useful starting point to edit.
    """
    try:
        stored = read_mask(code)
    except (ValueError, TypeError):
        stored = None
    if stored is None:
        return np.tril(np.ones((len_q, len_kv), bool))
    out = np.ones((len_q, len_kv), bool)
    rows, cols = min(len_q, stored.shape[0]), min(len_kv, stored.shape[1])
    out[:rows, :cols] = stored[:rows, :cols]
    return out
