"""`config.json` → the configuration a model family needs, every field checked.

`ModelConfig` holds the fields under BERT's names (GPT-2's `n_embd` is read
as `hidden_size`, …); each family has a parser here that names the field that
is wrong in a `CheckpointError`. A hostile config cannot make the tensor table
huge: every size is bounded before the weights are compared with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnviz.pretrained.files import CONFIG, CheckpointError, kind_of

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
MAX_LAYERS = 512
# A LayerNorm epsilon below this lets a constant row divide by ~0 in float32 (1e-320 gives NaN).
MIN_LAYER_NORM_EPS = 1e-12
_MISSING = object()


@dataclass(frozen=True)
class ModelConfig:
    """The parts of a checkpoint's `config.json` the model needs, under BERT's names.

    `kind` is "encoder" (bidirectional) or "decoder" (causal).
    """

    model_type: str
    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    hidden_act: str
    layer_norm_eps: float
    max_position_embeddings: int
    vocab_size: int
    type_vocab_size: int = 0
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    tie_word_embeddings: bool = True
    kind: str = "encoder"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def attention_scale(self, layer: int) -> float:
        """The factor the scores are multiplied by in layer `layer`."""
        scale = self.head_dim**-0.5 if self.scale_attn_weights else 1.0
        return scale / (layer + 1) if self.scale_attn_by_inverse_layer_idx else scale


EncoderConfig = ModelConfig  # the name before decoders existed


def get(
    data: dict, name: str, allowed: str, ok: Callable[[Any], bool], default: Any = _MISSING, strings: str = ""
) -> Any:
    """`data[name]` if `ok`, else a `CheckpointError` (config.json, `name`) saying what is `allowed`."""
    if name not in data or (data[name] is None and default is not _MISSING):
        if default is _MISSING:
            raise CheckpointError(CONFIG, name, "nothing (the field is missing)", allowed)
        return default
    value = data[name]
    if not ok(value):
        raise CheckpointError(CONFIG, name, kind_of(value, strings or "a JSON string"), allowed)
    return value


def positive_int(data: dict, name: str, default: Any = _MISSING, most: int = 1 << 24) -> int:
    """A positive integer up to `most`."""
    ok = lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v <= most  # noqa: E731
    return get(data, name, f"an integer from 1 to {most:,}", ok, default)


def positive_float(data: dict, name: str, default: Any = _MISSING, least: float = 0.0) -> float:
    """A finite number > 0 (and ≥ `least` when given)."""
    ok = lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0  # noqa: E731
    allowed = "a finite number > 0" + (f", at least {least:g}" if least else "")
    return float(get(data, name, allowed, lambda v: ok(v) and v >= least, default))


def choice(data: dict, name: str, allowed: tuple, default: Any = _MISSING) -> Any:
    ok = lambda v: isinstance(v, type(allowed[0])) and v in allowed  # noqa: E731
    return get(
        data, name, " | ".join(repr(a) for a in allowed), ok, default, "a value outside the allowed set"
    )


def flag(data: dict, name: str, default: bool) -> bool:
    return get(data, name, "true or false", lambda v: isinstance(v, bool), default)


def _check_heads(cfg: ModelConfig, heads: str, width: str) -> ModelConfig:
    if cfg.hidden_size % cfg.num_attention_heads:
        raise CheckpointError(
            CONFIG, heads, "a number that does not divide " + width, f"a divisor of {width}"
        )
    return cfg


def bert_config(data: dict) -> ModelConfig:
    """BERT's `config.json` (an encoder; absolute positions)."""
    choice(data, "position_embedding_type", ("absolute",), "absolute")
    choice(data, "is_decoder", (False,), False)  # a causal BERT is not supported
    cfg = ModelConfig(
        model_type="bert",
        hidden_size=positive_int(data, "hidden_size"),
        num_attention_heads=positive_int(data, "num_attention_heads"),
        num_hidden_layers=positive_int(data, "num_hidden_layers", most=MAX_LAYERS),
        intermediate_size=positive_int(data, "intermediate_size"),
        hidden_act=choice(data, "hidden_act", ACTIVATIONS),
        layer_norm_eps=positive_float(data, "layer_norm_eps", least=MIN_LAYER_NORM_EPS),
        max_position_embeddings=positive_int(data, "max_position_embeddings"),
        vocab_size=positive_int(data, "vocab_size"),
        type_vocab_size=positive_int(data, "type_vocab_size", 2),
        kind="encoder",
    )
    return _check_heads(cfg, "num_attention_heads", "hidden_size")


def gpt2_config(data: dict) -> ModelConfig:
    """GPT-2's `config.json` (a decoder), read under BERT's names."""
    choice(data, "add_cross_attention", (False,), False)
    width = positive_int(data, "n_embd")
    cfg = ModelConfig(
        model_type="gpt2",
        hidden_size=width,
        num_attention_heads=positive_int(data, "n_head"),
        num_hidden_layers=positive_int(data, "n_layer", most=MAX_LAYERS),
        intermediate_size=positive_int(data, "n_inner", 4 * width),
        hidden_act=choice(data, "activation_function", ACTIVATIONS, "gelu_new"),
        layer_norm_eps=positive_float(data, "layer_norm_epsilon", 1e-5, least=MIN_LAYER_NORM_EPS),
        max_position_embeddings=positive_int(data, "n_positions"),
        vocab_size=positive_int(data, "vocab_size"),
        scale_attn_weights=flag(data, "scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=flag(data, "scale_attn_by_inverse_layer_idx", False),
        tie_word_embeddings=flag(data, "tie_word_embeddings", True),
        kind="decoder",
    )
    return _check_heads(cfg, "n_head", "n_embd")
