"""Direct logit attribution: how much of the answer − wrong logit difference each head writes itself.

The residual stream at the last position is a sum — the embeddings, every head's output through its
slice of the output projection, the output projections' biases, every MLP's output. The final norm
is linear once its divisor (σ for LayerNorm, the RMS for RMSNorm) is read from the run, so the logit
difference splits exactly into one term per part (Elhage et al., 2021; Wang et al., 2022, §3.1):

    term(v) = centre(v) / scale · γ · (unembed[answer] − unembed[wrong])

(`centre` subtracts the mean for a LayerNorm only), plus the final norm's bias · (the same
difference). A head with a large term writes the answer directly; a head that matters under
patching but has a small term matters through later layers. Gemma 3 normalises each attention
block's output before it joins the residual stream (`post_attention_layernorm`): that norm too is
linear once its divisor (the RMS of the heads' summed output at this position) is read from the
run, so each head's term goes through it first.

Shapes: L layers, H heads, T tokens, D hidden size, Dh head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.interp import weights
from attnviz.interp.patching import token_id


@dataclass(frozen=True)
class LogitAttribution:
    """The logit difference at the last position, split into the parts of the residual stream.

    Attributes:
        heads: `(L, H)` each head's direct term.
        embeddings: the token (and position) embeddings' term.
        mlps: `(L,)` each block's MLP term (its output read from the run: the block's change of
            the residual stream minus its attention output).
        attn_biases: `(L,)` each output projection's bias term (zeros for Llama).
        norm_bias: the final norm's bias · (unembed[answer] − unembed[wrong]) (0 for RMSNorm).
        logit_diff: the model's own `logits[-1, answer] − logits[-1, wrong]`.
        tokens: the prompt as text; answer, wrong: the two tokens as text.
    """

    heads: np.ndarray
    embeddings: float
    mlps: np.ndarray
    attn_biases: np.ndarray
    norm_bias: float
    logit_diff: float
    tokens: list[str]
    answer: str
    wrong: str

    @property
    def total(self) -> float:
        """The sum of every term: equals `logit_diff` up to float32 rounding."""
        parts = self.heads.sum() + self.mlps.sum() + self.attn_biases.sum()
        return float(parts + self.embeddings + self.norm_bias)


def decompose(
    ckpt, text: str, answer: str | int, wrong: str | int, framework: str = "torch"
) -> LogitAttribution:
    """One run of `text` in `framework`, its logit difference split term by term.

    Args:
        answer, wrong: token ids or one-token texts.
    """
    weights.family(ckpt)
    a, w = token_id(ckpt, answer, "answer"), token_id(ckpt, wrong, "wrong")
    out = ckpt.run(text, framework, head_outputs=True)
    x = out.hidden_states[:, -1].astype(np.float64)  # (L + 1, D): residual stream at the last position
    z = out.head_outputs[:, :, -1].astype(np.float64)  # (L, H, Dh)
    norm = weights.final_norm(ckpt)
    U = weights.unembedding(ckpt, [a, w])  # (2, D): two rows, not the vocabulary
    u = U[0] - U[1]  # (D,)
    direction = norm.weight * u / norm.scale(x[-1])  # (D,): the final norm, frozen at this position

    def term(v: np.ndarray) -> np.ndarray:  # (..., D) → (...)
        return norm.centre(v) @ direction

    L = z.shape[0]
    layers = [weights.layer_heads(ckpt, layer) for layer in range(L)]
    written = np.stack(
        [lay.written(z[i]) for i, lay in enumerate(layers)]
    )  # (L, H, D), Gemma's post-norm held
    biases = np.stack([lay.b_O for lay in layers])  # (L, D)
    mlp = x[1:] - x[:-1] - written.sum(1) - biases  # (L, D): what each block added besides attention
    return LogitAttribution(
        heads=term(written),
        embeddings=float(term(x[0])),
        mlps=term(mlp),
        attn_biases=term(biases),
        norm_bias=float(norm.bias @ u),
        logit_diff=float(out.logits[-1, a]) - float(out.logits[-1, w]),
        tokens=ckpt.labels(out.ids),
        answer=ckpt.labels([a])[0],
        wrong=ckpt.labels([w])[0],
    )


def direct_logit_attribution(
    ckpt, text: str, answer: str | int, wrong: str | int, framework: str = "torch"
) -> np.ndarray:
    """`(L, H)`: each head's direct contribution to `logit[answer] − logit[wrong]` after `text`."""
    return decompose(ckpt, text, answer, wrong, framework).heads
