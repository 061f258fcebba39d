"""Reading a saved training-lab model (`TrainingRun.save`'s folder) back: `load_checkpoint` → `TrainedModel`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.errors import SpecError
from attnviz.training.config import MODEL_TYPE, TrainConfig, param_shapes
from attnviz.training.loop import trainer_module


@dataclass(frozen=True)
class TrainedOutput:
    """What `TrainedModel.run` returns (the fields `pretrained.EncoderOutput` has, plus logits).

    Attributes:
        tokens: the input tokens as text.
        attentions: `(L, H, T, T)`.
        last_hidden_state: `(T, d_model)`.
        logits: `(T, vocab)`.
    """

    tokens: list[str]
    attentions: np.ndarray
    last_hidden_state: np.ndarray
    framework: str
    logits: np.ndarray


class TrainedModel:
    """A saved training-lab model: `config`, `params`, and `run(text, framework)`."""

    def __init__(self, path: Path, config: TrainConfig, params: dict[str, np.ndarray], meta: dict):
        self.path, self.name, self.config, self.params, self.meta = path, path.name, config, params, meta
        self._models: dict[str, Any] = {}

    def encode(self, text: str) -> list[int]:
        """Token ids from text: integers in `0 .. vocab-1`, separated by spaces or commas."""
        words = text.replace(",", " ").split() if isinstance(text, str) else []
        V, T = self.config.vocab, self.config.seq_len
        allowed = f"1 to {T} integers from 0 to {V - 1}, separated by spaces"
        if not 1 <= len(words) <= T or not all(w.isdigit() and int(w) < V for w in words):
            raise SpecError("text", text, allowed)
        return [int(w) for w in words]

    def run(self, text: str, framework: str = "torch", text_pair: str | None = None) -> TrainedOutput:
        """Run the model on `text` in `framework`."""
        if text_pair:
            raise SpecError("text_pair", text_pair, "None (a training-lab model reads one sequence)")
        ids = np.array([self.encode(text)])
        if framework not in self._models:
            self._models[framework] = trainer_module(framework).Model(self.config, self.params)
        logits, hidden, attn = self._models[framework].forward_numpy(ids)
        return TrainedOutput([str(i) for i in ids[0]], attn[0], hidden[0], framework, logits[0])


def load_checkpoint(path: str | Path) -> TrainedModel:
    """Open a directory written by `TrainingRun.save`.

    Raises:
        ValueError: missing files, another `model_type`, or weights that do not fit the config.
    """
    from safetensors.numpy import load_file

    path = Path(path)
    config_file, weights_file = path / "config.json", path / "model.safetensors"
    if not config_file.exists() or not weights_file.exists():
        raise ValueError(f"source: {path} needs config.json and model.safetensors.")
    meta = json.loads(config_file.read_text())
    if meta.get("model_type") != MODEL_TYPE:
        raise ValueError(f"config.json: model_type {meta.get('model_type')!r}; allowed: {MODEL_TYPE!r}.")
    config = TrainConfig.from_dict(meta["training_config"])
    params = load_file(str(weights_file))
    shapes = param_shapes(config)
    if {k: tuple(v.shape) for k, v in params.items()} != shapes:
        raise ValueError(f"model.safetensors: the weights do not match config.json's sizes ({path}).")
    return TrainedModel(path, config, {k: params[k] for k in shapes}, meta)
