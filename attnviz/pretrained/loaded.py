"""Loaded checkpoints kept in memory: one `attnviz.cache.ByteCache`, least recently used evicted
beyond `ATTNVIZ_CHECKPOINT_CACHE_MB` of weights (the newest always kept), keyed by the canonical
source; a checkpoint whose files changed on disk is read again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnviz.cache import MIB, ByteCache, env_number
from attnviz.pretrained.files import FILES

ENV_CACHE_MB = "ATTNVIZ_CHECKPOINT_CACHE_MB"  # weights kept in memory by `load`, all checkpoints together
CACHE_MB = 2048


def _budget() -> int:
    """0 is allowed: then only the checkpoint used last is kept."""
    return int(env_number(ENV_CACHE_MB, CACHE_MB, minimum=0) * MIB)


class CheckpointCache:
    """Checkpoints by key, each with the stamp of its files; one load per key at a time."""

    def __init__(self):
        self._cache = ByteCache(_budget, size=lambda entry: entry[1].nbytes, keep_one=True)

    def get(self, key: str, stamp: Any, build: Callable[[], Any]) -> Any:
        hit, entry = self._cache.get(key)
        if hit and entry[0] != stamp:  # the files changed: read them again
            self._cache.pop(key)
        return self._cache.get_or_build(key, lambda: (stamp, build()))[1]

    def clear(self) -> None:
        self._cache.clear()

    def keys(self) -> list[str]:
        return list(self._cache.keys())

    def kept(self) -> list[Any]:
        """The checkpoints (or cards) kept now."""
        found = (self._cache.get(key) for key in self.keys())
        return [entry[1] for hit, entry in found if hit]


CACHE = CheckpointCache()
CARDS = CheckpointCache()  # checkpoint cards (no weights: 0 bytes each): what a server reads


def stamp(path: Path) -> tuple:
    """Changes when a checkpoint's files change (so an edited checkpoint is read again)."""
    found = []
    for name in FILES:
        try:
            st = (path / name).stat()
            found.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            found.append((name, None, None))
    return tuple(found)
