"""Custom masks as link text: three URL-safe forms, read back at any shape.

Pure Python (no Streamlit). `attnviz.ui.config` re-exports these names.
"""

from __future__ import annotations

import base64
import re

import numpy as np

from attnviz.errors import SpecError

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
