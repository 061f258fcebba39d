"""Runs saved on this server for the Pretrained page, each visible to the session that trained it.

`share(run, owner)` writes a run once (a second call returns the same name) under
`SHARED_DIR/<owner>/`, where `owner` is a hash of the visitor's session id, and
names it by task, framework and time ("reverse · PyTorch · 14:05:32"). The server
keeps at most `TrainLimits.saved` runs and `TrainLimits.saved_mb` of them on disk,
all sessions together: the oldest are deleted first. `session_checkpoints(session_id)`
lists one session's runs for the Pretrained page.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from attnviz import formats
from attnviz.cache import MIB
from attnviz.errors import BudgetError, SpecError
from attnviz.frameworks import label
from attnviz.training.history import TrainingRun
from attnviz.training.limits import TrainLimits

SHARED_DIR = Path(tempfile.gettempdir()) / "attnviz-training"  # unless the operator names one:
ENV_DIR = "ATTNVIZ_TRAIN_DIR"  # where this server keeps saved runs (one folder per server, e.g. in tests)
INDEX = "saved.json"  # beside config.json and model.safetensors: the run's name and when it was saved
_LOCK = threading.Lock()


def shared_dir() -> Path:
    """The folder of saved runs: `ATTNVIZ_TRAIN_DIR` when set, else `<temp dir>/attnviz-training`."""
    named = os.environ.get(ENV_DIR, "").strip()
    return Path(named).expanduser() if named else SHARED_DIR


def owner_of(session_id: str) -> str:
    """The folder name of a session's saved runs (a hash: the session id itself is not written to disk)."""
    if not isinstance(session_id, str) or not session_id:
        raise SpecError("session_id", session_id, "the visitor's session id (a non-empty string)")
    return hashlib.sha256(session_id.encode()).hexdigest()[:24]


def _saved() -> list[tuple[float, Path]]:
    """Every saved run on the server, oldest first: `(saved at, folder)`."""
    out = []
    for index in shared_dir().glob(f"*/*/{INDEX}"):
        try:
            out.append((float(json.loads(index.read_text())["saved_at"]), index.parent))
        except (OSError, ValueError, KeyError, TypeError):
            out.append((0.0, index.parent))  # unreadable: oldest, evicted first
    return sorted(out, key=lambda item: item[0])


def _bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def _evict(limits: TrainLimits, incoming: int) -> None:
    """Delete the oldest saved runs until one more of `incoming` bytes fits the count and the disk budget."""
    saved = _saved()
    total = sum(_bytes(folder) for _, folder in saved)
    while saved and (len(saved) + 1 > limits.saved or total + incoming > limits.saved_mb * MIB):
        _, folder = saved.pop(0)
        total -= _bytes(folder)
        shutil.rmtree(folder, ignore_errors=True)


def share(run: TrainingRun, owner: str, limits: TrainLimits | None = None) -> str:
    """Save `run` for the Pretrained page, visible to `owner` (`owner_of(session_id)`); its name.

    One save per run: a second call returns the first name while that copy exists.

    Raises:
        SpecError: the run has not finished. BudgetError: the run alone is over the disk budget.
    """
    if not run.finished:
        raise SpecError("run", "unfinished", "a finished or stopped run")
    limits = limits or TrainLimits.from_env()
    folder_of = shared_dir() / owner
    with _LOCK:
        if run.saved_as and (folder_of / _slug(run.saved_as) / INDEX).exists():
            return run.saved_as
        size = sum(v.nbytes for v in run.params.values())
        if size > limits.saved_mb * MIB:
            raise BudgetError(
                f"The run's weights ({formats.size(size)}) are over this server's budget for saved runs "
                f"({limits.saved_mb:g} MiB, ATTNVIZ_TRAIN_SAVED_MB). Download the checkpoint instead.",
                size,
                int(limits.saved_mb * MIB),
            )
        _evict(limits, size)
        now = time.time()
        name = (
            f"{run.config.task} · {label(run.framework)} · {time.strftime('%H:%M:%S', time.localtime(now))}"
        )
        taken = {p.name for p in folder_of.glob("*")} if folder_of.exists() else set()
        base, n = name, 2
        while _slug(name) in taken:
            name, n = f"{base} ({n})", n + 1
        folder = run.save(folder_of / _slug(name))
        (folder / INDEX).write_text(json.dumps({"name": name, "saved_at": now}) + "\n")
        run.saved_as = name
        return name


def _slug(name: str) -> str:
    """A saved run's folder name: its name in letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def session_checkpoints(session_id: str) -> dict[str, Path]:
    """The runs one session saved, newest first: name → checkpoint folder (`pretrained.load` opens it).

    The Pretrained page offers these to that session only.
    """
    folder_of = shared_dir() / owner_of(session_id)
    found = []
    for index in folder_of.glob(f"*/{INDEX}"):
        try:
            data = json.loads(index.read_text())
            found.append((float(data["saved_at"]), str(data["name"]), index.parent))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return {name: folder for _, name, folder in sorted(found, key=lambda item: -item[0])}


def session_checkpoint(session_id: str, name: str) -> Path:
    """One of `session_checkpoints(session_id)` by name.

    Raises:
        SpecError: not a run this session saved (or it has been deleted to make room).
    """
    mine = session_checkpoints(session_id)
    if name not in mine:
        raise SpecError(
            "trained",
            name,
            " | ".join(map(repr, mine)) or "a run this session saved with the Training lab (none yet)",
        )
    return mine[name]
