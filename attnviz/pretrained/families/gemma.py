"""The Gemma 3 family (Gemma Team, 2025) as transformers stores it (`model_type` "gemma3_text"):
config and tensor table, following transformers' `modeling_gemma3.py`.

A Gemma 3 block is attention with RMSNorm before and after it, then a GeGLU MLP
`down(gelu_tanh(gate(x)) · up(x))` with RMSNorm before and after it; every norm scales by
`1 + w` (the weight is stored as `w`). Attention normalises each head's q and k (QK-norm) before
RoPE, scales the scores by `query_pre_attn_scalar^-½`, and is local (a sliding window, RoPE base
10,000) or global (full causal, RoPE base 1,000,000) per `layer_types`; the head width need not be
`hidden_size / heads`. The token embeddings are multiplied by √hidden_size. Gemma 3 270M is such a
model; its GGUF file is first converted to this folder layout (`pretrained.gguf`).
Shapes: D hidden size, H query heads, Hkv K/V heads, Dh head width, I MLP width, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.pretrained.families.config import (
    MAX_LAYERS,
    MIN_LAYER_NORM_EPS,
    choice,
    get,
    positive_float,
    positive_int,
)
from attnviz.pretrained.files import CONFIG, CheckpointError, ShapeTable, kind_of

MODEL_TYPE = "gemma3_text"
LOCAL, GLOBAL = "sliding_attention", "full_attention"
PATTERN = 6  # transformers' default: every sixth layer global


@dataclass(frozen=True)
class GemmaConfig:
    """The parts of a Gemma 3 text `config.json` the model needs (transformers' names)."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    intermediate_size: int
    rms_norm_eps: float
    max_position_embeddings: int
    vocab_size: int
    query_pre_attn_scalar: float
    sliding_window: int
    layer_types: tuple[str, ...]
    rope_local: float  # RoPE base of the local (sliding-window) layers
    rope_global: float  # RoPE base of the global layers
    tie_word_embeddings: bool = True
    model_type: str = MODEL_TYPE
    kind: str = "decoder"
    hidden_act: str = "gelu_pytorch_tanh"

    def attention_scale(self, layer: int) -> float:
        """The factor the scores are multiplied by (every layer: `query_pre_attn_scalar^-½`)."""
        return self.query_pre_attn_scalar**-0.5

    def is_local(self, layer: int) -> bool:
        """Whether `layer` attends within the sliding window (else: every earlier position)."""
        return self.layer_types[layer] == LOCAL

    @property
    def embed_scale(self) -> float:
        """√D in float32, as transformers' `Gemma3TextScaledWordEmbedding` keeps it."""
        return float(np.float32(math.sqrt(self.hidden_size)))


def gemma_config(data: dict) -> GemmaConfig:
    """A Gemma 3 text `config.json`, every field checked; what attnviz does not compute is refused."""
    choice(data, "hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh")
    choice(data, "attention_bias", (False,), False)
    choice(data, "use_bidirectional_attention", (False,), False)
    for name in ("final_logit_softcapping", "attn_logit_softcapping"):
        get(data, name, "null (no soft-capping)", lambda v: v is None, None)
    heads = positive_int(data, "num_attention_heads")
    layers = positive_int(data, "num_hidden_layers", most=MAX_LAYERS)
    local, global_ = _rope_bases(data)
    cfg = GemmaConfig(
        hidden_size=positive_int(data, "hidden_size"),
        num_attention_heads=heads,
        num_key_value_heads=positive_int(data, "num_key_value_heads", heads),
        head_dim=positive_int(data, "head_dim", 256),
        num_hidden_layers=layers,
        intermediate_size=positive_int(data, "intermediate_size"),
        rms_norm_eps=positive_float(data, "rms_norm_eps", 1e-6, least=MIN_LAYER_NORM_EPS),
        max_position_embeddings=positive_int(data, "max_position_embeddings"),
        vocab_size=positive_int(data, "vocab_size"),
        query_pre_attn_scalar=positive_float(data, "query_pre_attn_scalar", 256.0),
        sliding_window=positive_int(data, "sliding_window", 4096),
        layer_types=_layer_types(data, layers),
        rope_local=local,
        rope_global=global_,
        tie_word_embeddings=get(
            data, "tie_word_embeddings", "true or false", lambda v: isinstance(v, bool), True
        ),
    )
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise CheckpointError(
            CONFIG,
            "num_key_value_heads",
            "a number that does not divide num_attention_heads",
            f"a divisor of num_attention_heads={heads}",
        )
    if cfg.head_dim % 2:
        raise CheckpointError(
            CONFIG, "head_dim", "an odd width", "an even width (RoPE turns pairs of features)"
        )
    return cfg


def _layer_types(data: dict, layers: int) -> tuple[str, ...]:
    """`layer_types`, or every `sliding_window_pattern`-th layer global (transformers' default)."""
    if data.get("layer_types") is None:
        pattern = positive_int(data, "sliding_window_pattern", PATTERN)
        return tuple(GLOBAL if (i + 1) % pattern == 0 else LOCAL for i in range(layers))
    ok = lambda v: isinstance(v, list) and len(v) == layers and all(t in (LOCAL, GLOBAL) for t in v)  # noqa: E731
    return tuple(get(data, "layer_types", f"a list of {layers} of {LOCAL!r} | {GLOBAL!r}", ok, None))


def _rope_bases(data: dict) -> tuple[float, float]:
    """(local, global) RoPE bases: `rope_parameters` by layer type (transformers 5), or
    `rope_local_base_freq` and `rope_theta` (4); unscaled only."""
    params = data.get("rope_parameters")
    if params is None:
        scaling = data.get("rope_scaling")
        if scaling is not None:
            raise CheckpointError(CONFIG, "rope_scaling", kind_of(scaling, "a scaled RoPE"), "null")
        return (
            positive_float(data, "rope_local_base_freq", 10000.0, least=1.0 + 1e-9),
            positive_float(data, "rope_theta", 1e6, least=1.0 + 1e-9),
        )
    bases = []
    for kind, default in ((LOCAL, 10000.0), (GLOBAL, 1e6)):
        part = params.get(kind, {}) if isinstance(params, dict) else None
        if not isinstance(part, dict) or part.get("rope_type", "default") != "default":
            raise CheckpointError(
                CONFIG, f"rope_parameters.{kind}", kind_of(part, "a scaled RoPE"), "{'rope_type': 'default'}"
            )
        bases.append(positive_float(part, "rope_theta", default, least=1.0 + 1e-9))
    return bases[0], bases[1]


def gemma_shapes(cfg: GemmaConfig) -> ShapeTable:
    """Tensor name (after "model.") → (shape, the config.json fields that set it); `(out, in)`."""
    D, I, V, Dh = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.head_dim
    Q, KV = cfg.num_attention_heads * Dh, cfg.num_key_value_heads * Dh
    shapes = {
        "embed_tokens.weight": ((V, D), "vocab_size, hidden_size"),
        "norm.weight": ((D,), "hidden_size"),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        for norm in ("input", "post_attention", "pre_feedforward", "post_feedforward"):
            shapes[f"{p}{norm}_layernorm.weight"] = ((D,), "hidden_size")
        shapes[p + "self_attn.q_proj.weight"] = ((Q, D), "num_attention_heads × head_dim, hidden_size")
        shapes[p + "self_attn.k_proj.weight"] = ((KV, D), "num_key_value_heads × head_dim, hidden_size")
        shapes[p + "self_attn.v_proj.weight"] = ((KV, D), "num_key_value_heads × head_dim, hidden_size")
        shapes[p + "self_attn.o_proj.weight"] = ((D, Q), "hidden_size, num_attention_heads × head_dim")
        shapes[p + "self_attn.q_norm.weight"] = ((Dh,), "head_dim")
        shapes[p + "self_attn.k_norm.weight"] = ((Dh,), "head_dim")
        shapes[p + "mlp.gate_proj.weight"] = ((I, D), "intermediate_size, hidden_size")
        shapes[p + "mlp.up_proj.weight"] = ((I, D), "intermediate_size, hidden_size")
        shapes[p + "mlp.down_proj.weight"] = ((D, I), "hidden_size, intermediate_size")
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = ((V, D), "vocab_size, hidden_size")
    return shapes


def gemma_attention(weights: dict[str, np.ndarray], cfg: GemmaConfig, layer: int) -> dict[str, np.ndarray]:
    """Layer `layer`'s `W_q (D, H·Dh)`, `W_k`, `W_v (D, Hkv·Dh)`, `W_o (H·Dh, D)` (no biases) and
    the QK-norm scales `q_norm`, `k_norm` `(Dh,)`, already `1 + w`."""
    p = f"layers.{layer}.self_attn."
    out = {
        f"W_{ours}": np.ascontiguousarray(weights[f"{p}{ours}_proj.weight"].T)  # (out, in) → (in, out)
        for ours in "qkvo"
    }
    for norm in ("q_norm", "k_norm"):
        out[norm] = np.float32(1.0) + weights[f"{p}{norm}.weight"]  # (Dh,), as Gemma3RMSNorm scales
    return out
