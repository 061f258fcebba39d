"""Each decoder family's parts as data: a `DecoderLayout` built from the family's parsed config.

One function per family, named in its `families.FAMILIES` row; each framework's `decoder.Decoder`
runs any of them. A new decoder family is a new function here, not a new block loop: Gemma 3
(RMSNorm before and after each sublayer, GeGLU, QK-norm, five sliding-window layers per global
one, each with its own RoPE base) is `Sublayer(before=…, after=…)`, `Mlp("gelu_pytorch_tanh", …,
gate=…)`, a per-layer `Heads(window=…, rope_base=…, qk_norm_eps=…)` and an `embed_scale`.
"""

from __future__ import annotations

from attnviz.backends.common import DecoderLayout, Heads, Layer, Linear, Mlp, Norm, Sublayer
from attnviz.pretrained.families.config import ModelConfig
from attnviz.pretrained.families.gemma import GemmaConfig
from attnviz.pretrained.families.lab import LabConfig
from attnviz.pretrained.families.llama import LlamaConfig


def gpt2_layout(cfg: ModelConfig) -> DecoderLayout:
    """GPT-2 (transformers' `modeling_gpt2.py`): learned positions, pre-LayerNorm
    `x + attn(ln_1(x))`, `x + mlp(ln_2(x))` with a GELU Conv1D MLP (`x @ W + b`), a final `ln_f`."""

    def norm(name: str) -> Norm:
        return Norm("layer", f"{name}.weight", f"{name}.bias", cfg.layer_norm_eps)

    def conv1d(name: str) -> Linear:
        return Linear(f"{name}.weight", f"{name}.bias")  # (in, out)

    layers = tuple(
        Layer(
            Heads(cfg.num_attention_heads, cfg.head_dim, cfg.head_dim, scale=cfg.attention_scale(i)),
            Sublayer(before=norm(f"h.{i}.ln_1")),
            Mlp(cfg.hidden_act, conv1d(f"h.{i}.mlp.c_fc"), conv1d(f"h.{i}.mlp.c_proj")),
            Sublayer(before=norm(f"h.{i}.ln_2")),
        )
        for i in range(cfg.num_hidden_layers)
    )
    unembed = "wte.weight" if cfg.tie_word_embeddings else "lm_head.weight"  # (V, D)
    return DecoderLayout(
        cfg.hidden_size, "wte.weight", "wpe.weight", layers, norm("ln_f"), Linear(unembed, transposed=True)
    )


def gated_mlp(act: str, prefix: str) -> Mlp:
    """The gated MLP `down(act(gate(x)) · up(x))` under transformers' names (`<prefix>mlp.gate_proj`,
    `up_proj`, `down_proj`; weights `(out, in)`), as Llama and Gemma store it."""

    def linear(name: str) -> Linear:
        return Linear(f"{prefix}mlp.{name}.weight", transposed=True)

    return Mlp(act, linear("up_proj"), linear("down_proj"), gate=linear("gate_proj"))


def llama_layout(cfg: LlamaConfig) -> DecoderLayout:
    """Llama (transformers' `modeling_llama.py`): no position table (RoPE in attention), grouped
    K/V heads without biases, pre-RMSNorm, the SwiGLU MLP `down(silu(gate(x)) · up(x))`, a final
    RMSNorm. Weights are `(out, in)`: `x @ Wᵀ`."""

    def norm(name: str) -> Norm:
        return Norm("rms", f"{name}.weight", None, cfg.rms_norm_eps)

    def layer(i: int) -> Layer:
        p = f"layers.{i}."
        heads = Heads(
            cfg.num_attention_heads,
            cfg.head_dim,
            cfg.head_dim,
            n_kv_heads=cfg.num_key_value_heads,
            rope_base=cfg.rope_theta,
            bias=False,
            scale=cfg.attention_scale(i),
        )
        return Layer(
            heads,
            Sublayer(before=norm(p + "input_layernorm")),
            gated_mlp(cfg.hidden_act, p),
            Sublayer(before=norm(p + "post_attention_layernorm")),
        )

    unembed = "embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"  # (V, D)
    layers = tuple(layer(i) for i in range(cfg.num_hidden_layers))
    return DecoderLayout(
        cfg.hidden_size, "embed_tokens.weight", None, layers, norm("norm"), Linear(unembed, transposed=True)
    )


def gemma_layout(cfg: GemmaConfig) -> DecoderLayout:
    """Gemma 3 (transformers' `modeling_gemma3.py`): embeddings times √D, per layer
    `x + post(attn(pre(x)))` and `x + post(mlp(pre(x)))` with RMSNorms scaling by `1 + w`, QK-norm,
    local (windowed, RoPE base 10,000) or global (RoPE base 1,000,000) attention, the GeGLU MLP
    `down(gelu_tanh(gate(x)) · up(x))`, a final RMSNorm and tied unembedding. Weights `(out, in)`."""

    def norm(name: str) -> Norm:
        return Norm("rms", f"{name}.weight", None, cfg.rms_norm_eps, offset=1.0)

    def layer(i: int) -> Layer:
        p = f"layers.{i}."
        local = cfg.is_local(i)
        heads = Heads(
            cfg.num_attention_heads,
            cfg.head_dim,
            cfg.head_dim,
            n_kv_heads=cfg.num_key_value_heads,
            rope_base=cfg.rope_local if local else cfg.rope_global,
            window=cfg.sliding_window if local else None,
            bias=False,
            scale=cfg.attention_scale(i),
            qk_norm_eps=cfg.rms_norm_eps,
        )
        return Layer(
            heads,
            Sublayer(before=norm(p + "input_layernorm"), after=norm(p + "post_attention_layernorm")),
            gated_mlp(cfg.hidden_act, p),
            Sublayer(
                before=norm(p + "pre_feedforward_layernorm"), after=norm(p + "post_feedforward_layernorm")
            ),
        )

    unembed = "embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"  # (V, D)
    layers = tuple(layer(i) for i in range(cfg.num_hidden_layers))
    return DecoderLayout(
        cfg.hidden_size,
        "embed_tokens.weight",
        None,
        layers,
        norm("norm"),
        Linear(unembed, transposed=True),
        embed_scale=cfg.embed_scale,
    )


def lab_layout(cfg: LabConfig) -> DecoderLayout:
    """The Training lab's model (`attnviz.pretrained.families.lab`): learned positions, post-LayerNorm
    `LN(x + attn(x))` and, with an MLP, `LN(x + W_out·relu(W_in·x))`; no final norm; logits
    `x @ W + b`; causal or not."""
    train = cfg.train

    def norm(name: str) -> Norm:
        return Norm("layer", f"{name}.gamma", f"{name}.beta", cfg.layer_norm_eps)

    def layer(i: int) -> Layer:
        p = f"layers.{i}."
        mlp = None
        if train.mlp:
            mlp = Mlp(
                "relu", Linear(p + "mlp.W_in", p + "mlp.b_in"), Linear(p + "mlp.W_out", p + "mlp.b_out")
            )
        return Layer(
            Heads(train.n_heads, *train.head_dims),
            Sublayer(outside=norm(p + "ln1")),
            mlp,
            Sublayer(outside=norm(p + "ln2")),
        )

    layers = tuple(layer(i) for i in range(train.n_layers))
    return DecoderLayout(
        train.d_model,
        "embed.token",
        "embed.position",
        layers,
        None,
        Linear("unembed.W", "unembed.b"),
        causal=train.causal,
    )
