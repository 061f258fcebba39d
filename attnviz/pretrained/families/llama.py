"""The Llama family (Touvron et al., 2023) as transformers stores it: config and tensor table.

A Llama block is pre-RMSNorm attention with rotary positions (RoPE) on q and k, grouped K/V
heads (GQA: `num_key_value_heads` K/V heads each serve `num_attention_heads / num_key_value_heads`
query heads), no biases, then pre-RMSNorm SwiGLU, `down(silu(gate(x)) · up(x))`. SmolLM2,
TinyLlama and Llama 2/3 (without rope scaling) are such models. The model classes are
`backends/*/llama.py`; a GGUF file is first converted to this folder layout (`pretrained.gguf`).
Shapes: D hidden size, H query heads, Hkv K/V heads, Dh head width, I MLP width, V vocabulary.
"""

from __future__ import annotations

import re
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

PREFIXES = ("model.",)
LAYER_KEY = re.compile(r"^layers\.(\d+)\.")


@dataclass(frozen=True)
class LlamaConfig:
    """The parts of a Llama `config.json` the model needs (transformers' names)."""

    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    vocab_size: int
    tie_word_embeddings: bool = True
    model_type: str = "llama"
    kind: str = "decoder"
    hidden_act: str = "silu"

    def attention_scale(self, layer: int) -> float:
        """The factor the scores are multiplied by (every layer: 1/√Dh)."""
        return self.head_dim**-0.5


def llama_config(data: dict) -> LlamaConfig:
    """A Llama `config.json`, every field checked; what attnviz does not compute is refused."""
    choice(data, "hidden_act", ("silu",), "silu")
    for name in ("attention_bias", "mlp_bias"):
        choice(data, name, (False,), False)
    get(data, "pretraining_tp", "1 (no tensor-parallel split)", lambda v: v == 1 and v is not True, 1)
    heads = positive_int(data, "num_attention_heads")
    width = positive_int(data, "hidden_size")
    cfg = LlamaConfig(
        hidden_size=width,
        num_attention_heads=heads,
        num_key_value_heads=positive_int(data, "num_key_value_heads", heads),
        head_dim=positive_int(data, "head_dim", *([width // heads] if width % heads == 0 else [])),
        num_hidden_layers=positive_int(data, "num_hidden_layers", most=MAX_LAYERS),
        intermediate_size=positive_int(data, "intermediate_size"),
        rms_norm_eps=positive_float(data, "rms_norm_eps", 1e-6, least=MIN_LAYER_NORM_EPS),
        rope_theta=_rope_theta(data),
        max_position_embeddings=positive_int(data, "max_position_embeddings"),
        vocab_size=positive_int(data, "vocab_size"),
        tie_word_embeddings=get(
            data, "tie_word_embeddings", "true or false", lambda v: isinstance(v, bool), False
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


def _rope_theta(data: dict) -> float:
    """`rope_theta` (transformers ≤ 4) or `rope_parameters.rope_theta` (5); no rope scaling."""
    params = data.get("rope_parameters") or {}
    scaling = data.get("rope_scaling") or {}
    for name, value in (("rope_parameters", params), ("rope_scaling", scaling)):
        if not isinstance(value, dict):
            raise CheckpointError(CONFIG, name, kind_of(value), "a JSON object or null")
        kind = value.get("rope_type", value.get("type", "default"))
        if kind != "default":
            raise CheckpointError(
                CONFIG,
                f"{name}.rope_type",
                kind_of(kind, "a scaled rotary embedding"),
                "'default' (no rope scaling)",
            )
    if "rope_theta" in params:
        return positive_float(params, "rope_theta", least=1.0 + 1e-9)
    return positive_float(data, "rope_theta", 10000.0, least=1.0 + 1e-9)


def llama_shapes(cfg: LlamaConfig) -> ShapeTable:
    """Tensor name (after "model.") → (shape, the config.json fields that set it); `(out, in)`."""
    D, I, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    Q, KV = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes = {
        "embed_tokens.weight": ((V, D), "vocab_size, hidden_size"),
        "norm.weight": ((D,), "hidden_size"),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        shapes[p + "input_layernorm.weight"] = ((D,), "hidden_size")
        shapes[p + "self_attn.q_proj.weight"] = ((Q, D), "num_attention_heads × head_dim, hidden_size")
        shapes[p + "self_attn.k_proj.weight"] = ((KV, D), "num_key_value_heads × head_dim, hidden_size")
        shapes[p + "self_attn.v_proj.weight"] = ((KV, D), "num_key_value_heads × head_dim, hidden_size")
        shapes[p + "self_attn.o_proj.weight"] = ((D, Q), "hidden_size, num_attention_heads × head_dim")
        shapes[p + "post_attention_layernorm.weight"] = ((D,), "hidden_size")
        shapes[p + "mlp.gate_proj.weight"] = ((I, D), "intermediate_size, hidden_size")
        shapes[p + "mlp.up_proj.weight"] = ((I, D), "intermediate_size, hidden_size")
        shapes[p + "mlp.down_proj.weight"] = ((D, I), "hidden_size, intermediate_size")
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = ((V, D), "vocab_size, hidden_size")
    return shapes


def llama_attention(weights: dict[str, np.ndarray], cfg: LlamaConfig, layer: int) -> dict[str, np.ndarray]:
    """Layer `layer`'s `W_q (D, H·Dh)`, `W_k`, `W_v (D, Hkv·Dh)`, `W_o (H·Dh, D)` (no biases)."""
    p = f"layers.{layer}.self_attn."
    return {
        f"W_{ours}": np.ascontiguousarray(weights[f"{p}{ours}_proj.weight"].T)  # (out, in) → (in, out)
        for ours in "qkvo"
    }
