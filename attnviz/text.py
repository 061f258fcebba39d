"""Sentences as attention inputs: one position per word, embedded deterministically.

Each word's vector comes from a hash of its lower-cased text (so a repeated
word gets the same vector, and its attention pattern repeats), plus the
sinusoidal position encoding of "Attention Is All You Need" §3.5.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

MAX_TOKENS = 512
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def tokenize(text: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Words and punctuation marks, in order, at most `max_tokens` of them."""
    return _WORD.findall(text or "")[:max_tokens]


def word_vector(word: str, width: int) -> np.ndarray:
    """A standard-normal vector of `width`, fixed by the word (case-insensitive)."""
    digest = hashlib.blake2b(word.lower().encode("utf-8"), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(width)


def positional_encoding(length: int, width: int) -> np.ndarray:
    """Sinusoidal encoding `(length, width)`: sin on even columns, cos on odd."""
    pos = np.arange(length)[:, None]
    rate = 1.0 / np.power(10000.0, (2 * (np.arange(width) // 2)) / width)
    angles = pos * rate[None, :]
    return np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))


def embed(tokens: list[str], width: int, batch: int = 1, dtype: str = "float32") -> np.ndarray:
    """`(batch, len(tokens), width)`: word vectors + positions, the same for every batch item."""
    words = np.stack([word_vector(t, width) for t in tokens]) if tokens else np.zeros((0, width))
    x = words + positional_encoding(len(tokens), width)
    return np.broadcast_to(x, (batch, *x.shape)).astype(dtype)
