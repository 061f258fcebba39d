"""Runs saved on this server for the Pretrained page."""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path

from attnviz.errors import SpecError
from attnviz.training.run import TrainingRun

SHARED_DIR = Path(tempfile.gettempdir()) / "attnviz-training"
_SHARED_ID = re.compile(r"^[0-9a-f]{16}$")


def share(run: TrainingRun) -> str:
    """Save `run` as a checkpoint under `SHARED_DIR` and return its id (for a link to the Pretrained page)."""
    run_id = uuid.uuid4().hex[:16]
    run.save(SHARED_DIR / run_id)
    return run_id


def shared_checkpoint(run_id: str) -> Path:
    """The checkpoint directory `share` wrote for `run_id`.

    Raises:
        SpecError: not an id `share` gives (16 hex digits), or no such checkpoint on this server.
    """
    if not isinstance(run_id, str) or not _SHARED_ID.match(run_id) or not (SHARED_DIR / run_id).is_dir():
        raise SpecError("trained", run_id, "the id of a run saved on this server by the Training lab")
    return SHARED_DIR / run_id
