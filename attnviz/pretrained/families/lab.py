"""The Training lab's model as a family: what it is (`TrainConfig`, validated on construction), its
weights (`param_shapes` names every parameter, `init_params` draws the starting weights both frameworks
load: numpy, `x @ W` layout; `check_params` checks given ones), and its saved runs read back as
checkpoints (`TrainingRun.save`).

Defined here, below `attnviz.training` (which trains it and re-exports these names), because a saved
run is a checkpoint any model page opens: `config.json` holds `model_type: "attnviz-training"` and the
run's `training_config` (a `TrainConfig`); `model.safetensors` the weights in `param_shapes` layout.
The architecture is the lab's, not GPT-2's — post-LayerNorm blocks (`LN(x + attn(x))`, optional ReLU
MLP `LN(x + mlp(x))`), no final norm, an unembedding with a bias, causal or not — so it has its own
layout (`layouts.lab_layout`), run by the same `decoder.Decoder` as GPT-2's. Token ids are written as
integers ("3 1 4 1"), as the lab's tasks use them.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.errors import SpecError
from attnviz.pretrained.files import CONFIG, CheckpointError, ShapeTable, kind_of

TASKS = ("copy", "reverse", "sort", "induction")
OPTIMIZERS = ("sgd", "adam")
DTYPES = ("float32", "float64")
LIMITS = {  # inclusive bounds of the integer fields
    "seq_len": (2, 64),
    "vocab": (2, 256),
    "n_layers": (1, 4),
    "n_heads": (1, 8),
    "d_model": (2, 256),
    "d_k": (1, 256),
    "d_v": (1, 256),
    "steps": (1, 100_000),
    "batch": (1, 1024),
    "seed": (0, 2**32 - 1),
    "snapshot_every": (1, 100_000),
}
LR_MAX = 10.0
MODEL_TYPE = "attnviz-training"
PARAM_MAX = 1e4  # the largest |weight| a run may start from (larger ones overflow float32 activations)


def _allowed_int(name: str) -> str:
    lo, hi = LIMITS[name]
    return f"an integer from {lo} to {hi}"


@dataclass(frozen=True)
class TrainConfig:
    """What to train: the task, the model's sizes and the optimisation.

    `d_k`/`d_v` None → `d_model // n_heads`. `causal` applies a decoder-style
    mask (query i sees keys ≤ i); induction needs it, reverse and sort cannot
    work with it. `mlp` False → attention-only. A snapshot (probe attentions
    and pattern scores) is taken every `snapshot_every` steps and at the end.
    """

    task: str = "reverse"
    seq_len: int = 8
    vocab: int = 10
    n_layers: int = 1
    n_heads: int = 1
    d_model: int = 32
    d_k: int | None = None
    d_v: int | None = None
    causal: bool = False
    mlp: bool = False
    steps: int = 1500
    batch: int = 64
    lr: float = 0.01
    optimizer: str = "adam"
    seed: int = 0
    dtype: str = "float32"
    snapshot_every: int = 25

    def __post_init__(self):
        def bad(name: str, allowed: str):
            raise SpecError(name, getattr(self, name), allowed, prefix="TrainConfig.")

        if self.task not in TASKS:
            bad("task", " | ".join(map(repr, TASKS)))
        for name in LIMITS:
            value = getattr(self, name)
            if value is None and name in ("d_k", "d_v"):
                continue
            lo, hi = LIMITS[name]
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not lo <= value <= hi:
                bad(
                    name,
                    _allowed_int(name) + (" or None (d_model // n_heads)" if name in ("d_k", "d_v") else ""),
                )
        for name in ("causal", "mlp"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                bad(name, "True or False")
        lr = self.lr
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (0 < lr <= LR_MAX):
            bad("lr", f"a number in (0, {LR_MAX:g}]")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", " | ".join(map(repr, OPTIMIZERS)))
        if self.dtype not in DTYPES:
            bad("dtype", " | ".join(map(repr, DTYPES)))
        if (self.d_k is None or self.d_v is None) and self.d_model % self.n_heads:
            bad("n_heads", f"a divisor of d_model={self.d_model} (or set d_k and d_v)")
        if self.task == "induction":
            if not self.causal:
                bad("causal", "True for the induction task (it is next-token prediction)")
            if self.seq_len < 6:
                bad("seq_len", "≥ 6 for induction (two copies of a span of at least 2, and room between)")
            need = self.seq_len - -(-self.seq_len // 4)
            if self.vocab < need:
                bad(
                    "vocab",
                    f"≥ {need} for induction with seq_len {self.seq_len} (distinct tokens but the repeat)",
                )
        elif self.causal and self.task in ("reverse", "sort"):
            bad(
                "causal",
                f"False for {self.task!r}: position i's answer may lie after i, which a causal mask hides",
            )

    @property
    def head_dims(self) -> tuple[int, int]:
        """`(d_k, d_v)` with None resolved."""
        default = self.d_model // self.n_heads
        return (self.d_k or default, self.d_v or default)

    # The Hugging Face names `pretrained.Checkpoint.config` has, so the Pretrained page can show a
    # trained model (`TrainedModel.config`) the way it shows any other checkpoint.
    @property
    def num_hidden_layers(self) -> int:
        return self.n_layers

    @property
    def num_attention_heads(self) -> int:
        return self.n_heads

    @property
    def hidden_size(self) -> int:
        return self.d_model

    @property
    def n_snapshots(self) -> int:
        return (self.steps - 1) // self.snapshot_every + 2  # step 0, every snapshot_every, the end

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        if not isinstance(data, dict):
            raise SpecError("config", data, "a dict of TrainConfig fields", prefix="TrainConfig.")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise SpecError("config", sorted(unknown), "TrainConfig field names", prefix="TrainConfig.")
        return cls(**data)


# -- parameters -----------------------------------------------------------------------------


def param_shapes(config: TrainConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in a fixed order (weights in `x @ W` layout)."""
    V, T, D, H = config.vocab, config.seq_len, config.d_model, config.n_heads
    Dk, Dv = config.head_dims
    shapes: dict[str, tuple[int, ...]] = {"embed.token": (V, D), "embed.position": (T, D)}
    for i in range(config.n_layers):
        p = f"layers.{i}."
        shapes |= {
            p + "attn.W_q": (D, H * Dk), p + "attn.b_q": (H * Dk,),
            p + "attn.W_k": (D, H * Dk), p + "attn.b_k": (H * Dk,),
            p + "attn.W_v": (D, H * Dv), p + "attn.b_v": (H * Dv,),
            p + "attn.W_o": (H * Dv, D), p + "attn.b_o": (D,),
            p + "ln1.gamma": (D,), p + "ln1.beta": (D,),
        }  # fmt: skip
        if config.mlp:
            shapes |= {
                p + "mlp.W_in": (D, 4 * D), p + "mlp.b_in": (4 * D,),
                p + "mlp.W_out": (4 * D, D), p + "mlp.b_out": (D,),
                p + "ln2.gamma": (D,), p + "ln2.beta": (D,),
            }  # fmt: skip
    return shapes | {"unembed.W": (D, V), "unembed.b": (V,)}


def init_params(config: TrainConfig) -> dict[str, np.ndarray]:
    """Deterministic starting weights (numpy, `config.dtype`) that both frameworks load.

    Embeddings ~ N(0, 1); weights ~ N(0, 1/fan_in); biases 0; LayerNorm gains 1.
    Drawn from `numpy.random.default_rng(config.seed)` in `param_shapes` order.
    """
    rng = np.random.default_rng(config.seed)
    params = {}
    for name, shape in param_shapes(config).items():
        last = name.rsplit(".", 1)[-1]
        if name.startswith("embed."):
            value = rng.standard_normal(shape)
        elif last.startswith("W"):
            value = rng.standard_normal(shape) / math.sqrt(shape[0])
        elif last == "gamma":
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        params[name] = value.astype(config.dtype)
    return params


def check_params(config: TrainConfig, params: Any) -> dict[str, np.ndarray]:
    """Starting weights a run can use: `param_shapes`' names and shapes, finite real numbers,
    each |value| ≤ `PARAM_MAX`; returned as `config.dtype` arrays.

    Raises:
        SpecError: naming the weight (`params['layers.0.attn.W_q']`) and what it must be.
    """
    shapes = param_shapes(config)
    if not isinstance(params, dict):
        raise SpecError("params", params, "a dict of arrays named as param_shapes(config) names them")
    extra = sorted(set(params) - set(shapes), key=str)
    if extra:
        raise SpecError(
            "params", extra, f"only the names of param_shapes(config), e.g. {next(iter(shapes))!r}"
        )
    out = {}
    for name, shape in shapes.items():
        field = f"params[{name!r}]"
        if name not in params:
            raise SpecError(field, None, f"an array of shape {shape} (the weight is missing)")
        try:
            value = np.asarray(params[name])
        except Exception:  # arrays that numpy cannot even build (ragged lists)
            value = np.asarray(None)
        if value.dtype.kind not in "fiu" or value.dtype == np.bool_:
            raise SpecError(field, params[name], f"real numbers of shape {shape}")
        if value.shape != shape:
            raise SpecError(field, params[name], f"shape {shape}", value_text=f"shape {value.shape}")
        finite = bool(np.isfinite(value).all())
        worst = float(np.max(np.abs(value), initial=0.0)) if finite else math.inf
        if not worst <= PARAM_MAX:
            raise SpecError(
                field,
                params[name],
                f"finite values with |w| ≤ {PARAM_MAX:g}",
                value_text=f"an array with largest |w| {worst:g}" if finite else "an array with NaN or inf",
            )
        out[name] = value.astype(config.dtype)
    return out


# -- saved runs as checkpoints ------------------------------------------------------------

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
