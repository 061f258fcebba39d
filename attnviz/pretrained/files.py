"""Reading a checkpoint's files: `config.json`, `model.safetensors`, `tokenizer.json` / `vocab.txt`.

Every file is checked before a framework sees it, and every problem is a
`CheckpointError` naming the file and the field. The readers know nothing of
model families: a family hands `read_tensors` its table of expected shapes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.cache import trim_heap
from attnviz.errors import SpecError

CONFIG, WEIGHTS, TOKENIZER, VOCAB = "config.json", "model.safetensors", "tokenizer.json", "vocab.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"
FILES = (CONFIG, WEIGHTS, TOKENIZER, VOCAB, TOKENIZER_CONFIG, "model.bin")  # model.bin: CTranslate2 (Whisper)
MAX_CONFIG_BYTES = 1 << 20
# Largest magnitude of a weight (or a patched head output): beyond it a forward pass can
# overflow float32 (a LayerNorm's variance squares it: a 1e19 embedding gives inf, then NaN).
MAX_ABS_VALUE = 1e6

# Tensor name → (shape, the config.json fields that set it): what a family expects.
ShapeTable = dict[str, tuple[tuple[int, ...], str]]


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


def kind_of(value: Any, text_for_str: str = "a JSON string") -> str:
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


def read_json(path: Path, name: str = CONFIG) -> Any:
    """`path/name` parsed (at most 1 MiB), not yet validated."""
    file = path / name
    if not file.is_file():
        raise CheckpointError(name, None, "no such file in the checkpoint directory", f"a {name} file")
    if file.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(name, None, "a file over 1 MiB", f"a {name} of at most 1 MiB")
    try:
        return json.loads(file.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise CheckpointError(name, None, "text that is not valid JSON", "a JSON object") from None


def read_tensors(
    path: Path, expected: ShapeTable, prefixes: tuple[str, ...], layer_key: re.Pattern, n_layers: int
) -> dict[str, np.ndarray]:
    """The tensors of `expected` from `path/model.safetensors`, as float32, each checked for
    presence, shape, dtype and finiteness; weights for more than `n_layers` layers are refused."""
    from safetensors import safe_open

    file = path / WEIGHTS
    if not file.is_file():
        raise CheckpointError(
            WEIGHTS, None, "no such file", "a model.safetensors file (attnviz reads only safetensors weights)"
        )
    try:
        with safe_open(str(file), framework="numpy") as f:
            names = {_strip(k, prefixes): k for k in f.keys()}  # noqa: SIM118 (no __iter__)
            _check_layer_count(names, layer_key, n_layers)
            weights = {
                name: _tensor(f, names, name, shape, fields) for name, (shape, fields) in expected.items()
            }
    except CheckpointError:
        raise
    except Exception:  # SafetensorError, a dtype NumPy lacks (bfloat16), a truncated file
        raise CheckpointError(
            WEIGHTS,
            None,
            "a file safetensors cannot read as float tensors",
            "a safetensors file of float16/float32/float64 tensors",
        ) from None
    return {name: _float32(name, value) for name, value in weights.items()}


def _tensor(f, names: dict[str, str], name: str, shape: tuple[int, ...], fields: str) -> np.ndarray:
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
    return f.get_tensor(names[name])


def _float32(name: str, value: np.ndarray) -> np.ndarray:
    if value.dtype.kind != "f":
        raise CheckpointError(WEIGHTS, name, f"a {value.dtype} tensor", "a floating-point tensor")
    with np.errstate(over="ignore"):  # float64 beyond float32's range → inf, refused below
        value = value.astype(np.float32, copy=False)
    if not np.isfinite(value).all():
        raise CheckpointError(
            WEIGHTS, name, "NaN or infinite values (after conversion to float32)", "finite numbers"
        )
    if np.abs(value).max(initial=0) > MAX_ABS_VALUE:
        raise CheckpointError(
            WEIGHTS,
            name,
            f"values up to {float(np.abs(value).max()):.3g}",
            f"finite numbers of magnitude at most {MAX_ABS_VALUE:g} (larger ones overflow float32 in the forward pass)",
        )
    return value


def _strip(key: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _check_layer_count(names: dict[str, str], layer_key: re.Pattern, n_layers: int) -> None:
    layers = {int(m.group(1)) for n in names if (m := layer_key.match(n))}
    if any(i >= n_layers for i in layers):
        raise CheckpointError(
            WEIGHTS,
            "layers",
            f"weights for {max(layers) + 1} layers",
            f"{n_layers} layers, as config.json says",
        )


def read_tokenizer(path: Path, *, encoder: bool, vocab_size: int, positions: int):
    """The checkpoint's tokenizer (`tokenizer.json`, or BERT's `vocab.txt` for an `encoder`), its
    vocabulary checked against the `vocab_size` rows of the token embedding."""
    if (path / TOKENIZER).is_file():
        file, tok = TOKENIZER, _tokenizer_json(path)
    elif (path / VOCAB).is_file() and encoder:
        file, tok = VOCAB, _word_piece(path)
    else:
        raise CheckpointError(TOKENIZER, None, "no such file", "a tokenizer.json (or vocab.txt for BERT)")
    size = tok.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise CheckpointError(
            file,
            "vocabulary",
            f"{size:,} tokens",
            f"at most {vocab_size:,} tokens, the rows of the token embedding (config.json vocab_size)",
        )
    tok.no_padding()
    if encoder:
        tok.enable_truncation(positions)
    else:
        tok.no_truncation()
    return tok


def _tokenizer_json(path: Path):
    """The `tokenizer.json`, and the heap its parse freed handed back: reading Gemma 3's (262,144
    tokens, 514,906 merges, 14 MB) leaves the process 308 MiB resident against 115 MiB once trimmed —
    the Streamlit server holds each card it opens, for every visitor (docs/load.md)."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path / TOKENIZER))
    except Exception:  # the tokenizers library's own parse errors quote the file
        raise CheckpointError(
            TOKENIZER,
            None,
            "a file the tokenizers library cannot read",
            "a tokenizer.json saved by tokenizers",
        ) from None
    trim_heap()
    return tok


def _word_piece(path: Path):
    from tokenizers.implementations import BertWordPieceTokenizer

    lower = True
    if (path / TOKENIZER_CONFIG).is_file():
        settings = read_json(path, TOKENIZER_CONFIG)
        if not isinstance(settings, dict):
            raise CheckpointError(TOKENIZER_CONFIG, None, kind_of(settings), "a JSON object")
        lower = settings.get("do_lower_case", True)
        if not isinstance(lower, bool):
            raise CheckpointError(TOKENIZER_CONFIG, "do_lower_case", kind_of(lower), "true or false")
    try:
        return BertWordPieceTokenizer(str(path / VOCAB), lowercase=lower)
    except Exception:
        raise CheckpointError(
            VOCAB, None, "a file the tokenizers library cannot read", "one token a line"
        ) from None
