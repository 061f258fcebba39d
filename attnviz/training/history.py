"""`TrainingRun`: what a run has produced so far — curves, snapshots, scores, the final weights — and its files."""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.interp.scores import SCORES
from attnviz.pretrained.families.lab import MODEL_TYPE, TrainConfig


@dataclass
class TrainingRun:
    """A run so far (or finished).

    Attributes:
        history: one dict per step: `step` (1-based), `loss`, `accuracy` (training batch).
        snapshots: `(step, attentions (L, H, T, T))` for `probe[0]`, float32.
        scores: per snapshot, `step`, `elapsed_s` (training time so far), `held_out_accuracy`
            and each of `SCORES` as `(L, H)`.
        probe: `(N, T)` the probe sequences the scores average over.
        params: the final weights (numpy, `init_params` layout); None until finished.
        final_accuracy: held-out token accuracy at the end (None until finished).
        stopped: True when a stop (its monitor's) ended it early.
        saved_as: the name `attnviz.training.save.share` saved it under (one save per run).
    """

    config: TrainConfig
    framework: str
    probe: np.ndarray
    history: list[dict[str, float]] = field(default_factory=list)
    snapshots: list[tuple[int, np.ndarray]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, np.ndarray] | None = None
    final_accuracy: float | None = None
    elapsed_s: float = 0.0
    saved_as: str | None = field(default=None, compare=False, repr=False)  # `save.share`'s name, once
    stopped: bool = False

    @property
    def steps_done(self) -> int:
        return self.history[-1]["step"] if self.history else 0

    @property
    def finished(self) -> bool:
        return self.params is not None

    def score_series(self, name: str) -> np.ndarray:
        """`(snapshots, L, H)` of one score over time."""
        return np.stack([s[name] for s in self.scores])

    def history_csv(self) -> str:
        lines = ["step,loss,accuracy"]
        lines += [f"{h['step']},{h['loss']:.9g},{h['accuracy']:.6g}" for h in self.history]
        return "\n".join(lines) + "\n"

    def snapshots_npz(self) -> bytes:
        """`steps (S,)`, `attentions (S, L, H, T, T)`, `probe (N, T)` and every score `(S, L, H)`."""

        buf = io.BytesIO()
        arrays = {
            "steps": np.array([s for s, _ in self.snapshots]),
            "attentions": np.stack([a for _, a in self.snapshots]),
            "probe": self.probe,
            "held_out_accuracy": np.array([s["held_out_accuracy"] for s in self.scores]),
        }
        arrays |= {f"score_{name}": self.score_series(name) for name in SCORES}
        np.savez_compressed(buf, **arrays)
        return buf.getvalue()

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint directory (`config.json` + `model.safetensors`) that `load_checkpoint` opens."""
        if self.params is None:
            raise ValueError("save: the run has not finished; allowed: a finished or stopped run.")
        from safetensors.numpy import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {
            "model_type": MODEL_TYPE,
            "training_config": self.config.to_dict(),
            "framework": self.framework,
            "steps_done": self.steps_done,
            "final_accuracy": self.final_accuracy,
            "num_hidden_layers": self.config.n_layers,
            "num_attention_heads": self.config.n_heads,
            "hidden_size": self.config.d_model,
        }
        (path / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
        save_file(
            {k: np.ascontiguousarray(v) for k, v in self.params.items()}, str(path / "model.safetensors")
        )
        return path

    def checkpoint_zip(self) -> bytes:
        """`save`'s folder (`config.json` + `model.safetensors`) as a zip, for a download:
        `attnviz.pretrained.load` opens the unpacked folder."""
        buf = io.BytesIO()
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(buf, "w") as zf:
            folder = self.save(Path(tmp) / "checkpoint")
            for file in sorted(folder.iterdir()):
                zf.write(file, f"checkpoint/{file.name}")
        return buf.getvalue()
