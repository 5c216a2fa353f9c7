"""The 'hashmap' backend: state in Python dictionaries, snapshots in the canonical Arrow format."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.state.base import (
    CANONICAL_FILE,
    KeyedState,
    SnapshotFormatError,
    SnapshotWriter,
    StateBackend,
    write_canonical,
)


class HeapState(KeyedState):
    """Entries in a dict; with a TTL, an OrderedDict in write order (oldest first), so that the
    expired entries are found at its front in O(1) each, as Flink's incremental cleanup finds them
    (it checks a few entries per state access; this drops every expired one at each write)."""

    def __init__(self, name: str, ttl_ms: int | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.data: dict[tuple[int, tuple], Any] = {}
        super().__init__(name, ttl_ms, clock)

    @property
    def ttl_ms(self) -> int | None:
        return self._ttl_ms

    @ttl_ms.setter
    def ttl_ms(self, ttl_ms: int | None) -> None:
        # a state restored before its operator declared its TTL gets it now: its entries are in
        # restore order, which the front-first cleanup tolerates (an entry written again moves back)
        self._ttl_ms = ttl_ms
        if ttl_ms is not None and not isinstance(self.data, OrderedDict):
            self.data = OrderedDict(self.data)

    def _get(self, kg: int, key: tuple) -> Any | None:
        return self.data.get((kg, key))

    def _put(self, kg: int, key: tuple, value: Any) -> None:
        self.data[(kg, key)] = value
        if self._ttl_ms is not None:
            self.data.move_to_end((kg, key))  # type: ignore[attr-defined]

    def _expire(self, cutoff: int) -> None:
        data = self.data
        while data:
            entry = next(iter(data))
            if data[entry][1] > cutoff:
                return
            del data[entry]

    def delete(self, kg: int, key: tuple) -> None:
        self.data.pop((kg, key), None)

    def _items(self) -> Iterator[tuple[int, tuple, Any]]:
        for (kg, key), value in self.data.items():
            yield kg, key, value

    def __len__(self) -> int:
        return len(self.data)


class HeapStateBackend(StateBackend):
    name = "hashmap"

    def _create(self, name: str, ttl_ms: int | None) -> KeyedState:
        return HeapState(name, ttl_ms, self.clock)

    def snapshot(self, checkpoint_id: int, canonical: bool = False) -> SnapshotWriter:
        # values are immutable once put, so copying the dicts freezes the state
        frozen = {name: dict(st.data) for name, st in self.states.items()}  # type: ignore[attr-defined]
        return lambda directory: write_canonical(directory / CANONICAL_FILE, frozen)

    def restore(self, handles: list[Any]) -> None:
        for handle in handles:
            if handle.get("format") != "canonical":
                raise SnapshotFormatError(
                    f"the hashmap state backend cannot restore a '{handle.get('format')}' snapshot; "
                    "take a savepoint (canonical format) to switch state backends"
                )
            self._restore_canonical(handle)
