"""Changes to a decoder's attention for one run, checked before it runs: edited attention rows
(`Checkpoint.run(..., edit=…)`, issue 30 §5) and a narrower window on the local layers
(`window=N`, issue 31 §3); and helpers that build a row.

An edit `{(layer, head): {query: row}}` puts `row` in place of that head's attention row at that
query (the softmax's weights over the T keys) before it multiplies V, in the attention's
`after_weights` hook; the model runs on from there. A row must be one the model could have
produced under its mask: T finite, non-negative weights summing to 1, none on a key after the
query (decoders) nor, on a local layer, outside its window. The window override narrows every
local (sliding-window) layer's window to N tokens, as a smaller `sliding_window` in transformers'
config would; a family without local layers refuses it.
Shapes: T tokens, H heads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnviz import formats
from attnviz.backends.common import DecoderLayout, RowEdit
from attnviz.errors import SpecError
from attnviz.pretrained.sampling import is_index

ROW_SUM_TOL = 1e-6  # |Σ row − 1| allowed: a row computed in float32 and renormalised passes


# -- rows ------------------------------------------------------------------------------------


def only_key(T: int, key: int) -> np.ndarray:
    """`(T,)`: all weight on `key`."""
    if not (is_index(T) and T >= 1):
        raise SpecError("T", T, "an integer ≥ 1 (the number of tokens)")
    _check_key(key, T)
    row = np.zeros(T)
    row[key] = 1.0
    return row


def zero_key(row: Any, key: int) -> np.ndarray:
    """`row (T,)` with `key`'s weight set to 0 and the rest renormalised to sum to 1."""
    row = _weights(row)
    _check_key(key, row.size)
    kept = row.copy()
    kept[key] = 0.0
    total = kept.sum()
    if not total > 0:
        raise SpecError("key", key, "a key other than the only one the row gives weight to")
    return kept / total


def drain_sink(row: Any) -> np.ndarray:
    """`row (T,)` without the first token's weight (the attention sink, Xiao et al. 2023), the
    rest renormalised to sum to 1."""
    return zero_key(row, 0)


def _weights(row: Any) -> np.ndarray:
    """`row` as a float64 vector of finite, non-negative numbers, or a `SpecError` (field "row")."""
    allowed = "a vector of finite, non-negative weights"
    try:
        array = np.asarray(row, dtype=np.float64)
    except (TypeError, ValueError):
        raise SpecError("row", row, allowed) from None
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all() or (array < 0).any():
        raise SpecError("row", row, allowed)
    return array


def _check_key(key: Any, T: int) -> None:
    if not (is_index(key) and 0 <= key < T):
        raise SpecError("key", key, f"a key 0 … {T - 1}")


# -- checks ----------------------------------------------------------------------------------


Edit = dict[tuple[int, int], dict[int, np.ndarray]]  # {(layer, head): {query: row (T,)}}


def check_changes(
    edit: Any, window: Any, layout: DecoderLayout | None, T: int, replaced: set[tuple[int, int]]
) -> tuple[Edit, int | None]:
    """`edit` and `window` checked against the model (`layout`; None: an encoder) and a text of `T`
    tokens, as plain ints and float64 rows; or a `SpecError` naming the field. A head in
    `replaced` (ablated or patched: its whole output replaced) may not be edited too."""
    if edit is None and window is None:
        return {}, None
    if layout is None:
        field, value = ("edit", edit) if edit is not None else ("window", window)
        raise SpecError(field, value, "None: only a decoder's attention can be changed here")
    window = check_window(window, layout)
    # the keys each layer sees: a local layer its window (narrowed by `window`), a global one all
    windows = [h if h is None or window is None else window for h in (x.heads.window for x in layout.layers)]
    edit = check_edit(edit, layout, T, windows)
    both = sorted(set(edit) & replaced)
    if both:
        raise SpecError(
            "edit", both, "heads that are not also ablated or patched (a replaced head's output "
            "would override its edited row)", value_text=f"heads {both} also ablated or patched",
        )  # fmt: skip
    return edit, window


def check_window(window: Any, layout: DecoderLayout) -> int | None:
    """`window`: None, or 1 … the local layers' own window, for a model that has local layers.

    Only narrower: the window is applied through each local layer's mask, inside which the
    layer's own window still holds."""
    if window is None:
        return None
    own = [layer.heads.window for layer in layout.layers if layer.heads.window is not None]
    if not own:
        raise SpecError("window", window, "None: this model has no local (sliding-window) layers to narrow")
    if not (is_index(window) and 1 <= window <= min(own)):
        raise SpecError(
            "window", window, f"None or 1 … {min(own)} tokens (at most the local layers' own window)"
        )
    return int(window)


def check_edit(edit: Any, layout: DecoderLayout, T: int, windows: list[int | None]) -> Edit:
    """`{(layer, head): {query: row}}` with plain-int keys and float64 rows, or a `SpecError`
    (field "edit"). `windows[l]`: how many keys layer `l` sees (None: every earlier one)."""
    if edit is None:
        return {}
    L, H = len(layout.layers), layout.layers[0].heads.n_heads
    allowed = (
        f"a dict {{(layer, head): {{query: row}}}} with 0 ≤ layer < {L}, 0 ≤ head < {H}, "
        f"0 ≤ query < {T} and row {T} weights (one per key)"
    )
    if not isinstance(edit, dict):
        raise SpecError("edit", edit, allowed, value_text=f"a value of type {type(edit).__name__}")
    checked: Edit = {}
    for key, rows in edit.items():
        ok = isinstance(key, tuple) and len(key) == 2 and all(is_index(v) for v in key)
        if not (ok and 0 <= key[0] < L and 0 <= key[1] < H):
            raise SpecError("edit", key, allowed, value_text=f"the key {key!r}")
        if not isinstance(rows, dict) or not rows:
            raise SpecError(
                "edit", key, allowed, value_text=f"{key}: {type(rows).__name__}, not {{query: row}}"
            )
        layer, head = int(key[0]), int(key[1])
        for query in rows:
            if not (is_index(query) and 0 <= query < T):
                raise SpecError(
                    "edit", query, f"queries 0 … {T - 1} (the text has {T} tokens)",
                    value_text=f"{key}: query {query!r}",
                )  # fmt: skip
        checked[layer, head] = {
            int(q): check_row(row, T, int(q), layout.causal, windows[layer], (layer, head))
            for q, row in rows.items()
        }
    return checked


def row_edits(edit: Edit, H: int, T: int) -> dict[int, RowEdit]:
    """A checked `edit` as the decoders take it: `{layer: RowEdit}`, every head's rows of a layer
    in one pair of `(H, T, T)` arrays."""
    grids: dict[int, RowEdit] = {}
    for (layer, head), rows in edit.items():
        grid = grids.setdefault(layer, RowEdit(np.zeros((H, T, T), bool), np.zeros((H, T, T), np.float32)))
        for query, row in rows.items():
            grid.where[head, query] = True
            grid.rows[head, query] = row
    return grids


def check_row(
    row: Any, T: int, query: int, causal: bool, window: int | None, key: tuple[int, int]
) -> np.ndarray:
    """One edited row `(T,)` as float64, or a `SpecError` (field "edit") saying which rule it breaks."""
    where = f"{key} query {query}"
    try:
        array = np.asarray(row, dtype=np.float64)
    except (TypeError, ValueError):
        raise SpecError("edit", key, f"a row of {T} numbers", value_text=f"{where}: not numbers") from None
    if array.shape != (T,):
        raise SpecError(
            "edit", key, f"a row of {T} weights, one per key", value_text=f"{where}: shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise SpecError("edit", key, "finite weights", value_text=f"{where}: NaN or infinite weights")
    if (array < 0).any():
        j = int(np.argmin(array))
        raise SpecError("edit", key, "non-negative weights", value_text=f"{where}: {array[j]:.6g} on key {j}")
    if not abs(array.sum() - 1.0) <= ROW_SUM_TOL:
        raise SpecError(
            "edit", key, f"weights summing to 1 (within {ROW_SUM_TOL:g})",
            value_text=f"{where}: weights summing to {array.sum():.9g}",
        )  # fmt: skip
    first = 0 if window is None else max(0, query - window + 1)
    last = query if causal else T - 1
    keys = np.flatnonzero(array)  # the keys the row gives weight to
    outside = keys[(keys < first) | (keys > last)]
    if outside.size:
        j = int(outside[0])
        rule = (
            "after the query (causal)" if j > last else f"outside layer {key[0]}'s window of {window} tokens"
        )
        raise SpecError(
            "edit", key, f"weight only on keys {first} … {last} (none {rule})",
            value_text=f"{where}: {array[j]:.6g} on key {j}",
        )  # fmt: skip
    return array


def describe(ablate: dict, patch: dict, edit: dict, window: int | None) -> list[str]:
    """How a run's model differs from the checkpoint's, one phrase per change (empty: none)."""
    said = [f"{formats.head(layer, head)} ablated ({mode})" for (layer, head), mode in ablate.items()]
    said += [f"{formats.head(layer, head)} patched" for layer, head in patch]
    for (layer, head), rows in edit.items():
        queries = ", ".join(str(q) for q in rows)
        said.append(
            f"{formats.head(layer, head)}'s attention row{'s' * (len(rows) > 1)} at query {queries} edited"
        )
    if window is not None:
        said.append(f"the local layers' window narrowed to {window} tokens")
    return said
