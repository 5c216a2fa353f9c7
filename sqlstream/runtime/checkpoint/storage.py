"""Where checkpoints and savepoints live on disk.

Layout of a checkpoint root::

    chk-<n>/<operator uid>-<subtask>/...   state files of one subtask, written asynchronously
    chk-<n>/_metadata                      written last, atomically: only then is chk-<n> complete
    shared/                                files shared by incremental checkpoints (rocksdb SSTs)

A directory without ``_metadata`` is an incomplete checkpoint and is never
restored from.  A savepoint has the same layout in a directory of its own.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

from sqlstream.core.errors import SqlStreamError

METADATA = "_metadata"
_CHK = re.compile(r"^chk-(\d+)$")


class CheckpointError(SqlStreamError):
    """A checkpoint or savepoint is missing, incomplete or does not fit the job."""


class CheckpointStorage:
    def __init__(self, root: Path, retained: int = 1) -> None:
        self.root = Path(root)
        self.retained = max(1, retained)
        self.root.mkdir(parents=True, exist_ok=True)

    def checkpoint_dir(self, checkpoint_id: int) -> Path:
        return self.root / f"chk-{checkpoint_id}"

    def subtask_dir(self, checkpoint_id: int, uid: str, subtask: int) -> Path:
        d = self.checkpoint_dir(checkpoint_id) / f"{uid}-{subtask}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def complete(self, checkpoint_id: int, metadata: dict[str, Any]) -> Path:
        """Publish checkpoint ``checkpoint_id`` (atomic rename of its metadata), then prune old ones."""
        directory = self.checkpoint_dir(checkpoint_id)
        directory.mkdir(parents=True, exist_ok=True)
        write_metadata(directory, metadata)
        self._prune()
        return directory

    def _prune(self) -> None:
        completed = sorted(completed_ids(self.root))
        for old in completed[: -self.retained]:
            shutil.rmtree(self.checkpoint_dir(old), ignore_errors=True)
        newest = completed[-1] if completed else None
        # incomplete checkpoints older than the newest complete one will never complete
        for d in self.root.iterdir():
            m = _CHK.match(d.name)
            if m and newest is not None and int(m.group(1)) < newest and not (d / METADATA).exists():
                shutil.rmtree(d, ignore_errors=True)


def write_metadata(directory: Path, metadata: dict[str, Any]) -> None:
    tmp = directory / f".{METADATA}.tmp"
    with tmp.open("wb") as f:
        pickle.dump(metadata, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / METADATA)


def completed_ids(root: Path) -> list[int]:
    if not root.is_dir():
        return []
    out = []
    for d in root.iterdir():
        m = _CHK.match(d.name)
        if m and (d / METADATA).exists():
            out.append(int(m.group(1)))
    return out


def load(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The metadata of a checkpoint/savepoint directory, or of the newest complete one under a root."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"checkpoint or savepoint '{path}' does not exist")
    if (p / METADATA).exists():
        chosen = p
    else:
        ids = completed_ids(p)
        if not ids:
            raise CheckpointError(f"'{path}' holds no completed checkpoint (no {METADATA} file)")
        chosen = p / f"chk-{max(ids)}"
    with (chosen / METADATA).open("rb") as f:
        return chosen, pickle.load(f)
