"""When each token and word was said, from the cross-attention of the alignment heads, as OpenAI's
Whisper times words (`whisper/timing.py`, `find_alignment`): each alignment head's rows over the
clip's frames renormalised, standardised over the tokens, median-filtered over time (width 7),
averaged over the heads, then dynamic time warping (Sakoe & Chiba, 1978) of the tokens against the
frames. Each audio position is 20 ms (1500 positions = 30 s).

Shapes: A alignment heads, T decoder rows, S audio positions, n text tokens.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

SECONDS_PER_POSITION = 0.02  # 30 s over 1500 encoder positions
MEDIAN_WIDTH = 7


@dataclass(frozen=True)
class Word:
    """A word as the tokenizer wrote it (leading space kept), its tokens' indices in the text
    tokens, and its start and end in seconds."""

    text: str
    tokens: tuple[int, ...]
    start: float
    end: float


def median_filter(x: np.ndarray, width: int = MEDIAN_WIDTH) -> np.ndarray:
    """The median over a sliding window of `width` along the last axis, the ends reflected
    (`whisper.timing.median_filter`); shorter rows come back unchanged."""
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)  # (…, S, width)
    return np.median(windows, axis=-1).astype(x.dtype)


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest monotone path through `cost (N, M)` from (0, 0) to (N − 1, M − 1), moving
    down, right or diagonally; ties go right, as in `whisper.timing.dtw_cpu`. Returns the path's
    row and column indices."""
    N, M = cost.shape
    total = np.full((N + 1, M + 1), np.inf, dtype=np.float32)
    trace = -np.ones((N + 1, M + 1), dtype=np.int8)
    total[0, 0] = 0
    for j in range(1, M + 1):
        for i in range(1, N + 1):
            c0, c1, c2 = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            total[i, j] = cost[i - 1, j - 1] + c
            trace[i, j] = t
    trace[0, :], trace[:, 0] = 2, 1
    i, j, path = N, M, []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        step = trace[i, j]
        i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
    rows, cols = np.array(path[::-1]).T
    return rows, cols


def alignment_matrix(cross: np.ndarray, heads: tuple[tuple[int, int], ...], frames: int) -> np.ndarray:
    """`cross (L, H, T, S)` → `(T, frames)`: the alignment heads' rows over the clip's first
    `frames` positions, renormalised, standardised over the rows, median-filtered, averaged."""
    w = np.stack([cross[layer, head, :, :frames] for layer, head in heads]).astype(np.float64)  # (A, T, f)
    w = w / w.sum(-1, keepdims=True)  # the softmax over the clip's positions only
    mean, std = w.mean(-2, keepdims=True), w.std(-2, keepdims=True)
    w = (w - mean) / np.maximum(std, 1e-12)
    return median_filter(w).mean(0)  # (T, f)


def token_starts(matrix: np.ndarray, n_start: int, n: int) -> np.ndarray:
    """Each of the n text tokens' start in seconds, and the end of the last, `(n + 1,)`: the rows
    of `matrix (T, S)` from the last start token to the last text token (the end token's row, when
    there is one, left out), time-warped against the frames; a row's time is the frame where the
    path first reaches it."""
    rows, cols = dtw(-matrix[n_start - 1 : n_start + n])
    jumps = np.pad(np.diff(rows), (1, 0), constant_values=1).astype(bool)
    return cols[jumps] * SECONDS_PER_POSITION


def split_words(pieces: list[str]) -> list[list[int]]:
    """Token indices grouped into words: a piece that starts with a space or is punctuation opens a
    word (`whisper.tokenizer.split_tokens_on_spaces`); a piece that is not whole UTF-8 yet
    ("\\ufffd") joins the next."""
    words: list[list[int]] = []
    pending: list[int] = []
    for i, piece in enumerate(pieces):
        pending.append(i)
        if "\ufffd" in piece and i + 1 < len(pieces):
            continue
        text = "".join(pieces[j] for j in pending) if len(pending) > 1 else piece
        if not words or text.startswith(" ") or text.strip() in string.punctuation:
            words.append(pending)
        else:
            words[-1].extend(pending)
        pending = []
    return words


def words_of(pieces: list[str], starts: np.ndarray) -> list[Word]:
    """`Word`s of the text tokens `pieces` (each token's text) with `starts (n + 1,)` from
    `token_starts`: a word runs from its first token's start to the next word's start."""
    out = []
    for group in split_words(pieces):
        text = "".join(pieces[i] for i in group)
        out.append(Word(text, tuple(group), float(starts[group[0]]), float(starts[group[-1] + 1])))
    return out
