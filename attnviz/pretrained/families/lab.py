"""The Training lab's saved models (`TrainingRun.save`) as a model family.

`config.json` holds `model_type: "attnviz-training"` and the run's
`training_config` (a `TrainConfig`); `model.safetensors` the weights in
`attnviz.training.param_shapes` layout. The architecture is the lab's, not
GPT-2's — post-LayerNorm blocks (`LN(x + attn(x))`, optional ReLU MLP
`LN(x + mlp(x))`), no final norm, an unembedding with a bias, causal or not —
so it has its own layout (`layouts.lab_layout`), run by the same `decoder.Decoder` as GPT-2's.
Token ids are written as integers ("3 1 4 1"), as the lab's tasks use them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.errors import SpecError
from attnviz.pretrained.files import CONFIG, CheckpointError, ShapeTable, kind_of
from attnviz.training.config import MODEL_TYPE, TrainConfig, param_shapes

LAYER_NORM_EPS = 1e-6  # the lab's LayerNorm (backends/*/train.py)
LAYER_KEY = re.compile(r"^layers\.(\d+)\.")


@dataclass(frozen=True)
class LabConfig:
    """A lab model's configuration: the run's `TrainConfig` under the names `Checkpoint` reads."""

    train: TrainConfig
    model_type: str = MODEL_TYPE
    layer_norm_eps: float = LAYER_NORM_EPS

    @property
    def kind(self) -> str:
        return "decoder" if self.train.causal else "encoder"

    @property
    def num_hidden_layers(self) -> int:
        return self.train.n_layers

    @property
    def num_attention_heads(self) -> int:
        return self.train.n_heads

    @property
    def hidden_size(self) -> int:
        return self.train.d_model

    @property
    def head_dim(self) -> int:
        """The width of one head's output (`d_v`)."""
        return self.train.head_dims[1]

    @property
    def max_position_embeddings(self) -> int:
        return self.train.seq_len

    @property
    def vocab_size(self) -> int:
        return self.train.vocab


def lab_config(data: dict) -> LabConfig:
    """`config.json`'s `training_config` as a `TrainConfig`; a `CheckpointError` names the field."""
    raw = data.get("training_config")
    if not isinstance(raw, dict):
        received = "nothing (the field is missing)" if raw is None else kind_of(raw)
        raise CheckpointError(CONFIG, "training_config", received, "a JSON object of TrainConfig fields")
    try:
        return LabConfig(TrainConfig.from_dict(raw))
    except SpecError as error:
        field = "training_config" if error.field == "config" else f"training_config.{error.field}"
        raise CheckpointError(CONFIG, field, kind_of(error.value, "a JSON string"), error.allowed) from None
    except (TypeError, ValueError):  # a value TrainConfig's checks cannot even compare
        raise CheckpointError(
            CONFIG, "training_config", "values of the wrong types", "TrainConfig fields"
        ) from None


def lab_shapes(cfg: LabConfig) -> ShapeTable:
    return {name: (shape, "training_config") for name, shape in param_shapes(cfg.train).items()}


def lab_attention(weights: dict[str, np.ndarray], cfg: LabConfig, layer: int) -> dict[str, np.ndarray]:
    """Already in attnviz's `x @ W` layout, under attnviz's names."""
    p = f"layers.{layer}.attn."
    return {name: weights[p + name] for key in "qkvo" for name in (f"W_{key}", f"b_{key}")}


@dataclass(frozen=True)
class Encoding:
    """What `IntegerTokenizer.encode` returns (the fields of a tokenizers `Encoding` attnviz reads)."""

    ids: list[int]
    type_ids: list[int]
    tokens: list[str]


class IntegerTokenizer:
    """Token ids written as integers from 0 to vocab − 1, separated by spaces or commas."""

    def __init__(self, vocab: int, positions: int):
        self.vocab, self.positions = vocab, positions

    def encode(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> Encoding:
        words = text.replace(",", " ").split()
        if not words or not all(w.isascii() and w.isdigit() and int(w) < self.vocab for w in words):
            raise SpecError(
                "text",
                text,
                f"1 to {self.positions} integers from 0 to {self.vocab - 1}, separated by spaces",
            )
        ids = [int(w) for w in words]
        return Encoding(ids, [0] * len(ids), [str(i) for i in ids])

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return " ".join(str(int(i)) for i in ids)

    def id_to_token(self, i: int) -> str:
        return str(int(i))

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self.vocab

    def get_added_tokens_decoder(self) -> dict:
        return {}  # no special tokens


def lab_tokenizer(path: Path, cfg: LabConfig) -> IntegerTokenizer:
    return IntegerTokenizer(cfg.vocab_size, cfg.max_position_embeddings)
