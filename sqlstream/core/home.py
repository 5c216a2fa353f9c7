"""SQLSTREAM_HOME: one folder for what outlives a process (persistent catalogs, the shell's history,
the job manager's jobs), read by every layer that keeps files there."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("SQLSTREAM_HOME", Path.home() / ".sqlstream"))
