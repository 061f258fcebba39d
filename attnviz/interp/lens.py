"""Reading the logit lens: the top tokens of each layer's residual stream.

`Checkpoint.logit_lens(output)` applies the final norm and the unembedding to every
entry of `output.hidden_states` (nostalgebraist, 2020); this module turns that
`(L + 1, T, vocab)` array into what a person reads: the most likely next token at
each layer and position, with its probability and the runners-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.pretrained import softmax_rows


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
