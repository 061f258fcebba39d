"""Reading a CTranslate2 `model.bin`: the layout CTranslate2 writes in `specs/model_spec.py`
(`ModelSpec._serialize`, format version 6), read here with `struct` and NumPy alone.

The file, little-endian:
    uint32 version, string spec name, uint32 revision,
    uint32 count, then per variable: string name, uint8 rank, rank × uint32 shape, uint8 dtype,
        uint32 byte count, the bytes;
    uint32 count, then per alias: string alias, string the variable it names.
A string is a uint16 length (with its terminating NUL), the UTF-8 bytes and the NUL.

Float weights are returned as float32 (float16 and bfloat16 upcast); scalars (a spec's flags such
as `decoder/num_heads`) as NumPy scalars. Every problem is a `CheckpointError` naming the file
and what was wrong.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from attnviz.pretrained.files import MAX_ABS_VALUE, CheckpointError

MODEL_BIN = "model.bin"
VERSIONS = (5, 6)  # the formats whose variable records are as above
MAX_BYTES = 2 << 30  # 2 GiB: Whisper large's float16 weights are 3 GiB; tiny's are 75 MB
# CTranslate2's DataType enum (include/ctranslate2/types.h): id → NumPy dtype.
DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: "bfloat16"}


class _Bytes:
    """A cursor over the file's bytes; running past the end is a `CheckpointError`."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise CheckpointError(MODEL_BIN, None, f"a file cut short at byte {len(self.data):,}", _ALLOWED)
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def number(self, fmt: str) -> int:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        raw = self.take(self.number("H"))
        if not raw.endswith(b"\0"):
            raise CheckpointError(MODEL_BIN, None, "a name without its terminating NUL", _ALLOWED)
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(MODEL_BIN, None, "a name that is not UTF-8", _ALLOWED) from None


_ALLOWED = "a CTranslate2 model.bin (format version 5 or 6), as CTranslate2's converters write it"


def _array(raw: bytes, dtype_id: int, shape: tuple[int, ...], name: str) -> np.ndarray:
    """One variable's bytes as an array: float16/bfloat16 → float32; integers kept."""
    if dtype_id not in DTYPES:
        raise CheckpointError(MODEL_BIN, name, f"dtype id {dtype_id}", f"one of {sorted(DTYPES)}")
    dtype = DTYPES[dtype_id]
    if dtype == "bfloat16":  # the upper half of a float32
        values = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.frombuffer(raw, dtype)
    if values.size != int(np.prod(shape)):
        raise CheckpointError(MODEL_BIN, name, f"{len(raw):,} bytes", f"the bytes of shape {shape}")
    values = values.reshape(shape)
    if values.dtype.kind != "f":
        return values
    values = values.astype(np.float32)
    if not np.isfinite(values).all() or (values.size and np.abs(values).max() > MAX_ABS_VALUE):
        raise CheckpointError(MODEL_BIN, name, "a tensor with NaN, inf or huge values", "finite weights")
    return values


def read_model_bin(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """`path/model.bin` → (the spec's name, e.g. "WhisperSpec"; name → array, aliases included).

    Raises:
        CheckpointError: a missing, oversized, truncated or malformed file.
    """
    file = path / MODEL_BIN
    if not file.is_file():
        raise CheckpointError(MODEL_BIN, None, "no such file in the checkpoint directory", _ALLOWED)
    if file.stat().st_size > MAX_BYTES:
        raise CheckpointError(MODEL_BIN, None, f"a {file.stat().st_size:,}-byte file", "at most 2 GiB")
    data = _Bytes(file.read_bytes())
    version = data.number("I")
    if version not in VERSIONS:
        raise CheckpointError(MODEL_BIN, "version", f"format version {version}", _ALLOWED)
    spec = data.string()
    data.number("I")  # the spec's revision: the variables below say what the model holds
    variables = {}
    for _ in range(data.number("I")):
        name = data.string()
        shape = tuple(data.number("I") for _ in range(data.number("B")))
        dtype_id, size = data.number("B"), data.number("I")
        variables[name] = _array(data.take(size), dtype_id, shape, name)
    for _ in range(data.number("I")):
        alias, target = data.string(), data.string()
        if target not in variables:
            raise CheckpointError(MODEL_BIN, alias, f"an alias of the unknown {target!r}", "a known variable")
        variables[alias] = variables[target]
    return spec, variables
