"""The state codec: every value operators keep round-trips to the same types, and nothing it reads runs.

Checkpoints are files users copy and hand back; the codec (msgpack with
extension types) replaces pickle on every state path, so decoding foreign
bytes must fail instead of executing them.
"""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.state import create_backend
from sqlstream.runtime.state.codec import StateCodecError, decode, encode

VALUES = [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**80, -(2**90), 1.5, float("inf"), "text", "", b"\x00bytes",
    (1, "a", (2.5, None)), [1, [2, 3]], (), [],
    {"a": 1, (1, 2): [3], 5: {"x"}},
    {1, 2}, frozenset({"x", "y"}),
    Decimal("12345.6789"), Decimal("-0.001"),
    dt.datetime(2024, 5, 1, 12, 30, 15, 123456), dt.datetime(2024, 5, 1, 12, 30, tzinfo=ZoneInfo("Europe/Berlin")),
    dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC), dt.date(2024, 2, 29), dt.time(23, 59, 59, 999),
    dt.timedelta(days=-3, seconds=5, microseconds=7),
    np.int64(7), np.float32(0.25), np.float64(0.5), np.arange(12, dtype=np.int32).reshape(3, 4), np.array([1.5, np.nan]),
]


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)  # type: ignore[union-attr]
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dt.datetime):
        return a == b and a.utcoffset() == b.utcoffset() and str(a.tzinfo) == str(b.tzinfo)  # type: ignore[union-attr]
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_every_state_value_round_trips_with_its_type(value: object) -> None:
    assert _same(decode(encode(value)), value)


def test_tuples_stay_hashable_and_lists_stay_mutable() -> None:
    row, acc = decode(encode(((1, ("k", 2)), [[0], {"seen"}])))
    assert hash(row) == hash((1, ("k", 2)))
    acc[0].append(1)  # accumulators are changed in place
    acc[1].add("more")
    assert acc == [[0, 1], {"seen", "more"}]


def test_a_row_kind_is_stored_as_its_number() -> None:
    assert decode(encode((RowKind.UPDATE_AFTER, [RowKind.DELETE]))) == (int(RowKind.UPDATE_AFTER), [int(RowKind.DELETE)])


def test_arrow_batches_and_tables_round_trip() -> None:
    batch = pa.record_batch({"a": [1, None, 3], "s": ["x", "y", None]})
    table = pa.table({"t": pa.array([1, 2], pa.timestamp("ms", "UTC"))})
    got_batch, got_table = decode(encode((batch, table)))
    assert isinstance(got_batch, pa.RecordBatch) and got_batch.equals(batch)
    assert isinstance(got_table, pa.Table) and got_table.equals(table)


def test_equal_keys_built_differently_encode_to_the_same_bytes() -> None:
    s = "shared"
    same_object = (s, s, Decimal("1.10"))
    copies = ("".join(["sha", "red"]), "shared", Decimal("1.10"))
    assert encode(same_object) == encode(copies)


def test_a_value_of_an_unknown_type_is_refused_by_name() -> None:
    class Accumulator:
        pass

    with pytest.raises(StateCodecError, match="Accumulator"):
        encode({"acc": [Accumulator()]})
    with pytest.raises(StateCodecError, match="numpy array of Python objects"):
        encode(np.array([object()]))


class _Payload:
    """Unpickling this creates a file: the stand-in for any code a pickle may run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def test_a_pickle_payload_is_not_state_and_does_not_run(tmp_path: Path) -> None:
    proof = tmp_path / "pickle-ran"
    pickle.loads(pickle.dumps(_Payload(proof)))  # noqa: S301 - shows the payload really runs under pickle
    assert proof.exists()
    marker = tmp_path / "codec-ran"
    with pytest.raises(StateCodecError, match="not encoded state"):
        decode(pickle.dumps(_Payload(marker)))
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["hashmap", "rocksdb"])
def test_state_backends_keep_codec_values_and_their_snapshots_hold_no_pickle(kind: str, tmp_path: Path) -> None:
    backend = create_backend(kind, range(128), tmp_path / "local")
    try:
        st = backend.state("s")
        values = {(i % 128, (f"k{i}", dt.date(2024, 1, 1 + i % 28))): [Decimal(i), (i, None)] for i in range(300)}
        for (kg, key), value in values.items():
            st.put(kg, key, value)
        assert {(kg, key): value for kg, key, value in st.items()} == values
        directory = tmp_path / "chk" / "op"
        directory.mkdir(parents=True)
        handle = backend.snapshot(1, canonical=True)(directory)
        written = b"".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())
        assert b"\x80\x04\x95" not in written and b"\x80\x05\x95" not in written  # pickle protocol 4/5 frames
        restored = create_backend("rocksdb" if kind == "hashmap" else "hashmap", range(64, 128), tmp_path / "l2")
        try:
            restored.restore([handle])
            assert {(kg, key): v for kg, key, v in restored.state("s").items()} == {
                k: v for k, v in values.items() if k[0] >= 64}
        finally:
            restored.close()
    finally:
        backend.close()
