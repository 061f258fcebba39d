"""`AttentionSpec`: one attention computation, described and validated.

A frozen dataclass in the spirit of nanoGPT's `GPTConfig`, with Keras-style
errors: every invalid value raises `ValueError` naming the field, the value
received and what is allowed. `None` defaults are resolved at construction,
so `spec.len_kv`, `spec.d_k`, `spec.d_v` and `spec.d_kv_in` are always ints.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from attnviz.errors import SpecError

MODES = ("self", "cross")
MASKS = ("none", "causal", "padding", "custom")
DTYPES = ("float32", "float64")
DTYPE_BYTES = {"float32": 4, "float64": 8}
DERIVED = ("len_kv", "d_k", "d_v", "d_kv_in", "n_kv_heads")  # None → derived from other fields


def _fail(field: str, value: Any, allowed: str) -> SpecError:
    if isinstance(value, str) and value.startswith("<") and value.endswith(">"):
        return SpecError(field, value, allowed, prefix="AttentionSpec.", value_text=value)
    return SpecError(field, value, allowed, prefix="AttentionSpec.")


def _positive_int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
        raise _fail(field, value, "a positive integer")
    return int(value)


def check_variants(
    n_heads: int,
    d_k: int,
    n_kv_heads: Any = None,
    rope_base: Any = None,
    window: Any = None,
    *,
    prefix: str = "",
) -> tuple[int, float | None, int | None]:
    """Validate the modern-attention options of a layer with `n_heads` heads of width `d_k`.

    Returns:
        `(n_kv_heads, rope_base, window)`: `n_kv_heads` resolved (None → `n_heads`),
        `rope_base` as a float or None, `window` as an int or None.

    Raises:
        SpecError naming the field: `n_kv_heads` not a divisor of `n_heads`, `rope_base`
        not a finite number > 1, `d_k` odd under RoPE (it turns pairs), `window` not a
        positive integer.
    """
    fail = lambda field, value, allowed: SpecError(field, value, allowed, prefix=prefix)  # noqa: E731
    if n_kv_heads is None:
        n_kv_heads = n_heads
    divisors = sorted(
        {d for i in range(1, math.isqrt(n_heads) + 1) if n_heads % i == 0 for d in (i, n_heads // i)}
    )
    if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, Integral) or n_kv_heads not in divisors:
        shown = ", ".join(map(str, divisors))
        raise fail(
            "n_kv_heads",
            n_kv_heads,
            f"None (= n_heads) or a divisor of n_heads={n_heads}: {shown} (1 = multi-query)",
        )
    if rope_base is not None:
        if isinstance(rope_base, bool) or not isinstance(rope_base, Real) or not 1 < rope_base < math.inf:
            raise fail(
                "rope_base", rope_base, "None (no rotary embedding) or a finite number > 1, e.g. 10000.0"
            )
        if d_k % 2:
            raise fail("d_k", d_k, "an even width when rope_base is set (RoPE turns pairs of features)")
        rope_base = float(rope_base)
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, Integral) or window <= 0:
            raise fail("window", window, "None (no sliding window) or a positive integer")
        window = int(window)
    return int(n_kv_heads), rope_base, window


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _fail(field, value, " | ".join(repr(a) for a in allowed))
    return value


@dataclass(frozen=True, eq=False)
class AttentionSpec:
    """One (multi-head) attention computation.

    Args:
        batch: number of sequences.
        len_q: query length `Lq`.
        len_kv: key/value length `Lk`; None → `len_q`.
        d_model: query input and output width.
        n_heads: number of heads `H`.
        d_k: per-head query/key width; None → `d_model // n_heads`.
        d_v: per-head value width; None → `d_model // n_heads`.
        mode: "self" (keys/values from the queries' sequence) or "cross".
        d_kv_in: feature width of the key/value sequence in cross mode;
            None → `d_model`.
        mask: "none" | "causal" | "padding" | "custom".
        valid_kv_len: for "padding": real key positions, an int or one per
            batch item.
        custom_mask: for "custom": bool `(Lq, Lk)` or `(batch, Lq, Lk)`,
            True = may attend.
        bias: biases on the four projections.
        dropout: attention-weight dropout rate in [0, 1).
        training: dropout is applied only when True.
        scale: multiplier of QKᵀ; None → `1 / sqrt(d_k)`.
        residual_norm: output = LayerNorm(x_q + attention output), eps 1e-6.
        dtype: "float32" | "float64".
        seed: seeds parameters, inputs and dropout.
        n_kv_heads: key/value heads, a divisor of `n_heads`; None → `n_heads`
            (1 = multi-query). K/V head g serves query heads `g·r … g·r + r − 1`,
            `r = n_heads / n_kv_heads` (grouped-query attention, as Llama).
        rope_base: rotary position embedding on q and k, base of the inverse
            frequencies `base^(−2i/d_k)` (Llama's `rotate_half` layout,
            positions 0…L−1); None → off. Needs an even `d_k`.
        window: sliding window on top of the causal mask: query i may attend
            key j iff `i − window < j ≤ i` (Mistral); None → off. Needs
            mask="causal".
    """

    batch: int = 1
    len_q: int = 8
    len_kv: int | None = None
    d_model: int = 32
    n_heads: int = 4
    d_k: int | None = None
    d_v: int | None = None
    mode: str = "self"
    d_kv_in: int | None = None
    mask: str = "none"
    valid_kv_len: int | tuple[int, ...] | None = None
    custom_mask: Any = None
    bias: bool = True
    dropout: float = 0.0
    training: bool = False
    scale: float | None = None
    residual_norm: bool = False
    dtype: str = "float32"
    seed: int = 0
    n_kv_heads: int | None = None
    rope_base: float | None = None
    window: int | None = None

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("_derived", frozenset(n for n in DERIVED if getattr(self, n) is None))
        for name in ("batch", "len_q", "d_model", "n_heads"):
            set_(name, _positive_int(name, getattr(self, name)))
        set_("mode", _choice("mode", self.mode, MODES))
        set_("mask", _choice("mask", self.mask, MASKS))
        set_("dtype", _choice("dtype", self.dtype, DTYPES))
        self._resolve_widths(set_)
        self._check_flags(set_)
        self._check_mask_args(set_)
        variants = check_variants(
            self.n_heads, self.d_k, self.n_kv_heads, self.rope_base, self.window, prefix="AttentionSpec."
        )
        for name, value in zip(("n_kv_heads", "rope_base", "window"), variants, strict=True):
            set_(name, value)
        if self.window is not None and self.mask != "causal":
            raise _fail(
                "window",
                self.window,
                f"None unless mask='causal' (got mask={self.mask!r}): the window narrows the causal mask",
            )

    def _resolve_widths(self, set_) -> None:
        if self.mode == "self":
            for name in ("len_kv", "d_kv_in"):
                value = getattr(self, name)
                expected = self.len_q if name == "len_kv" else self.d_model
                if value is not None and _positive_int(name, value) != expected:
                    raise _fail(
                        name,
                        value,
                        f"None or {expected} in self mode (keys come from the query "
                        f"sequence); use mode='cross' for a second sequence",
                    )
        set_("len_kv", self.len_q if self.len_kv is None else _positive_int("len_kv", self.len_kv))
        set_("d_kv_in", self.d_model if self.d_kv_in is None else _positive_int("d_kv_in", self.d_kv_in))
        for name in ("d_k", "d_v"):
            value = getattr(self, name)
            if value is None:
                if self.d_model % self.n_heads:
                    raise _fail(
                        "n_heads",
                        self.n_heads,
                        f"a divisor of d_model={self.d_model} while {name} is unset "
                        f"(or set d_k and d_v explicitly)",
                    )
                set_(name, self.d_model // self.n_heads)
            else:
                set_(name, _positive_int(name, value))

    def _check_flags(self, set_) -> None:
        for name in ("bias", "training", "residual_norm"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise _fail(name, value, "True or False")
            set_(name, bool(value))
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, Real):
            raise _fail("dropout", self.dropout, "a number in [0, 1)")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise _fail("dropout", self.dropout, "a number in [0, 1)")
        set_("dropout", float(self.dropout))
        if self.scale is not None:
            ok = isinstance(self.scale, Real) and not isinstance(self.scale, bool)
            top = float(np.finfo(self.dtype).max) ** 0.5  # scale · q·k must stay in range
            if not ok or not math.isfinite(self.scale) or not 0 < self.scale <= top:
                raise _fail(
                    "scale", self.scale, f"None (1/sqrt(d_k)) or a number in (0, {top:.3g}] for {self.dtype}"
                )
            set_("scale", float(self.scale))
        if isinstance(self.seed, bool) or not isinstance(self.seed, Integral) or not 0 <= self.seed < 2**31:
            raise _fail("seed", self.seed, "an integer in [0, 2**31)")
        set_("seed", int(self.seed))

    def _check_mask_args(self, set_) -> None:
        if self.mask == "causal" and self.len_q != self.len_kv:
            raise _fail(
                "mask",
                "causal",
                f"'causal' only with len_q == len_kv (got len_q={self.len_q}, "
                f"len_kv={self.len_kv}); use 'padding' or 'custom' for other shapes",
            )
        if self.mask == "padding":
            set_("valid_kv_len", self._checked_valid_kv_len())
        elif self.valid_kv_len is not None:
            raise _fail("valid_kv_len", self.valid_kv_len, "None unless mask='padding'")
        if self.mask == "custom":
            set_("custom_mask", self._checked_custom_mask())
        elif self.custom_mask is not None:
            raise _fail("custom_mask", "<array>", "None unless mask='custom'")

    def _checked_valid_kv_len(self) -> tuple[int, ...]:
        allowed = (
            f"an int in [0, len_kv={self.len_kv}] or a sequence of {self.batch} "
            f"such ints (one per batch item)"
        )
        value = self.valid_kv_len
        if value is None:
            raise _fail("valid_kv_len", value, allowed + " when mask='padding'")
        if isinstance(value, (dict, set, str, bytes)) or (isinstance(value, np.ndarray) and value.ndim > 1):
            raise _fail("valid_kv_len", value, allowed)
        items = [value] if isinstance(value, Integral) else value
        try:
            items = list(items)
        except TypeError:
            raise _fail("valid_kv_len", value, allowed) from None
        if isinstance(value, Integral):
            items = items * self.batch
        if len(items) != self.batch:
            raise _fail("valid_kv_len", value, allowed)
        for item in items:
            if isinstance(item, bool) or not isinstance(item, Integral) or not 0 <= item <= self.len_kv:
                raise _fail("valid_kv_len", value, allowed)
        return tuple(int(i) for i in items)

    def _checked_custom_mask(self) -> np.ndarray:
        shapes = f"({self.len_q}, {self.len_kv}) or ({self.batch}, {self.len_q}, {self.len_kv})"
        allowed = f"a boolean array of shape {shapes}, True = may attend"
        if self.custom_mask is None:
            raise _fail("custom_mask", None, allowed + " when mask='custom'")
        try:
            arr = np.asarray(self.custom_mask)
        except Exception:  # ragged nested lists and the like
            raise _fail("custom_mask", "<unreadable>", allowed) from None
        if arr.dtype != np.bool_:
            if arr.dtype.kind not in "iu" or not np.isin(arr, (0, 1)).all():
                raise _fail("custom_mask", f"<array of dtype {arr.dtype}>", allowed)
            arr = arr.astype(bool)
        if arr.shape not in ((self.len_q, self.len_kv), (self.batch, self.len_q, self.len_kv)):
            raise _fail("custom_mask", f"<array of shape {arr.shape}>", allowed)
        arr = np.array(arr, dtype=bool)  # own copy, then freeze it
        arr.flags.writeable = False
        return arr

    # -- derived sizes -------------------------------------------------------

    @property
    def head_scale(self) -> float:
        """The multiplier of QKᵀ actually used."""
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.d_k)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def replace(self, **changes: Any) -> AttentionSpec:
        """A new spec with `changes`; widths left as None are re-derived."""
        return AttentionSpec(**{**self.as_dict(raw=True), **changes})

    def as_dict(self, raw: bool = False) -> dict[str, Any]:
        """Fields as plain Python values (JSON-friendly).

        With `raw=True`, widths that were derived (given as None) stay None,
        so the dict rebuilds a spec that re-derives them.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if isinstance(out["custom_mask"], np.ndarray):
            out["custom_mask"] = out["custom_mask"].tolist()
        if isinstance(out["valid_kv_len"], tuple):
            out["valid_kv_len"] = list(out["valid_kv_len"])
        if raw:
            out.update(dict.fromkeys(self._derived))
        return out

    # -- equality and hashing (custom_mask is an array) -------------------------

    def _key(self) -> tuple:
        mask = self.custom_mask
        mask_key = None if mask is None else (mask.shape, mask.tobytes())
        return tuple(
            mask_key if f.name == "custom_mask" else getattr(self, f.name) for f in dataclasses.fields(self)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttentionSpec) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())
