"""The explorer's settings: plain values, URL query parameters, and the spec they describe.

Pure Python (no Streamlit), so the URL round trip and the spec building are
testable on their own. A configuration is a flat dict of JSON-friendly
values; `DEFAULTS` lists every key. Every number a link carries is read by
`read_number`, here and on every page (`attnviz.app.frame.link_values`).
(Named `settings`, not `config`: `training.config` and `pretrained`'s model
configs are other jobs.)
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

import numpy as np

from attnviz import formats, heads
from attnviz.errors import BudgetError, SpecError
from attnviz.masks import decode_mask, mask_code_problem
from attnviz.params import embed, make_inputs, tokenize
from attnviz.run import check_budget, estimate_bytes
from attnviz.spec import MASKS, MODES, AttentionSpec

APP_MEMORY_BUDGET = 256 * 2**20  # per run; a classroom shares one server

DEFAULTS: dict[str, Any] = {
    "framework": "torch",
    "device": "cpu",
    "input": "random",
    "sentence": "the cat sat on the mat because the cat was tired",
    "sentence_kv": "le chat dormait sur le tapis car le chat était fatigué",  # as many words as the first
    "batch": 1,
    "len_q": 8,
    "len_kv": 8,
    "d_model": 32,
    "n_heads": 4,
    "d_k": 0,  # 0 = d_model // n_heads
    "d_v": 0,
    "mode": "self",
    "d_kv_in": 32,
    "mask": "none",
    "valid_kv_len": 6,
    "custom_mask": "",  # see masks.encode_mask: "10.11" for small masks, run-length or bit-packed above
    "bias": True,
    "dropout": 0.0,
    "training": False,
    "scale": 0.0,  # 0 = 1/sqrt(d_k)
    "residual_norm": False,
    "dtype": "float32",
    "seed": 0,
    "weights": "random",  # or "interpretable": attnviz.heads' hand-built heads
    "n_kv_heads": 0,  # 0 = n_heads (one key/value head per query head); a divisor: grouped-query attention
    "rope_base": 0.0,  # 0 = no rotary position embedding
    "window": 0,  # 0 = no sliding window (with the causal mask only)
}

# Bounds of the numeric controls (inclusive); the URL parser applies them too.
LIMITS: dict[str, tuple[float, float]] = {
    "batch": (1, 4),
    "len_q": (1, 512),
    "len_kv": (1, 512),
    "d_model": (1, 1024),
    "n_heads": (1, 16),
    "d_k": (0, 256),
    "d_v": (0, 256),
    "d_kv_in": (1, 1024),
    "valid_kv_len": (0, 512),
    "dropout": (0.0, 0.9),
    "scale": (0.0, 100.0),
    "seed": (0, 2**31 - 1),
    "n_kv_heads": (0, 16),
    "rope_base": (0.0, 1e6),
    "window": (0, 512),
}
CHOICES: dict[str, tuple] = {
    "framework": ("torch", "tensorflow"),
    "device": ("cpu", "gpu"),
    "input": ("random", "sentence"),
    "mode": MODES,
    "mask": MASKS,
    "dtype": ("float32", "float64"),
    "weights": ("random", "interpretable"),
}
MAX_TEXT = 2000  # characters of a sentence kept


# -- URL query parameters -----------------------------------------------------------


# A number as a link may spell it: ASCII digits only (`str.isdigit` and `int()` take "²" and "١٢"),
# an optional sign, decimal point and exponent; NaN, ±inf and "1e999" are refused by `read_number`.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
MAX_NUMBER_CHARS = 32


def read_number(raw, low: float, high: float, step: float | None = 1) -> float | int | None:
    """The one reader of a number from a link: the value of `raw` when it is an ASCII decimal number,
    finite, from `low` to `high` and on the grid of `step` from `low` (None: any number in the range);
    else None. Whole-number grids (integer `low` and `step`) give an `int`.
    """
    text = str(raw).strip()
    if len(text) > MAX_NUMBER_CHARS or not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    if not (math.isfinite(value) and low <= value <= high):
        return None
    if step is not None:
        origin = low if math.isfinite(low) else 0.0  # the grid starts at low (at 0 for any number)
        steps = (value - origin) / step
        if abs(steps - round(steps)) > 1e-6:
            return None
        if float(step).is_integer() and float(origin).is_integer():
            return round(value)
    return value


def allowed_numbers(low: float, high: float, step: float | None = 1) -> str:
    """What `read_number` accepts, in the notes' words: "2 … 64 (whole numbers)"."""
    grid = "" if step is None else " (whole numbers)" if step == 1 else f" in steps of {step:g}"
    return f"{low:g} … {high:g}{grid}"


def to_query(cfg: dict[str, Any]) -> dict[str, str]:
    """Values that differ from `DEFAULTS`, as strings."""
    out = {}
    for key, default in DEFAULTS.items():
        value = cfg.get(key, default)
        if value != default:
            out[key] = str(int(value)) if isinstance(value, bool) else str(value)
    return out


def url_text(value: Any) -> str:
    """A value as Streamlit's URL-bound widgets write it: true/false, 5 for 5.0, else str."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return str(value)


def widget_default(key: str, cfg: dict[str, Any]) -> Any:
    """The default a configuration widget shows (the heads' depends on d_model, d_k and d_v)."""
    if key == "n_heads":
        return nearest(DEFAULTS["n_heads"], head_choices(cfg["d_model"], cfg["d_k"], cfg["d_v"]))
    return DEFAULTS[key]


def url_values(cfg: dict[str, Any]) -> dict[str, str]:
    """The query parameters the configuration widgets keep for `cfg`: values off their defaults."""
    return {
        key: url_text(value)
        for key, value in cfg.items()
        if key in DEFAULTS and value != widget_default(key, cfg)
    }


def _parse(key: str, raw: str) -> Any:
    default = DEFAULTS[key]
    if isinstance(default, bool):
        if raw not in ("0", "1", "True", "False", "true", "false"):
            raise ValueError
        return raw in ("1", "True", "true")
    if isinstance(default, int | float):  # the one reader of a link's numbers: ASCII, finite
        value = read_number(raw, -math.inf, math.inf, 1 if isinstance(default, int) else None)
        if value is None:
            raise ValueError
    else:
        value = str(raw)[:MAX_TEXT]
    if key in LIMITS and not LIMITS[key][0] <= value <= LIMITS[key][1]:
        raise ValueError
    if key in CHOICES and value not in CHOICES[key]:
        raise ValueError
    return value


def from_query(params: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """A configuration from URL parameters, and a note for each value ignored."""
    cfg, problems = dict(DEFAULTS), []
    for key, raw in params.items():
        if key not in DEFAULTS:
            continue  # other parameters (e.g. a page's own) are not ours
        try:
            cfg[key] = _parse(key, raw)
        except (ValueError, TypeError):
            allowed = (
                " | ".join(CHOICES[key])
                if key in CHOICES
                else f"{LIMITS[key][0]}…{LIMITS[key][1]}"
                if key in LIMITS
                else type(DEFAULTS[key]).__name__
            )
            problems.append(f"URL parameter {key}={str(raw)[:40]!r} ignored; allowed: {allowed}.")
    if mask_code_problem(cfg["custom_mask"]):  # do what the note says: the editor starts from causal
        problems.append(
            f"URL parameter custom_mask={cfg['custom_mask'][:40]!r} ignored; allowed: 0/1 rows joined by "
            "'.', or a code written by this app (r…/p…). The editor starts from a causal mask instead."
        )
        cfg["custom_mask"] = DEFAULTS["custom_mask"]
    return cfg, problems


# -- configuration → spec and inputs ------------------------------------------------------


def tokens(cfg: dict[str, Any]) -> tuple[list[str] | None, list[str] | None]:
    """Query and key tokens when the input is a sentence, else (None, None)."""
    if cfg["input"] != "sentence":
        return None, None
    q = tokenize(cfg["sentence"])
    kv = tokenize(cfg["sentence_kv"]) if cfg["mode"] == "cross" else q
    return q, kv


def lengths(cfg: dict[str, Any]) -> tuple[int, int]:
    """Query and key lengths: the words' counts for sentences, else the controls'."""
    q_tokens, kv_tokens = tokens(cfg)
    len_q = len(q_tokens) if q_tokens is not None else cfg["len_q"]
    if cfg["mode"] != "cross":
        return len_q, len_q
    return len_q, len(kv_tokens) if kv_tokens is not None else cfg["len_kv"]


def build_spec(cfg: dict[str, Any]) -> AttentionSpec:
    """The `AttentionSpec` the configuration describes.

    Raises:
        SpecError: the library's, naming the field; or `sentence` /
            `sentence_kv` with no words.
    """
    q_tokens, kv_tokens = tokens(cfg)
    for field, words in (
        ("sentence", q_tokens),
        ("sentence_kv", kv_tokens if cfg["mode"] == "cross" else None),
    ):
        if words is not None and not words:
            raise SpecError(field, cfg[field][:40], "a text with at least one word")
    len_q, len_kv = lengths(cfg)
    cross = cfg["mode"] == "cross"
    return AttentionSpec(
        batch=cfg["batch"],
        len_q=len_q,
        len_kv=len_kv if cross else None,
        d_model=cfg["d_model"],
        n_heads=cfg["n_heads"],
        d_k=cfg["d_k"] or None,
        d_v=cfg["d_v"] or None,
        mode=cfg["mode"],
        d_kv_in=cfg["d_kv_in"] if cross else None,
        mask=cfg["mask"],
        valid_kv_len=min(cfg["valid_kv_len"], len_kv) if cfg["mask"] == "padding" else None,
        custom_mask=decode_mask(cfg["custom_mask"], len_q, len_kv) if cfg["mask"] == "custom" else None,
        bias=cfg["bias"],
        dropout=cfg["dropout"],
        training=cfg["training"],
        scale=cfg["scale"] or None,
        residual_norm=cfg["residual_norm"],
        dtype=cfg["dtype"],
        seed=cfg["seed"],
        n_kv_heads=cfg["n_kv_heads"] or None,
        rope_base=cfg["rope_base"] or None,
        window=cfg["window"] or None if cfg["mask"] == "causal" else None,
    )


def check_fits(spec: AttentionSpec, budget: int = APP_MEMORY_BUDGET) -> None:
    """Refuse a spec over the app's budget: `run.check_budget`'s message, plus what would fit.

    Raises:
        BudgetError: with `need` and `budget` in bytes.
    """
    try:
        check_budget(spec, True, budget)
    except BudgetError as error:  # the library's words name its arguments (capture=False, memory_budget):
        fits = largest_fitting_length(spec, budget)  # a visitor has only the sidebar's controls
        hint = f"len_q = len_kv ≤ {fits} fits" if fits else "no length fits"
        raise BudgetError(
            f"This configuration needs about {formats.size(error.need)} (batch {spec.batch} × heads "
            f"{spec.n_heads} × len_q {spec.len_q} × len_kv {spec.len_kv}, every step kept for the figures), "
            f"over this app's budget of {formats.size(budget)} per run. With the other settings unchanged, "
            f"{hint}; fewer heads or a smaller batch also help.",
            error.need,
            error.budget,
        ) from None


def largest_fitting_length(spec: AttentionSpec, budget: int) -> int:
    """The largest equal query/key length that fits `budget`, 0 if none.

    The mask is stood in for by a causal one (same memory), so any length is a valid spec.
    """
    lo, hi = 0, max(spec.len_q, spec.len_kv)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = spec.replace(
            len_q=mid,
            len_kv=mid if spec.mode == "cross" else None,
            mask="causal" if spec.mask != "none" else "none",
            valid_kv_len=None,
            custom_mask=None,
        )
        lo, hi = (mid, hi) if estimate_bytes(trial) <= budget else (lo, mid - 1)
    return lo


def sweep_need(cases: list, matmul_side: int = 2048) -> int:
    """Estimated peak bytes of a Timing sweep over `bench.Case`s.

    Cases run one after another, so the largest counts: twice its fast-path
    estimate (TensorFlow's measured peak reaches 1.6–1.8× it, issue 10), plus
    the matmul-ceiling operands (three `side × side` matrices).
    """
    if not cases:
        return 0
    largest = max(2 * estimate_bytes(case.spec(), capture=False) for case in cases)
    side = max(matmul_side, *(case.length for case in cases))
    itemsize = max(case.spec().itemsize for case in cases)
    return largest + 3 * side * side * itemsize


# -- valid choices, and keeping a configuration valid --------------------------------------


def head_choices(d_model: int, d_k: int, d_v: int) -> list[int]:
    """Head counts that work: divisors of d_model, or any count when d_k and d_v are both set."""
    lo, hi = (int(v) for v in LIMITS["n_heads"])
    if d_k and d_v:
        return list(range(lo, hi + 1))
    return [h for h in range(lo, hi + 1) if d_model % h == 0]


def kv_head_choices(n_heads: int) -> list[int]:
    """Key/value head counts for `n_heads` query heads: its divisors, 0 standing for n_heads itself."""
    return [d for d in range(1, n_heads) if n_heads % d == 0] + [0]


def nearest(value: int, choices: list[int]) -> int:
    """The choice closest to `value` (the smaller one on a tie)."""
    return min(choices, key=lambda c: (abs(c - value), c))


def mask_choices(cfg: dict[str, Any]) -> list[str]:
    """Masks that can work here: "causal" needs equal query and key lengths."""
    len_q, len_kv = lengths(cfg)
    return [m for m in CHOICES["mask"] if m != "causal" or len_q == len_kv]


def _clamp(key: str, value: int) -> int:
    lo, hi = LIMITS[key]
    return int(min(max(value, lo), hi))


def in_force(cfg: dict[str, Any]) -> dict[str, Any]:
    """Values of the controls that the configuration overrides, as they are in force.

    A disabled control shows the value the run uses, not a stale one: the query
    length of a sentence is its word count, in self mode the keys are the queries
    (len_kv = len_q) and their width is d_model (d_kv_in = d_model).
    """
    len_q, len_kv = lengths(cfg)
    out: dict[str, Any] = {}
    if cfg["input"] == "sentence":
        out["len_q"] = _clamp("len_q", len_q)
        if cfg["mode"] == "cross":
            out["len_kv"] = _clamp("len_kv", len_kv)
    if cfg["mode"] != "cross":
        out["len_kv"] = out.get("len_q", cfg["len_q"])
        out["d_kv_in"] = _clamp("d_kv_in", cfg["d_model"])
    return out


def repair(cfg: dict[str, Any], changed: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The configuration with choices that a change made impossible replaced.

    Args:
        cfg: a configuration.
        changed: the field the visitor just changed, if known: choosing the
            padding mask while every key is real also shortens the real length,
            so the mask shows an effect.

    Returns:
        The repaired configuration, and a note per field that was changed.
    """
    out, notes = dict(cfg), {}
    heads = head_choices(out["d_model"], out["d_k"], out["d_v"])
    if out["n_heads"] not in heads:
        new = nearest(out["n_heads"], heads)
        notes["n_heads"] = (
            f"Heads {out['n_heads']} → {new}: with d_k and d_v from d_model / heads, the heads must "
            f"divide d_model = {out['d_model']}."
        )
        out["n_heads"] = new
    if out["n_kv_heads"] not in kv_head_choices(out["n_heads"]):
        new = max(d for d in kv_head_choices(out["n_heads"]) if d <= out["n_kv_heads"])
        notes["n_kv_heads"] = (
            f"Key/value heads {out['n_kv_heads']} → {new or out['n_heads']}: they must divide the "
            f"{out['n_heads']} query heads."
        )
        out["n_kv_heads"] = new
    if out["mask"] not in mask_choices(out):
        len_q, len_kv = lengths(out)
        notes["mask"] = f"Mask causal → none: causal needs len_q = len_kv (here {len_q} and {len_kv})."
        out["mask"] = "none"
    out |= in_force(out)
    len_kv = lengths(out)[1]
    if changed == "mask" and out["mask"] == "padding" and out["valid_kv_len"] >= len_kv > 1:
        new = len_kv - max(1, len_kv // 4)
        notes["valid_kv_len"] = f"Real key positions {out['valid_kv_len']} → {new}, so the padding shows."
        out["valid_kv_len"] = new
    return out, notes


class Prepared(NamedTuple):
    """A configuration that can run: its spec and what `run_attention` takes besides it."""

    spec: AttentionSpec
    x_q: np.ndarray | None  # None: run_attention's own seeded inputs
    x_kv: np.ndarray | None
    params: dict[str, np.ndarray] | None  # None: init_params(spec)


def check(cfg: dict[str, Any], budget: int = APP_MEMORY_BUDGET) -> Prepared:
    """The spec, checked against the app's budget and the chosen weights, with its inputs.

    Interpretable heads are built here, once: `attnviz.heads.build` both checks that
    the spec can host them and returns their parameters.

    Raises:
        SpecError: its `field` names the control to fix (`memory_budget` for a
            `BudgetError`).
    """
    problem = mask_code_problem(cfg["custom_mask"]) if cfg["mask"] == "custom" else None
    if problem:
        raise problem
    spec = build_spec(cfg)
    check_fits(spec, budget)
    return Prepared(spec, *prepare(cfg, spec))


def inputs(cfg: dict[str, Any], spec: AttentionSpec) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Sentence embeddings for `run_attention`, or (None, None) for random inputs."""
    q_tokens, kv_tokens = tokens(cfg)
    if q_tokens is None:
        return None, None
    x_q = embed(q_tokens, spec.d_model, spec.batch, spec.dtype)
    if spec.mode == "self":
        return x_q, None
    return x_q, embed(kv_tokens, spec.d_kv_in, spec.batch, spec.dtype)


def prepare(
    cfg: dict[str, Any], spec: AttentionSpec
) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, np.ndarray] | None]:
    """`x_q`, `x_kv` and `params` for `run_attention` (None: its own seeded defaults).

    With interpretable weights, `attnviz.heads.build` supplies the parameters and
    writes the position code into the inputs (head h shows `heads.PATTERNS[h % 4]`).

    Raises:
        SpecError: from `attnviz.heads.build`, when the spec cannot host its heads.
    """
    x_q, x_kv = inputs(cfg, spec)
    if cfg["weights"] != "interpretable":
        return x_q, x_kv, None
    if x_q is None:
        x_q, x_kv = make_inputs(spec)
    params, x_q, x_kv = heads.build(spec, x_q, x_q if x_kv is None else x_kv)
    return x_q, None if spec.mode == "self" else x_kv, params


def labels(cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Row (query) and column (key) labels: the words, or positions."""
    q_tokens, kv_tokens = tokens(cfg)
    if q_tokens is not None:
        return q_tokens, kv_tokens
    len_kv = cfg["len_kv"] if cfg["mode"] == "cross" else cfg["len_q"]
    return [str(i) for i in range(cfg["len_q"])], [str(j) for j in range(len_kv)]


def canonical(cfg: dict[str, Any]) -> str:
    """A stable string of the configuration (cache key, comparison)."""
    return json.dumps({k: cfg.get(k, v) for k, v in DEFAULTS.items()}, sort_keys=True)
