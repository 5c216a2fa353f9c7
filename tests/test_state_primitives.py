"""Value, list and map state on both backends, with TTL, and snapshot isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.state import create_backend
from sqlstream.runtime.state.primitives import ListState, MapState, ValueState


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_value_list_and_map_state(tmp_path: Path, backend: str) -> None:
    b = create_backend(backend, range(128), tmp_path / "local")
    value, items, mapping = ValueState(b.state("v")), ListState(b.state("l")), MapState(b.state("m"))
    value.update(3, ("k",), 41)
    items.add(3, ("k",), "a", "b")
    items.add(3, ("k",), "c")
    mapping.put(3, ("k",), "x", 1)
    mapping.put(3, ("k",), "y", 2)
    mapping.remove(3, ("k",), "x")
    assert value.value(3, ("k",)) == 41 and value.value(3, ("other",)) is None
    assert items.get(3, ("k",)) == ("a", "b", "c")
    assert dict(mapping.items(3, ("k",))) == {"y": 2} and mapping.contains(3, ("k",), "y")
    # a snapshot taken now is not changed by later updates
    writer = b.snapshot(1, canonical=True)
    items.add(3, ("k",), "d")
    mapping.put(3, ("k",), "z", 3)
    snap = tmp_path / "snap"
    snap.mkdir()
    handle = writer(snap)
    restored = create_backend("hashmap", range(128))
    restored.restore([handle])
    assert ListState(restored.state("l")).get(3, ("k",)) == ("a", "b", "c")
    assert dict(MapState(restored.state("m")).items(3, ("k",))) == {"y": 2}
    items.update(3, ("k",), [])
    assert items.get(3, ("k",)) == ()
    b.close()


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_value_state_ttl_expires_entries(tmp_path: Path, backend: str) -> None:
    clock = ManualClock()
    b = create_backend(backend, range(128), tmp_path / "local", clock)
    v = ValueState(b.state("v", ttl_ms=50))
    v.update(0, (1,), "fresh")
    clock.advance(49)
    assert v.value(0, (1,)) == "fresh"
    clock.advance(1)
    assert v.value(0, (1,)) is None
    b.close()
