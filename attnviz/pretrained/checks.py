"""Checks on what a caller hands `Checkpoint.run`: texts, heads to ablate or patch, the layer to
record. Each failure is a `SpecError` naming the argument, what it got and what is allowed."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnviz.backends.common import ABLATIONS, Replacement
from attnviz.errors import SpecError
from attnviz.pretrained.files import MAX_ABS_VALUE
from attnviz.pretrained.sampling import is_index

MAX_TEXT_CHARS = 20_000


def check_text(name: str, text: Any, allowed: str) -> None:
    if not isinstance(text, str):
        raise SpecError(name, text, allowed, value_text=f"a value of type {type(text).__name__}")
    if not text.strip():
        raise SpecError(name, text, "at least one word", value_text="an empty text")
    if len(text) > MAX_TEXT_CHARS:
        raise SpecError(
            name, text, f"at most {MAX_TEXT_CHARS:,} characters", value_text=f"{len(text):,} characters"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise SpecError(
            name,
            text,
            "valid Unicode text (no lone surrogate code points)",
            value_text=f"a lone surrogate at character {error.start}",
        ) from None


def _head_key(key: Any, layers: int, heads: int) -> bool:
    ok = isinstance(key, tuple) and len(key) == 2 and all(is_index(v) for v in key)
    return ok and 0 <= key[0] < layers and 0 <= key[1] < heads


def check_ablate(ablate: Any, layers: int, heads: int) -> dict[tuple[int, int], str]:
    """`{(layer, head): "zero" | "mean"}` with plain-int keys, or a `SpecError` (field "ablate")."""
    if ablate is None:
        return {}
    allowed = f'a dict {{(layer, head): "zero" | "mean"}} with 0 ≤ layer < {layers}, 0 ≤ head < {heads}'
    if not isinstance(ablate, dict):
        raise SpecError("ablate", ablate, allowed)
    for key, mode in ablate.items():
        if not _head_key(key, layers, heads) or not isinstance(mode, str) or mode not in ABLATIONS:
            raise SpecError("ablate", {key: mode}, allowed)
    return {(int(layer), int(head)): mode for (layer, head), mode in ablate.items()}


def check_patch(
    patch: Any, layers: int, heads: int, shape: tuple[int, int]
) -> dict[tuple[int, int], np.ndarray]:
    """`{(layer, head): z}` with `z` of `shape` `(T, Dh)`, finite and at most `MAX_ABS_VALUE` in
    magnitude, as float32 arrays; or a `SpecError` (field "patch")."""
    if patch is None:
        return {}
    allowed = (
        f"a dict {{(layer, head): z}} with 0 ≤ layer < {layers}, 0 ≤ head < {heads} and z an array of "
        f"shape {shape} (tokens, head width) of finite numbers of magnitude ≤ {MAX_ABS_VALUE:g}"
    )
    if not isinstance(patch, dict):
        raise SpecError("patch", patch, allowed, value_text=f"a value of type {type(patch).__name__}")
    out = {}
    for key, z in patch.items():
        if not _head_key(key, layers, heads):
            raise SpecError("patch", key, allowed, value_text=f"the key {key!r}")
        try:
            array = np.asarray(z, dtype=np.float64)
        except (TypeError, ValueError):
            raise SpecError("patch", key, allowed, value_text=f"{key}: a value that is not numbers") from None
        if array.shape != shape:
            raise SpecError("patch", key, allowed, value_text=f"{key}: an array of shape {array.shape}")
        if not (np.isfinite(array).all() and np.abs(array).max(initial=0) <= MAX_ABS_VALUE):
            raise SpecError("patch", key, allowed, value_text=f"{key}: NaN, infinite or huge values")
        out[(int(key[0]), int(key[1]))] = array.astype(np.float32)
    return out


def merge(
    ablate: dict[tuple[int, int], str], patch: dict[tuple[int, int], np.ndarray]
) -> dict[int, dict[int, Replacement]]:
    """Ablations and patches → `{layer: {head: replacement}}` (a head is ablated or patched, not both)."""
    both = sorted(set(ablate) & set(patch))
    if both:
        raise SpecError("patch", both, "heads that are not also ablated", value_text=f"heads {both} in both")
    by_layer: dict[int, dict[int, Replacement]] = {}
    for (layer, head), how in [*ablate.items(), *patch.items()]:
        by_layer.setdefault(layer, {})[head] = how
    return by_layer


def check_layer(name: str, layer: Any, layers: int) -> None:
    if layer is not None and not (is_index(layer) and 0 <= layer < layers):
        raise SpecError(name, layer, f"None or 0 … {layers - 1}")


def check_ids(ids: Any, vocab: int, positions: int) -> list[int]:
    """Token ids as a list of ints, each `0 … vocab − 1`, between 1 and `positions` of them."""
    allowed = f"a list of 1 … {positions} token ids, each 0 … {vocab - 1}"
    try:
        values = list(ids)
    except TypeError:
        raise SpecError("ids", ids, allowed) from None
    if not 1 <= len(values) <= positions or not all(is_index(i) and 0 <= i < vocab for i in values):
        raise SpecError("ids", ids, allowed, value_text=f"{len(values)} values")
    return [int(i) for i in values]
