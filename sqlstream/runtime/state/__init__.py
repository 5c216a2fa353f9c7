"""Keyed state backends: 'hashmap' (heap) and 'rocksdb'."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sqlstream.core.errors import SqlStreamError
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.state.base import StateBackend

if TYPE_CHECKING:
    from sqlstream.runtime.state.rocksdb import RocksDBMemory, RocksDBTuning

BACKENDS = ("hashmap", "rocksdb")


def create_backend(name: str, key_groups: range, local_dir: Path | None = None,
                   clock: Clock = SYSTEM_CLOCK, memory: RocksDBMemory | None = None,
                   tuning: RocksDBTuning | None = None) -> StateBackend:
    """The backend named by `SET 'state.backend.type' = ...` for one operator subtask; state TTL
    counts processing time on ``clock``; a rocksdb backend takes its slot's ``memory`` and the job's
    ``tuning`` options."""
    if name == "hashmap":
        from sqlstream.runtime.state.heap import HeapStateBackend

        return HeapStateBackend(key_groups, local_dir, clock)
    if name == "rocksdb":
        from sqlstream.runtime.state.rocksdb import RocksDBStateBackend

        return RocksDBStateBackend(key_groups, local_dir, clock, memory, tuning)
    raise SqlStreamError(f"unknown state backend '{name}'; use one of {', '.join(BACKENDS)}")


class BackendFactory:
    """The keyed state backends of one job's subtasks (in one process).

    RocksDB memory is bounded per slot, as in Flink: subtask i of every
    operator shares slot i's memory, made once from the job's settings; the
    RocksDB tuning options are the job's, the same for every backend."""

    def __init__(self, name: str, settings: Mapping[str, str], slots: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.name = name
        self.settings = dict(settings)
        self.slots = slots
        self.clock = clock
        self.memory: dict[int, RocksDBMemory] = {}
        self.tuning: RocksDBTuning | None = None

    def create(self, key_groups: range, slot: int, local_dir: Path | None = None) -> StateBackend:
        """The backend of one subtask in ``slot``, its working files under ``local_dir`` (None: the
        system's temporary directory)."""
        memory = None
        if self.name == "rocksdb":
            from sqlstream.runtime.state.rocksdb import RocksDBMemory, RocksDBTuning

            memory = self.memory.get(slot)
            if memory is None:
                memory = self.memory[slot] = RocksDBMemory.from_settings(self.settings, self.slots)
            if self.tuning is None:
                self.tuning = RocksDBTuning.from_settings(self.settings)
        return create_backend(self.name, key_groups, local_dir, self.clock, memory, self.tuning)
