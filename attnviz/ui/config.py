"""The app's configuration: plain values, URL query parameters, and the spec they describe.

Pure Python (no Streamlit), so the URL round trip and the spec building are
testable on their own. A configuration is a flat dict of JSON-friendly
values; `DEFAULTS` lists every key.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from attnviz import text
from attnviz.run import estimate_bytes
from attnviz.spec import MASKS, MODES, AttentionSpec

APP_MEMORY_BUDGET = 256 * 2**20  # per run; a classroom shares one server

DEFAULTS: dict[str, Any] = {
    "framework": "torch",
    "device": "cpu",
    "input": "random",
    "sentence": "the cat sat on the mat because the cat was tired",
    "sentence_kv": "le chat était fatigué",
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
    "custom_mask": "",  # rows of 0/1 joined by '.', e.g. "10.11"
    "bias": True,
    "dropout": 0.0,
    "training": False,
    "scale": 0.0,  # 0 = 1/sqrt(d_k)
    "residual_norm": False,
    "dtype": "float32",
    "seed": 0,
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
}
CHOICES: dict[str, tuple] = {
    "framework": ("torch", "tensorflow"),
    "device": ("cpu", "gpu"),
    "input": ("random", "sentence"),
    "mode": MODES,
    "mask": MASKS,
    "dtype": ("float32", "float64"),
}
MAX_TEXT = 2000  # characters of a sentence kept


# -- custom mask text encoding ----------------------------------------------------


def encode_mask(mask: np.ndarray) -> str:
    return ".".join("".join("1" if v else "0" for v in row) for row in np.asarray(mask, bool))


def decode_mask(code: str, len_q: int, len_kv: int) -> np.ndarray:
    """The stored mask, cropped or extended (new cells allowed) to `(Lq, Lk)`.

    An empty or unreadable code gives the causal-looking default (lower
    triangle), a useful starting point to edit.
    """
    rows = [r for r in (code or "").split(".") if r and set(r) <= {"0", "1"}]
    if not rows:
        return np.tril(np.ones((len_q, len_kv), bool))
    out = np.ones((len_q, len_kv), bool)
    for i, row in enumerate(rows[:len_q]):
        bits = np.array([c == "1" for c in row[:len_kv]], bool)
        out[i, : len(bits)] = bits
    return out


# -- URL query parameters -----------------------------------------------------------


def to_query(cfg: dict[str, Any]) -> dict[str, str]:
    """Values that differ from `DEFAULTS`, as strings."""
    out = {}
    for key, default in DEFAULTS.items():
        value = cfg.get(key, default)
        if value != default:
            out[key] = str(int(value)) if isinstance(value, bool) else str(value)
    return out


def _parse(key: str, raw: str) -> Any:
    default = DEFAULTS[key]
    if isinstance(default, bool):
        if raw not in ("0", "1", "True", "False", "true", "false"):
            raise ValueError
        return raw in ("1", "True", "true")
    if isinstance(default, int):
        value = int(raw)
    elif isinstance(default, float):
        value = float(raw)
        if not np.isfinite(value):
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
    return cfg, problems


# -- configuration → spec and inputs ------------------------------------------------------


def tokens(cfg: dict[str, Any]) -> tuple[list[str] | None, list[str] | None]:
    """Query and key tokens when the input is a sentence, else (None, None)."""
    if cfg["input"] != "sentence":
        return None, None
    q = text.tokenize(cfg["sentence"])
    kv = text.tokenize(cfg["sentence_kv"]) if cfg["mode"] == "cross" else q
    return q, kv


def build_spec(cfg: dict[str, Any]) -> AttentionSpec:
    """The `AttentionSpec` the configuration describes.

    Raises:
        ValueError: the library's message, naming the field; or a sentence
            with no words.
    """
    q_tokens, kv_tokens = tokens(cfg)
    if q_tokens is not None and not q_tokens:
        raise ValueError("sentence: got no words; allowed: a text with at least one word.")
    if cfg["mode"] == "cross" and kv_tokens is not None and not kv_tokens:
        raise ValueError("sentence_kv: got no words; allowed: a text with at least one word.")
    len_q = len(q_tokens) if q_tokens else cfg["len_q"]
    cross = cfg["mode"] == "cross"
    len_kv = (len(kv_tokens) if kv_tokens else cfg["len_kv"]) if cross else len_q
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
    )


def check_fits(spec: AttentionSpec, budget: int = APP_MEMORY_BUDGET) -> None:
    """Refuse a spec over the app's budget, with the estimate and what would fit."""
    need = estimate_bytes(spec)
    if need <= budget:
        return
    fits = largest_fitting_length(spec, budget)
    hint = f"len_q = len_kv ≤ {fits}" if fits else "fewer heads or a smaller batch"
    raise ValueError(
        f"spec: this configuration needs about {need / 2**20:,.0f} MiB "
        f"(batch {spec.batch} × {spec.n_heads} heads × {spec.len_q} × {spec.len_kv}, every step kept), "
        f"over the app's budget of {budget / 2**20:,.0f} MiB per run; allowed: something smaller — "
        f"with the other settings unchanged, {hint} fits."
    )


def largest_fitting_length(spec: AttentionSpec, budget: int) -> int:
    """The largest equal query/key length that fits `budget`, 0 if none."""
    lo, hi = 0, max(spec.len_q, spec.len_kv)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = AttentionSpec(
            batch=spec.batch,
            len_q=mid,
            d_model=spec.d_model,
            n_heads=spec.n_heads,
            d_k=spec.d_k,
            d_v=spec.d_v,
            dtype=spec.dtype,
            residual_norm=spec.residual_norm,
            mask="causal" if spec.mask != "none" else "none",
            dropout=spec.dropout,
            training=spec.training,
        )
        lo, hi = (mid, hi) if estimate_bytes(trial) <= budget else (lo, mid - 1)
    return lo


def inputs(cfg: dict[str, Any], spec: AttentionSpec) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Sentence embeddings for `run_attention`, or (None, None) for random inputs."""
    q_tokens, kv_tokens = tokens(cfg)
    if q_tokens is None:
        return None, None
    x_q = text.embed(q_tokens, spec.d_model, spec.batch, spec.dtype)
    if spec.mode == "self":
        return x_q, None
    return x_q, text.embed(kv_tokens, spec.d_kv_in, spec.batch, spec.dtype)


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
