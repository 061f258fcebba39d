"""The real models the modern-attention and circuits lessons run, and the runs they share.

A lesson exercise runs a packaged checkpoint (SmolLM2-135M-Instruct always; Gemma 3 270M when its
packages are installed: `attnviz.pretrained.local_checkpoints` tells) in the first installed
framework. Every expensive result is computed once per process and kept (`functools.lru_cache`):
the seed picks among a few prompts and layers (`POOL`), so a class of 30 seeds costs a handful of
forward passes, not 30 of each. A test passes its own checkpoint (a tiny random model) instead.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz import pretrained, reference
from attnviz.frameworks import installed
from attnviz.pretrained import gguf

SMOLLM2 = "SmolLM2-135M-Instruct"
GEMMA = "gemma-3-270m"
POOL = 6  # distinct prompts (or layers) a lesson's seeds share: bounded work for a class
CACHED = 16  # results kept per kind: every pool entry of a lesson, for two checkpoints


def available(name: str) -> bool:
    """Whether the packaged checkpoint `name` is installed (nothing is loaded)."""
    return name in pretrained.local_checkpoints()


def load(name: str = SMOLLM2):
    """The packaged checkpoint `name` (kept by `attnviz.pretrained`'s cache once loaded)."""
    return pretrained.load(name)


def config(name: str) -> Any:
    """The packaged checkpoint `name`'s config, read without its weights (of a GGUF file only the card
    is converted, once, on disk: no weights are expanded): what a cache-size exercise needs, without a
    model in memory."""
    path = pretrained.packaged_path(name, pretrained.local_checkpoints()[name])
    return pretrained.read_config(gguf.converted(path, weights=False) if path.is_file() else path)


def framework() -> str:
    """The framework the lessons run in: the first installed one (PyTorch where it is installed)."""
    return installed()[0]


@dataclass(frozen=True)
class Capture:
    """One layer of one run, what its attention computed.

    Attributes:
        tokens: the T tokens as text.
        q, k: `(H, T, Dh)` and `(Hkv, T, Dh)` queries and keys before RoPE (`q_heads`, `k_heads`).
        q_rope, k_rope: the same after RoPE (equal to q, k for a model without it).
        k_repeated, v_repeated: `(H, T, Dh)` each query head's keys and values (K/V heads repeated).
        weights: `(H, T, T)` the attention weights.
    """

    tokens: tuple[str, ...]
    q: np.ndarray
    k: np.ndarray
    q_rope: np.ndarray
    k_rope: np.ndarray
    k_repeated: np.ndarray
    v_repeated: np.ndarray
    weights: np.ndarray


def kept(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(ckpt, *args)` computed once per (checkpoint, args) and kept (the last `CACHED` results).

    The key holds the checkpoint's name and folder, not the object, so a checkpoint the loader's
    cache lets go is not kept alive here. A second caller of the same key waits for the first
    one's result instead of computing it again: a class opening one step at once costs one run.
    """
    store: OrderedDict = OrderedDict()
    locks: dict[tuple, threading.Lock] = {}
    guard = threading.Lock()

    @functools.wraps(fn)
    def wrapper(ckpt, *args):
        key = (ckpt.name, str(ckpt.path), *args)
        with guard:
            lock = locks.setdefault(key, threading.Lock())
        with lock:
            with guard:
                if key in store:
                    store.move_to_end(key)
                    return store[key]
            value = fn(ckpt, *args)
            with guard:
                store[key] = value
                while len(store) > CACHED:
                    locks.pop(store.popitem(last=False)[0], None)
            return value

    wrapper.cache_clear = store.clear
    return wrapper


@kept
def capture(ckpt, text: str, layer: int) -> Capture:
    """Layer `layer`'s steps on `text` (one forward pass, kept for the process)."""
    out = ckpt.run(text, framework(), capture_layer=layer)
    steps = {s.name: np.asarray(s.value, np.float64)[0] for s in out.steps}  # item 0 of the batch

    def first(*names: str) -> np.ndarray:
        return next(steps[n] for n in names if n in steps)

    return Capture(
        tokens=tuple(ckpt.labels(out.ids)),
        q=steps["q_heads"],
        k=steps["k_heads"],
        q_rope=first("q_rope", "q_heads"),
        k_rope=first("k_rope", "k_heads"),
        k_repeated=first("k_repeated", "k_rope", "k_heads"),
        v_repeated=first("v_repeated", "v_heads"),
        weights=steps["softmax"],
    )


def rope_base(ckpt) -> float | None:
    """The checkpoint's RoPE base (its global layers' for Gemma 3), or None when it has no RoPE."""
    config = ckpt.config
    return getattr(config, "rope_theta", None)


def turned(x: np.ndarray, position: int, base: float) -> np.ndarray:
    """`x (D,)` turned by RoPE as at `position` (the reference's rotation, float64)."""
    return reference.rope(np.tile(np.asarray(x, np.float64), (position + 1, 1)), base)[position]


# What the seeds share: sentence p is read at layer `pooled_layer(p)`.
SENTENCES = (
    "The cat sat on the mat because it was tired.",
    "When the rain stopped, the children ran outside to play.",
    "A small boat drifted slowly across the quiet lake.",
    "She opened the old letter and read it twice.",
    "The engineers tested the bridge before it opened.",
    "My grandmother grows tomatoes in her garden every summer.",
)


def pooled(ckpt, p: int) -> tuple[str, int, Capture]:
    """Pool entry `p` (0 … `POOL` − 1): its sentence, its layer (spread from the first to the last)
    and that layer's capture."""
    last = ckpt.config.num_hidden_layers - 1
    layer = round(p * last / (POOL - 1))
    return SENTENCES[p], layer, capture(ckpt, SENTENCES[p], layer)
