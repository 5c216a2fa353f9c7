"""SQLSTREAM_HOME: one folder for what outlives a process (persistent catalogs, the shell's history,
the job manager's jobs), read by every layer that keeps files there.

What is kept there can hold secrets (job SQL with connector passwords, the job
manager's access token, logs), so the job manager's files are created private
to the user: :func:`private_dir` (0700) and :func:`write_private` /
:func:`open_private` (0600), whatever the umask.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any


def home() -> Path:
    return Path(os.environ.get("SQLSTREAM_HOME", Path.home() / ".sqlstream"))


def private_dir(path: Path) -> Path:
    """``path`` created if needed (with its parents) and made accessible to its owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def open_private(path: Path, mode: str = "wb") -> IO[Any]:
    """Opens ``path`` for writing (``'w'``, ``'a'``, or ``'x'``: only if new; ``b`` for bytes) as a file only its
    owner can read."""
    how = {"w": os.O_TRUNC, "a": os.O_APPEND, "x": os.O_EXCL}[mode[0]]
    flags = os.O_WRONLY | os.O_CREAT | how
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # an older file keeps its mode on open
    return os.fdopen(fd, mode)


def write_private(path: Path, text: str) -> None:
    with open_private(path, "w") as f:
        f.write(text)
