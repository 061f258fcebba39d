"""The model families attnviz reads: one typed `Family` row per `config.json` `model_type`.

A row says how the family's config parses, which tensors its weights hold
(and their shapes), how one layer's attention weights map onto attnviz's
`MultiHeadAttention`, and which model class runs it in a framework — reached
through the framework's package (`backend(fw).decoder.Decoder`), never by a
string. Every decoder family runs on the one `decoder.Decoder` of each framework, its parts
(norms, MLP, positions, each layer's attention) declared by the row's `layout`
(`attnviz.pretrained.families.layouts`): adding a decoder family is adding a row and a layout, no
model class.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.backends.common import DecoderLayout
from attnviz.pretrained.families import lab
from attnviz.pretrained.families.config import ModelConfig, bert_config, gpt2_config
from attnviz.pretrained.families.gemma import gemma_attention, gemma_config, gemma_shapes
from attnviz.pretrained.families.layouts import gemma_layout, gpt2_layout, lab_layout, llama_layout
from attnviz.pretrained.families.llama import LAYER_KEY, PREFIXES, llama_attention, llama_config, llama_shapes
from attnviz.pretrained.families.whisper import LAYER_KEY as WHISPER_LAYER
from attnviz.pretrained.families.whisper import (
    read_whisper,
    whisper_attention,
    whisper_options,
    whisper_shapes,
    whisper_tokenizer,
)
from attnviz.pretrained.files import (
    CONFIG,
    CheckpointError,
    ShapeTable,
    kind_of,
    read_tensors,
    read_tokenizer,
)


@dataclass(frozen=True)
class Family:
    """One model family.

    Attributes:
        parse: `config.json` (parsed) → the family's config (`CheckpointError` on a bad field).
        shapes: config → tensor name → (shape, the config fields that set it).
        attention: (weights, config, layer) → that layer's `W_q … b_o` in attnviz's `x @ W` layout.
        prefixes: stripped from tensor names ("bert.", "transformer.").
        layer_key: finds a layer index in a tensor name (extra layers are refused).
        tokenizer: (directory, config) → the tokenizer (`encode`, `decode`, `id_to_token`,
            `get_vocab_size`, as the tokenizers library's).
        model: a framework's package (`attnviz.frameworks.backend(fw)`) → the model class, built
            from the `Checkpoint` and called as `model(ids, type_ids, ...)` (see `backends.common`).
        layout: config → the decoder's parts (`backends.common.DecoderLayout`), read by
            `decoder.Decoder`; None for a family with its own model class (BERT, Whisper).
        read: directory → (config, weights) for a family whose weights file also sets its sizes
            (CTranslate2's `model.bin`: Whisper); None: `parse` the config, then `read_weights`.

    The kind ("encoder" or "decoder") is the config's: a Training-lab model may be either.
    """

    parse: Callable[[dict], Any]
    shapes: Callable[[Any], ShapeTable]
    attention: Callable[[dict, Any, int], dict[str, np.ndarray]]
    prefixes: tuple[str, ...]
    layer_key: re.Pattern
    tokenizer: Callable[[Path, Any], Any]
    model: Callable[[Any], type]
    layout: Callable[[Any], DecoderLayout] | None = None
    read: Callable[[Path], tuple[Any, dict[str, np.ndarray]]] | None = None

    def read_weights(self, path: Path, cfg: Any) -> dict[str, np.ndarray]:
        """The tensors `cfg` needs from `path/model.safetensors`, float32, checked."""
        return read_tensors(path, self.shapes(cfg), self.prefixes, self.layer_key, cfg.num_hidden_layers)


def _bert_shapes(cfg: ModelConfig) -> ShapeTable:
    D, I = cfg.hidden_size, cfg.intermediate_size
    e = "embeddings."
    shapes = {
        e + "word_embeddings.weight": ((cfg.vocab_size, D), "vocab_size, hidden_size"),
        e + "position_embeddings.weight": (
            (cfg.max_position_embeddings, D),
            "max_position_embeddings, hidden_size",
        ),
        e + "token_type_embeddings.weight": ((cfg.type_vocab_size, D), "type_vocab_size, hidden_size"),
        e + "LayerNorm.weight": ((D,), "hidden_size"),
        e + "LayerNorm.bias": ((D,), "hidden_size"),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for name in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            shapes[p + name + ".weight"] = ((D, D), "hidden_size")
            shapes[p + name + ".bias"] = ((D,), "hidden_size")
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + name + ".weight"] = ((D,), "hidden_size")
            shapes[p + name + ".bias"] = ((D,), "hidden_size")
        shapes[p + "intermediate.dense.weight"] = ((I, D), "intermediate_size, hidden_size")
        shapes[p + "intermediate.dense.bias"] = ((I,), "intermediate_size")
        shapes[p + "output.dense.weight"] = ((D, I), "hidden_size, intermediate_size")
        shapes[p + "output.dense.bias"] = ((D,), "hidden_size")
    return shapes


def _bert_attention(weights: dict[str, np.ndarray], cfg: ModelConfig, layer: int) -> dict[str, np.ndarray]:
    p = f"encoder.layer.{layer}.attention."
    out = {}
    for ours, theirs in (("q", "self.query"), ("k", "self.key"), ("v", "self.value"), ("o", "output.dense")):
        out[f"W_{ours}"] = np.ascontiguousarray(weights[f"{p}{theirs}.weight"].T)  # (out, in) → (in, out)
        out[f"b_{ours}"] = weights[f"{p}{theirs}.bias"]
    return out


def _gpt2_shapes(cfg: ModelConfig) -> ShapeTable:
    """Conv1D weights are (in, out)."""
    D, I = cfg.hidden_size, cfg.intermediate_size
    shapes = {
        "wte.weight": ((cfg.vocab_size, D), "vocab_size, n_embd"),
        "wpe.weight": ((cfg.max_position_embeddings, D), "n_positions, n_embd"),
        "ln_f.weight": ((D,), "n_embd"),
        "ln_f.bias": ((D,), "n_embd"),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"h.{i}."
        for name in ("ln_1", "ln_2"):
            shapes[f"{p}{name}.weight"] = ((D,), "n_embd")
            shapes[f"{p}{name}.bias"] = ((D,), "n_embd")
        shapes[p + "attn.c_attn.weight"] = ((D, 3 * D), "n_embd")
        shapes[p + "attn.c_attn.bias"] = ((3 * D,), "n_embd")
        shapes[p + "attn.c_proj.weight"] = ((D, D), "n_embd")
        shapes[p + "attn.c_proj.bias"] = ((D,), "n_embd")
        shapes[p + "mlp.c_fc.weight"] = ((D, I), "n_embd, n_inner")
        shapes[p + "mlp.c_fc.bias"] = ((I,), "n_inner")
        shapes[p + "mlp.c_proj.weight"] = ((I, D), "n_inner, n_embd")
        shapes[p + "mlp.c_proj.bias"] = ((D,), "n_embd")
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = ((cfg.vocab_size, D), "vocab_size, n_embd")
    return shapes


def _gpt2_attention(weights: dict[str, np.ndarray], cfg: ModelConfig, layer: int) -> dict[str, np.ndarray]:
    """`c_attn` is one Conv1D `(D, 3D)` = [W_q | W_k | W_v], already in attnviz's (in, out) layout."""
    p, D = f"h.{layer}.attn.", cfg.hidden_size
    W, b = weights[p + "c_attn.weight"], weights[p + "c_attn.bias"]
    out = {}
    for i, key in enumerate("qkv"):
        out[f"W_{key}"] = np.ascontiguousarray(W[:, i * D : (i + 1) * D])  # (D, D)
        out[f"b_{key}"] = b[i * D : (i + 1) * D]
    out["W_o"], out["b_o"] = weights[p + "c_proj.weight"], weights[p + "c_proj.bias"]
    return out


def _hf_tokenizer(path: Path, cfg: ModelConfig):
    encoder = cfg.kind == "encoder"
    return read_tokenizer(
        path, encoder=encoder, vocab_size=cfg.vocab_size, positions=cfg.max_position_embeddings
    )


# model_type → Family: the one dispatch point.
FAMILIES: dict[str, Family] = {
    "bert": Family(
        bert_config,
        _bert_shapes,
        _bert_attention,
        ("bert.",),
        re.compile(r"^encoder\.layer\.(\d+)\."),
        _hf_tokenizer,
        lambda fw: fw.bert.BertEncoder,
    ),
    "gpt2": Family(
        gpt2_config,
        _gpt2_shapes,
        _gpt2_attention,
        ("transformer.",),
        re.compile(r"^h\.(\d+)\."),
        _hf_tokenizer,
        lambda fw: fw.decoder.Decoder,
        gpt2_layout,
    ),
    "llama": Family(
        llama_config,
        llama_shapes,
        llama_attention,
        PREFIXES,
        LAYER_KEY,
        _hf_tokenizer,
        lambda fw: fw.decoder.Decoder,
        llama_layout,
    ),
    "gemma3_text": Family(
        gemma_config,
        gemma_shapes,
        gemma_attention,
        PREFIXES,
        LAYER_KEY,
        _hf_tokenizer,
        lambda fw: fw.decoder.Decoder,
        gemma_layout,
    ),
    "whisper": Family(  # an encoder–decoder in CTranslate2's model.bin (found by that file)
        whisper_options,
        whisper_shapes,
        whisper_attention,
        (),
        WHISPER_LAYER,
        whisper_tokenizer,
        lambda fw: fw.whisper.Whisper,
        read=read_whisper,
    ),
    lab.MODEL_TYPE: Family(  # "attnviz-training": the Training lab's saved models
        lab.lab_config,
        lab.lab_shapes,
        lab.lab_attention,
        (),
        lab.LAYER_KEY,
        lab.lab_tokenizer,
        lambda fw: fw.decoder.Decoder,
        lab_layout,
    ),
}


def family_of(data: Any) -> tuple[str, Family]:
    """A parsed `config.json`'s `model_type` (default "bert") and its family, or a `CheckpointError`."""
    if not isinstance(data, dict):
        raise CheckpointError(CONFIG, None, kind_of(data), "a JSON object")
    model_type = data.get("model_type", "bert")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise CheckpointError(
            CONFIG,
            "model_type",
            kind_of(model_type, "an unsupported model type"),
            " | ".join(map(repr, FAMILIES)),
        )
    return model_type, FAMILIES[model_type]


def parse_config(data: Any) -> Any:
    """Validate a parsed `config.json` with its family's parser."""
    return family_of(data)[1].parse(data)
