"""Keyed state backends: 'hashmap' (heap) and 'rocksdb'."""

from __future__ import annotations

from pathlib import Path

from sqlstream.core.errors import SqlStreamError
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.state.base import StateBackend

BACKENDS = ("hashmap", "rocksdb")


def create_backend(name: str, key_groups: range, local_dir: Path | None = None,
                   clock: Clock = SYSTEM_CLOCK) -> StateBackend:
    """The backend named by `SET 'state.backend.type' = ...` for one operator subtask; state TTL
    counts processing time on ``clock``."""
    if name == "hashmap":
        from sqlstream.runtime.state.heap import HeapStateBackend

        return HeapStateBackend(key_groups, local_dir, clock)
    if name == "rocksdb":
        from sqlstream.runtime.state.rocksdb import RocksDBStateBackend

        return RocksDBStateBackend(key_groups, local_dir, clock)
    raise SqlStreamError(f"unknown state backend '{name}'; use one of {', '.join(BACKENDS)}")
