"""Reading the logit lens: the top tokens of each layer's residual stream.

`Checkpoint.logit_lens(output)` applies the final norm and the unembedding to every
entry of `output.hidden_states` (nostalgebraist, 2020); this module turns that
`(L + 1, T, vocab)` array into what a person reads: the most likely next token at
each layer and position, with its probability and the runners-up.

`read` never holds that array: it reads the lens a layer and a few positions at a time
(`budget.lens_chunk`) and keeps only the top k of each cell, so its peak beyond the forward pass
is one chunk of logits (a few MiB for a 49,152-token vocabulary) whatever the text's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.exec.monitor import Monitor, watch
from attnviz.pretrained import softmax_rows
from attnviz.pretrained.budget import lens_chunk


@dataclass(frozen=True)
class LensTable:
    """Top-k next tokens per (layer, position).

    Attributes:
        ids: `(L + 1, T, k)` token ids, most likely first.
        probs: `(L + 1, T, k)` their probabilities.
        labels: `(L + 1, T, k)` the tokens as text.
    """

    ids: np.ndarray
    probs: np.ndarray
    labels: np.ndarray


def top_tokens(ckpt, lens_logits: np.ndarray, k: int = 5) -> LensTable:
    """The `k` most likely tokens at every layer and position of `lens_logits (L + 1, T, vocab)`."""
    logits = np.asarray(lens_logits, np.float64)[..., : ckpt.n_tokens]
    probs = softmax_rows(logits.reshape(-1, logits.shape[-1])).reshape(logits.shape)
    ids = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    top = np.take_along_axis(probs, ids, axis=-1)
    names = np.array(ckpt.labels([int(i) for i in ids.ravel()]), dtype=object).reshape(ids.shape)
    return LensTable(ids, top, names)


def read(ckpt, output, k: int = 5, *, monitor: Monitor | None = None) -> LensTable:
    """The lens's top `k` tokens at every layer and position of `output` (a decoder's `ModelOutput`),
    computed chunk by chunk: the same table as `top_tokens(ckpt, ckpt.logit_lens(output), k)`.

    Args:
        monitor: told `(done, total)` after each layer; a stop ends the read there (`Stop`).
    """
    monitor = watch(monitor)
    rows, T = output.hidden_states.shape[0], output.hidden_states.shape[1]
    chunk = lens_chunk(ckpt.config)
    ids = np.zeros((rows, T, k), np.int64)
    probs = np.zeros((rows, T, k))
    for layer in range(rows):
        for start in range(0, T, chunk):
            cells = slice(start, min(T, start + chunk))
            logits = ckpt.logit_lens(output, layers=slice(layer, layer + 1), positions=cells)[0]  # (C, V)
            ids[layer, cells], probs[layer, cells] = _top(logits[:, : ckpt.n_tokens], k)
        monitor.step(layer + 1, rows)
    names = np.array(ckpt.labels([int(i) for i in ids.ravel()]), dtype=object).reshape(ids.shape)
    return LensTable(ids, probs, names)


def _top(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`(C, V)` logits → the `(C, k)` most likely ids (ties: the lower id first) and their probabilities."""
    p = softmax_rows(np.asarray(logits, np.float64))
    k = min(k, p.shape[-1])
    part = np.argpartition(-p, k - 1, axis=-1)[:, :k]  # the top k, unordered
    top = np.take_along_axis(p, part, axis=-1)
    order = np.lexsort((part, -top), axis=-1)  # by probability, then id
    ids = np.take_along_axis(part, order, axis=-1)
    return ids, np.take_along_axis(top, order, axis=-1)
