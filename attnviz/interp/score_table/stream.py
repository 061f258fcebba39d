"""The residual stream entering a layer, split into the parts that wrote it.

A decoder's residual stream at a position is a sum (Elhage et al., 2021, "A Mathematical Framework
for Transformer Circuits"): the token embedding, GPT-2's position embedding, each earlier head's
output through its slice of the output projection, each output projection's bias (GPT-2), each
earlier MLP's output. Every part is read from one run of attnviz's own decoder (`head_outputs=True`):
a head's output is its attention-weighted values times its `W_O` slice; an MLP's output is the
block's change of the stream minus its attention output, so the parts add up to the stream the run
computed, to float64 rounding. Gemma 3 normalises each attention block's output before it joins the
stream (`post_attention_layernorm`); that norm is linear once its divisor — the RMS of the heads'
summed output at that position — is read from the run, so each head's part goes through it with
the divisor held (`weights.LayerHeads.written`, which `attnviz.interp.dla` reads too).

Shapes: L layers, H heads, T tokens, n chosen positions, D hidden size, Dh head width, P parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz import formats
from attnviz.interp import weights

EMBED, POSITION, MLP, ATTN_BIAS = "embed", "pos", "mlp", "attn_bias"


def head_name(layer: int, head: int) -> str:
    """A head's name wherever attnviz's interpretability writes one: `"L3.H5"`."""
    return formats.head(layer, head)


def layer_part(layer: int, what: str) -> str:
    """A layer's non-head part: `"L3.mlp"`, `"L3.attn_bias"`."""
    return f"L{layer}.{what}"


@dataclass(frozen=True)
class StreamParts:
    """The residual stream entering one layer at n positions, as a sum of named parts.

    Attributes:
        names: P names: "embed", "pos" (GPT-2), then per earlier layer l each head "Ll.Hh",
            "Ll.attn_bias" (GPT-2), "Ll.mlp".
        vectors: `(P, n, D)` float64, each part at each position; `vectors.sum(0)` is `stream`.
        stream: `(n, D)` float64, the residual stream the run computed there.
    """

    names: list[str]
    vectors: np.ndarray
    stream: np.ndarray


def split(ckpt, hidden: np.ndarray, heads: np.ndarray, layer: int, positions) -> StreamParts:
    """The stream entering `layer` at `positions`, split into its parts.

    Args:
        hidden: `(L + 1, T, D)` the run's residual stream entering each block (`hidden_states`).
        heads: `(L, H, T, Dh)` each head's attention-weighted values (`head_outputs`).
        positions: the n positions to split, `0 … T − 1`.
    """
    positions = np.asarray(positions, dtype=int)
    x = hidden[: layer + 1, positions].astype(np.float64)  # (layer + 1, n, D)
    names, vectors = _embedding(ckpt, x[0], positions)
    for m in range(layer):
        lay = weights.layer_heads(ckpt, m)
        written = lay.written(heads[m][:, positions].astype(np.float64))  # (H, n, D)
        bias = np.broadcast_to(lay.b_O, x[0].shape)  # (n, D)
        mlp = x[m + 1] - x[m] - written.sum(0) - bias  # (n, D): what the block added besides attention
        names += [head_name(m, h) for h in range(written.shape[0])]
        vectors += list(written)
        if _has_output_bias(ckpt):
            names.append(layer_part(m, ATTN_BIAS))
            vectors.append(bias)
        names.append(layer_part(m, MLP))
        vectors.append(mlp)
    return StreamParts(names, np.stack(vectors), x[layer])


def _embedding(ckpt, x0: np.ndarray, positions: np.ndarray) -> tuple[list[str], list[np.ndarray]]:
    """The stream entering block 0, `x0 (n, D)`: the token embedding (times √D for Gemma), and
    GPT-2's learned position embedding as a part of its own."""
    table = weights.NAMES[weights.family(ckpt)][3]
    if table is None:
        return [EMBED], [x0]
    pos = ckpt.weights[table][positions].astype(np.float64)  # (n, D)
    return [EMBED, POSITION], [x0 - pos, pos]


def _has_output_bias(ckpt) -> bool:
    """GPT-2's output projections have a bias; Llama's and Gemma's have none (no part for them)."""
    return weights.family(ckpt) == "gpt2"
