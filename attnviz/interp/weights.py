"""A decoder's weights as circuits read them: per-head matrices, the norms, embedding and unembedding.

Direct logit attribution and the QK/OV circuits (Elhage et al., 2021, "A Mathematical Framework for
Transformer Circuits") read the same few tensors of a GPT-2-, Llama- or Gemma 3-family checkpoint;
this module is the one place that knows their names. Everything is float64 and in attnviz's row
layout, `x @ W`. Gemma 3 (transformers' `modeling_gemma3.py`): every norm scales by `1 + w` (stored
`w`), the embedding is multiplied by √D (the unembedding, tied, is not), each head's q and k are
RMS-normed before RoPE (QK-norm), the attention block's output is RMS-normed before it joins the
residual stream (`post_attention_layernorm`), and the RoPE base is the local or global layer's.

Shapes: L layers, H query heads, Hkv K/V heads, D hidden size, Dh head width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError

# model_type → (final norm, a layer's input norm with {layer}, token embedding, position embedding)
NAMES = {
    "gpt2": ("ln_f", "h.{layer}.ln_1", "wte.weight", "wpe.weight"),
    "llama": ("norm", "layers.{layer}.input_layernorm", "embed_tokens.weight", None),
    "gemma3_text": ("norm", "layers.{layer}.input_layernorm", "embed_tokens.weight", None),
}
GEMMA = "gemma3_text"


@dataclass(frozen=True)
class Norm:
    """A LayerNorm (`centred`, with a bias) or an RMSNorm, over the last axis.

    Attributes:
        weight: `(D,)` the gain γ; bias: `(D,)` β (zeros for RMSNorm); eps: added to the variance.
        centred: True for LayerNorm (subtracts the mean first), False for RMSNorm.
    """

    weight: np.ndarray
    bias: np.ndarray
    eps: float
    centred: bool

    def centre(self, x: np.ndarray) -> np.ndarray:
        """`x (..., D)` minus its mean over D (LayerNorm), or `x` itself (RMSNorm)."""
        x = np.asarray(x, np.float64)
        return x - x.mean(-1, keepdims=True) if self.centred else x

    def scale(self, x: np.ndarray) -> np.ndarray:
        """`(...,)` the divisor: σ = √(var + eps) (LayerNorm) or RMS = √(mean(x²) + eps) (RMSNorm)."""
        return np.sqrt((self.centre(x) ** 2).mean(-1) + self.eps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The norm of `x (..., D)`: `centre(x) / scale(x) · weight + bias`."""
        return self.centre(x) / self.scale(x)[..., None] * self.weight + self.bias


def family(ckpt) -> str:
    """The checkpoint's family name, or a `SpecError` for one these circuits do not read."""
    kind = getattr(ckpt.config, "model_type", None)
    if getattr(ckpt, "kind", None) != "decoder" or kind not in NAMES:
        raise SpecError(
            "checkpoint", getattr(ckpt, "name", ckpt), "a GPT-2-, Llama- or Gemma 3-family decoder",
            value_text=f"a {kind} {getattr(ckpt, 'kind', 'model')}",
        )  # fmt: skip
    return kind


def _norm(ckpt, name: str) -> Norm:
    w = ckpt.weights
    weight = w[name + ".weight"].astype(np.float64)
    if family(ckpt) == "gpt2":
        return Norm(weight, w[name + ".bias"].astype(np.float64), ckpt.config.layer_norm_eps, True)
    if family(ckpt) == GEMMA:
        weight = 1.0 + weight  # Gemma3RMSNorm scales by 1 + w
    return Norm(weight, np.zeros_like(weight), ckpt.config.rms_norm_eps, False)


def final_norm(ckpt) -> Norm:
    """The norm between the last block and the unembedding (`ln_f`, `norm`)."""
    return _norm(ckpt, NAMES[family(ckpt)][0])


def input_norm(ckpt, layer: int) -> Norm:
    """The norm that layer `layer`'s attention reads the residual stream through."""
    return _norm(ckpt, NAMES[family(ckpt)][1].format(layer=layer))


def embedding(ckpt, rows=None) -> np.ndarray:
    """`(n_tokens, D)` the token embedding as the residual stream starts with it (rows past the
    tokenizer's vocabulary dropped; Gemma's multiplied by √D); `rows` (ids, a slice): those rows
    only — Gemma's whole matrix is 262,144 × 640, 1.3 GB in float64."""
    name = NAMES[family(ckpt)][2]
    scale = ckpt.config.embed_scale if family(ckpt) == GEMMA else 1.0
    return _rows(ckpt.weights[name][: ckpt.n_tokens], rows) * scale


def unembedding(ckpt, rows=None) -> np.ndarray:
    """`(n_tokens, D)`: row v is the direction whose dot product with the final norm's output is logit v
    (a tied unembedding is the embedding matrix itself, unscaled); `rows`: those rows only."""
    tied = ckpt.config.tie_word_embeddings
    name = NAMES[family(ckpt)][2] if tied else "lm_head.weight"
    return _rows(ckpt.weights[name][: ckpt.n_tokens], rows)


def _rows(matrix: np.ndarray, rows) -> np.ndarray:
    return (matrix if rows is None else matrix[rows]).astype(np.float64)


@dataclass(frozen=True)
class LayerHeads:
    """One layer's attention weights split per query head (K/V heads repeated for GQA).

    Attributes:
        W_Q, W_K, W_V: `(H, D, Dh)`: head h's query is `x @ W_Q[h]`; W_K, W_V are those of its K/V head.
        W_O: `(H, Dh, D)`: head h's slice of the output projection.
        b_O: `(D,)` the output projection's bias (zeros without one).
        scale: the factor the scores are multiplied by (1/√Dh; Gemma: `query_pre_attn_scalar^-½`).
        rope_base: the rotary base (None: no RoPE; Gemma: the local or the global layers').
        q_norm, k_norm: Gemma's QK-norm, an RMSNorm over each head's `(Dh,)` q and k before RoPE
            (None elsewhere).
        post: Gemma's `post_attention_layernorm`, an RMSNorm over the attention block's output
            `(D,)` (the sum of the heads' outputs) before it joins the residual stream (None elsewhere).
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray
    b_O: np.ndarray
    scale: float
    rope_base: float | None
    q_norm: Norm | None = None
    k_norm: Norm | None = None
    post: Norm | None = None

    def written(self, z: np.ndarray) -> np.ndarray:
        """`z (H, ..., Dh)`, each head's attention-weighted values, → `(H, ..., D)`, what each head
        writes into the residual stream: through its `W_O` slice and (Gemma) the post-attention
        RMSNorm, its divisor — the RMS of the heads' sum at each position — read from `z` itself."""
        written = np.einsum("h...d,hdD->h...D", z, self.W_O)
        if self.post is not None:
            written = written / self.post.scale(written.sum(0))[None, ..., None] * self.post.weight
        return written

    @property
    def W_O_gained(self) -> np.ndarray:
        """`(H, Dh, D)` W_O with the post-attention norm's gain (Gemma) folded in: what a head
        writes up to the norm's positive divisor, which the whole block's output sets."""
        return self.W_O if self.post is None else self.W_O * self.post.weight


def layer_heads(ckpt, layer: int) -> LayerHeads:
    """Layer `layer`'s weights per head, float64."""
    family(ckpt)
    cfg = ckpt.config
    L, H, Dh = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.head_dim
    if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or not 0 <= layer < L:
        raise SpecError("layer", layer, f"an integer 0 … {L - 1}")
    p = {k: v.astype(np.float64) for k, v in ckpt.layer_params(int(layer)).items()}
    D = p["W_q"].shape[0]
    Hkv = p["W_k"].shape[1] // Dh  # query head h reads K/V head h // (H / Hkv)

    def split(W: np.ndarray, n: int) -> np.ndarray:  # (D, n·Dh) → (n, D, Dh), repeated to H heads
        return np.repeat(W.reshape(D, n, Dh).transpose(1, 0, 2), H // n, axis=0)

    rope = getattr(cfg, "rope_theta", None) if family(ckpt) == "llama" else None
    q_norm = k_norm = post = None
    if family(ckpt) == GEMMA:
        rope = cfg.rope_local if cfg.is_local(int(layer)) else cfg.rope_global
        # 1 + w in float64 (`gemma_attention`'s `q_norm`, `k_norm` are 1 + w rounded to float32)
        q_norm, k_norm = (_norm(ckpt, f"layers.{int(layer)}.self_attn.{side}_norm") for side in "qk")
        post = _norm(ckpt, f"layers.{int(layer)}.post_attention_layernorm")
    return LayerHeads(
        W_Q=split(p["W_q"], H),
        W_K=split(p["W_k"], Hkv),
        W_V=split(p["W_v"], Hkv),
        W_O=p["W_o"].reshape(H, Dh, D),  # (H·Dh, D) → (H, Dh, D)
        b_O=p.get("b_o", np.zeros(D)),
        scale=float(cfg.attention_scale(int(layer))),
        rope_base=rope,
        q_norm=q_norm,
        k_norm=k_norm,
        post=post,
    )
