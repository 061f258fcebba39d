"""A GGUF file (llama.cpp's format) turned, once, into a transformers-style checkpoint folder.

GGUF v3 as ggml's `docs/gguf.md` defines it, read and dequantised by the `gguf` package
(maintained with llama.cpp): `GGUFReader` memory-maps the file, `gguf.quants.dequantize`
expands Q4_1 / Q8_0 / Q4_K / … blocks to float32. Two architectures (`ARCHITECTURES`), each put
back the way transformers stores it:

- "llama" (SmolLM2): tensor names (`blk.3.attn_q.weight` → `layers.3.self_attn.q_proj.weight`),
  each `(out, in)`; the rows of `attn_q` / `attn_k`, which llama.cpp's converter permutes per head
  for its own rotary layout (pairs (2i, 2i+1) instead of transformers' (i, i + d/2)) — undone
  here, or the rotary step would rotate the wrong pairs; the byte-level BPE tokenizer;
- "gemma3" (Gemma 3 270M): tensor names, and the norms, which llama.cpp stores as `1 + w`, back
  to transformers' `w` (as transformers' own GGUF loading does); local and global layers and the
  attention scale from llama.cpp's rules; the SentencePiece tokenizer (`gemma_tokenizer`);

and for both the chat template (if any) and special tokens, as `tokenizer.json` and
`tokenizer_config.json`.

`converted(path)` writes that folder under the user's cache directory (`ATTNVIZ_CACHE_DIR`, else
`$XDG_CACHE_HOME/attnviz`, else `~/.cache/attnviz`): into a temporary folder first, renamed into
place when complete (a crash leaves no half folder), under a lock file so that several sessions —
threads or processes — asking at once convert it once. A manifest records the source's size and
modification time and each file's size; a folder that does not match it is converted again.
`converted(path, weights=False)` writes only the card's files (configuration and tokenizer, read from
the file's metadata: nothing is dequantised) into the same folder, which the full conversion completes
later: a server reading a page's card never expands the weights (issue 41 point 2: it once held
Gemma 3's 1 GB for that), the worker that computes does, once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.pretrained.families.gemma import GLOBAL, LOCAL, PATTERN
from attnviz.pretrained.files import CheckpointError
from attnviz.pretrained.gemma_tokenizer import gemma_tokenizer

try:  # POSIX: one conversion across processes; elsewhere, across the threads of one process
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None

GGUF_SUFFIX = ".gguf"
FORMAT = 2  # bump when the conversion's output changes: folders of another format are rebuilt
ENV_CACHE_DIR = "ATTNVIZ_CACHE_DIR"
MANIFEST = "attnviz-gguf.json"
CARD_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
FILES = (*CARD_FILES, "model.safetensors")
TOKENIZER_MODELS = ("gpt2",)  # byte-level BPE; "llama" (SentencePiece) is not read
TOKEN_CONTROL = 3  # llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
TOKEN_SPECIAL = (3, 4)

# GGUF tensor name (after "blk.N.") → transformers' name (after "layers.N.")
LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_TENSORS = {"token_embd": "embed_tokens", "output_norm": "norm", "output": "lm_head"}
GEMMA_TENSORS = {
    **LAYER_TENSORS,
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def cache_root() -> Path:
    """Where converted checkpoints live (`ATTNVIZ_CACHE_DIR`, else the user's cache directory)."""
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "attnviz"


def converted(path: str | os.PathLike, *, weights: bool = True, monitor: Monitor | None = None) -> Path:
    """The checkpoint folder converted from the GGUF file `path`; converts it on first use.

    Args:
        weights: False: the card's files are enough (configuration and tokenizer, no weights read);
            a folder holding them, or the whole conversion, is returned as it is.
        monitor: told `(done, total)` after each tensor while converting.

    Returns:
        a folder with `config.json`, `model.safetensors` (float32), `tokenizer.json` and
        `tokenizer_config.json` (its `chat_template`), readable by `attnviz.pretrained.load`.

    Raises:
        CheckpointError: the file is not a GGUF file attnviz can read (the field says why).
        SpecError: (field `ATTNVIZ_CACHE_DIR`) the cache folder cannot be written.
    """
    source, target, expected = _target(path)
    names = FILES if weights else CARD_FILES
    if _valid(target, expected, names):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(target):
            if not _valid(target, expected, names):  # another session may have converted it meanwhile
                _convert(source, target, expected, watch(monitor), names)
    except OSError as error:  # no room, no permission: say which setting moves it (never the path)
        raise SpecError(
            ENV_CACHE_DIR,
            None,
            "a writable folder with ~600 MB free (the converted checkpoint is cached there)",
            value_text=f"a cache folder attnviz cannot write ({type(error).__name__})",
        ) from None
    return target


def source_of(folder: Path) -> Path | None:
    """The GGUF file a converted `folder` came from (its manifest says), None for any other folder or
    a file no longer there: a worker handed a card's folder loads the weights from the file."""
    try:
        source = Path(json.loads((folder / MANIFEST).read_text("utf-8"))["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return source if source.suffix == GGUF_SUFFIX and source.is_file() else None


def is_converted(path: str | os.PathLike, *, weights: bool = True) -> bool:
    """Whether `converted(path, weights=weights)` would return at once (nothing to convert)."""
    _, target, expected = _target(path)
    return _valid(target, expected, FILES if weights else CARD_FILES)


def _target(path: str | os.PathLike) -> tuple[Path, Path, dict]:
    """The GGUF file, its folder in the cache and the manifest that folder must hold."""
    source = Path(path).resolve()
    stat = source.stat()
    key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}|{FORMAT}".encode()).hexdigest()
    target = cache_root() / "gguf" / f"{source.stem}-{key[:16]}"
    expected = {"format": FORMAT, "source": str(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return source, target, expected


def _convert(source: Path, target: Path, expected: dict, monitor: Monitor, names: tuple[str, ...]) -> None:
    """Write the folder (`names`: the card's files, or all) beside `target`, and rename it into place
    when complete."""
    work = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        _write(source, work, monitor, weights="model.safetensors" in names)
        sizes = {name: (work / name).stat().st_size for name in names}
        _write_synced(work / MANIFEST, json.dumps({**expected, "files": sizes}).encode())
        if target.exists():  # a stale or damaged conversion
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _valid(folder: Path, expected: dict, names: tuple[str, ...] = FILES) -> bool:
    """The folder is a finished conversion of this very file holding `names` (its manifest and the
    files' sizes agree; a card's folder lists no weights, so it is not a whole conversion)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text("utf-8"))
        sizes = manifest.pop("files")
        return manifest == expected and all((folder / n).stat().st_size == sizes[n] for n in names)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


@contextlib.contextmanager
def _exclusive(target: Path) -> Iterator[None]:
    """Held by one thread of one process at a time for `target` (a lock file beside it)."""
    with _locks_guard:
        lock = _locks.setdefault(target, threading.Lock())
    with lock, open(target.with_name(target.name + ".lock"), "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes
        yield


def _write_synced(file: Path, data: bytes) -> None:
    with open(file, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _write(source: Path, folder: Path, monitor: Monitor, *, weights: bool = True) -> None:
    reader = _reader(source)
    meta = _metadata(reader)
    arch = _architecture(meta)
    config = arch.config(meta, {t.name for t in reader.tensors})
    if weights:
        from safetensors.numpy import save_file

        tensors = dict(_tensors(reader, config, arch, monitor))
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        del tensors
        with open(folder / "model.safetensors", "rb+") as handle:
            os.fsync(handle.fileno())
    _write_synced(folder / "config.json", json.dumps(config, indent=2).encode())
    _write_synced(folder / "tokenizer.json", arch.tokenizer(meta).to_str().encode())
    settings = {"chat_template": meta.get("tokenizer.chat_template"), **_special_tokens(meta)}
    _write_synced(folder / "tokenizer_config.json", json.dumps(settings, indent=2).encode())


def _reader(source: Path):
    import gguf

    try:
        return gguf.GGUFReader(str(source))
    except Exception as error:  # a truncated or foreign file: ValueError, struct errors, IndexError…
        raise CheckpointError(
            source.name,
            None,
            f"a file the gguf package cannot read ({type(error).__name__})",
            "a GGUF v2/v3 file",
        ) from None


def _metadata(reader) -> dict[str, Any]:
    """The key/value metadata as Python values (strings, numbers, lists)."""
    meta = {}
    for name, field in reader.fields.items():
        try:
            meta[name] = field.contents()
        except Exception:  # a value type the gguf package cannot decode: not one attnviz reads
            continue
    return meta


def _number(meta: dict, name: str, kind: type, default: Any = None) -> Any:
    value = meta.get(name, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if not ok or (kind is int and int(value) != value):
        received = (
            "nothing (the key is missing)" if value is None else f"a value of type {type(value).__name__}"
        )
        raise CheckpointError("GGUF metadata", name, received, f"a positive {kind.__name__}")
    return kind(value)


def _architecture(meta: dict) -> Architecture:
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise CheckpointError(
            "GGUF metadata",
            "general.architecture",
            f"a {type(arch).__name__}" if not isinstance(arch, str) else "another architecture",
            " | ".join(map(repr, ARCHITECTURES)),
        )
    return ARCHITECTURES[arch]


def llama_config(meta: dict, tensor_names: set[str]) -> dict[str, Any]:
    """The GGUF metadata as a transformers `config.json` for `model_type` "llama"."""
    p = "llama."
    heads = _number(meta, p + "attention.head_count", int)
    width = _number(meta, p + "embedding_length", int)
    head_dim = _number(meta, p + "attention.key_length", int, width // heads)
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": width,
        "intermediate_size": _number(meta, p + "feed_forward_length", int),
        "num_hidden_layers": _number(meta, p + "block_count", int),
        "num_attention_heads": heads,
        "num_key_value_heads": _number(meta, p + "attention.head_count_kv", int, heads),
        "head_dim": head_dim,
        "max_position_embeddings": _number(meta, p + "context_length", int),
        "rms_norm_eps": _number(meta, p + "attention.layer_norm_rms_epsilon", float),
        "rope_theta": _number(meta, p + "rope.freq_base", float, 10000.0),
        "vocab_size": len(meta.get("tokenizer.ggml.tokens") or []) or _number(meta, p + "vocab_size", int),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "torch_dtype": "float32",
    }


def gemma_config(meta: dict, tensor_names: set[str]) -> dict[str, Any]:
    """The GGUF metadata as a transformers `config.json` for `model_type` "gemma3_text": every
    sixth layer global, RoPE base 10,000 on local layers, scores scaled by `key_length^-½`
    (llama.cpp's rules for Gemma 3 below 27B; the file does not store them)."""
    p = "gemma3."
    heads, layers = _number(meta, p + "attention.head_count", int), _number(meta, p + "block_count", int)
    head_dim = _number(meta, p + "attention.key_length", int)
    tokens = meta.get("tokenizer.ggml.tokens") or []
    return {
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": _number(meta, p + "embedding_length", int),
        "intermediate_size": _number(meta, p + "feed_forward_length", int),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": _number(meta, p + "attention.head_count_kv", int, heads),
        "head_dim": head_dim,
        "query_pre_attn_scalar": head_dim,
        "max_position_embeddings": _number(meta, p + "context_length", int),
        "rms_norm_eps": _number(meta, p + "attention.layer_norm_rms_epsilon", float),
        "sliding_window": _number(meta, p + "attention.sliding_window", int),
        "layer_types": [GLOBAL if (i + 1) % PATTERN == 0 else LOCAL for i in range(layers)],
        "rope_parameters": {
            LOCAL: {"rope_type": "default", "rope_theta": 10000.0},
            GLOBAL: {"rope_type": "default", "rope_theta": _number(meta, p + "rope.freq_base", float, 1e6)},
        },
        "vocab_size": len(tokens) or _number(meta, p + "vocab_size", int),
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "torch_dtype": "float32",
    }


def _tensors(reader, config: dict, arch: Architecture, monitor: Monitor) -> Iterator[tuple[str, np.ndarray]]:
    """(transformers name, float32 `(out, in)` array) for every tensor, as transformers keeps it."""
    from gguf.quants import dequantize

    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    total = len(reader.tensors)
    for done, tensor in enumerate(reader.tensors, 1):
        name = _hf_name(tensor.name, arch.layer_tensors)
        try:
            w = np.asarray(dequantize(tensor.data, tensor.tensor_type), np.float32)
        except Exception as error:  # a quantisation type the gguf package lacks
            raise CheckpointError(
                "GGUF tensors",
                tensor.name,
                f"a {tensor.tensor_type.name} tensor ({type(error).__name__})",
                "a tensor type the gguf package dequantises",
            ) from None
        kind = tensor.name.split(".")[-2]
        if arch.permuted and kind in heads:
            w = unpermute(w, heads[kind])
        if arch.norm_offset and kind.endswith("norm"):
            w = w - np.float32(arch.norm_offset)  # stored as 1 + w
        yield name, np.ascontiguousarray(w)
        monitor.report(done, total)


def _hf_name(name: str, layer_tensors: dict[str, str]) -> str:
    parts = name.split(".")  # "blk.3.attn_q.weight" | "token_embd.weight"
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in layer_tensors:
        return f"model.layers.{parts[1]}.{layer_tensors[parts[2]]}.{parts[3]}"
    if len(parts) == 2 and parts[0] in TOP_TENSORS:
        return ("" if parts[0] == "output" else "model.") + f"{TOP_TENSORS[parts[0]]}.{parts[1]}"
    raise CheckpointError("GGUF tensors", name, "a tensor this architecture does not have", "its tensors")


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row order of `attn_q` / `attn_k` (`w (out, in)`).

    llama.cpp interleaves each head's rotary pairs — row 2i, 2i+1 of a head hold what
    transformers keeps in rows i and i + d/2. `(H, d/2, 2, in) → (H, 2, d/2, in)` puts them back.
    """
    out, width = w.shape
    return w.reshape(heads, out // heads // 2, 2, width).transpose(0, 2, 1, 3).reshape(out, width)


def tokenizer(meta: dict):
    """The byte-level BPE tokenizer in the metadata, as a `tokenizers.Tokenizer`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind = meta.get("tokenizer.ggml.model")
    if kind not in TOKENIZER_MODELS:
        raise CheckpointError(
            "GGUF metadata",
            "tokenizer.ggml.model",
            "another tokenizer kind",
            " | ".join(map(repr, TOKENIZER_MODELS)),
        )
    tokens = list(meta.get("tokenizer.ggml.tokens") or [])
    types = list(meta.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges") or []]
    if not tokens or len(types) != len(tokens) or any(len(m) != 2 for m in merges):
        raise CheckpointError(
            "GGUF metadata",
            "tokenizer.ggml.tokens",
            "an incomplete vocabulary",
            "tokens, their types and merges",
        )
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre == "smollm":  # llama.cpp's SmolLM rule (as its Hub tokenizer.json): each digit alone
        byte_level = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre not in ("default", "gpt2"):
        raise CheckpointError(
            "GGUF metadata", "tokenizer.ggml.pre", repr(pre), "'default' | 'gpt2' | 'smollm'"
        )
    tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, k in zip(tokens, types, strict=True)
            if k in TOKEN_SPECIAL
        ]
    )
    return tok


def _special_tokens(meta: dict) -> dict[str, str]:
    tokens = meta.get("tokenizer.ggml.tokens") or []
    named = {}
    for role in ("bos", "eos", "unknown", "padding"):
        index = meta.get(f"tokenizer.ggml.{role}_token_id")
        if isinstance(index, int) and 0 <= index < len(tokens):
            named[{"unknown": "unk", "padding": "pad"}.get(role, role) + "_token"] = tokens[index]
    return named


@dataclass(frozen=True)
class Architecture:
    """How one GGUF `general.architecture` becomes a transformers folder.

    Attributes:
        config: (metadata, tensor names) → config.json.
        layer_tensors: llama.cpp's name after "blk.N." → transformers' after "layers.N.".
        tokenizer: metadata → a `tokenizers.Tokenizer`.
        permuted: llama.cpp permuted q/k rows per head (`unpermute`).
        norm_offset: subtracted from every norm weight (Gemma: llama.cpp stores `1 + w`).
    """

    config: Callable[[dict, set[str]], dict[str, Any]]
    layer_tensors: dict[str, str]
    tokenizer: Callable[[dict], Any]
    permuted: bool = False
    norm_offset: float = 0.0


ARCHITECTURES = {
    "llama": Architecture(llama_config, LAYER_TENSORS, tokenizer, permuted=True),
    "gemma3": Architecture(gemma_config, GEMMA_TENSORS, gemma_tokenizer, norm_offset=1.0),
}
