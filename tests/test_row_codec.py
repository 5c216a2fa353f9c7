"""The column-wise row encoding of state kept in RocksDB (sqlstream/runtime/state/row_codec.py).

Rows must come back exactly (NULLs, empty strings, every fixed-width type), equal keys must give
equal bytes (a RocksDB lookup finds them) and different keys different bytes, and the key group
must lead so that each key group is one contiguous range of RocksDB's byte order.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.runtime.state import row_codec
from sqlstream.runtime.state.row_codec import RowCodec, supported

COLUMNS = [
    pa.array([1, None, -(2**63), 2**63 - 1], pa.int64()),
    pa.array([1, None, 0, -5], pa.int8()),
    pa.array([2**64 - 1, 0, None, 7], pa.uint64()),
    pa.array(["aé", None, "", "x" * 300], pa.string()),
    pa.array(["big", "", None, "ü"], pa.large_string()),
    pa.array([b"\x00\x01", b"", None, b"\xff"], pa.binary()),
    pa.array([1.5, None, float("inf"), -0.25], pa.float64()),
    pa.array([1.5, None, 0.0, -2.0], pa.float32()),
    pa.array([True, None, False, True], pa.bool_()),
    pa.array([dt.date(2024, 2, 29), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
    pa.array([dt.datetime(2024, 1, 1, 1, 2, 3, 4000), None, dt.datetime(1970, 1, 1), dt.datetime(1900, 5, 5)],
             pa.timestamp("ms")),
    pa.array([dt.datetime(2024, 1, 1), None, None, dt.datetime(2000, 1, 1)], pa.timestamp("us", "UTC")),
    pa.array([dt.time(1, 2, 3), None, dt.time(0), dt.time(23, 59, 59)], pa.time32("s")),
    pa.array([dt.time(1, 2, 3, 4), None, dt.time(0), dt.time(23, 59, 59)], pa.time64("us")),
    pa.array([dt.timedelta(seconds=5), None, dt.timedelta(0), dt.timedelta(days=-1)], pa.duration("ms")),
]


@pytest.mark.parametrize("key_group", [False, True])
def test_rows_of_every_supported_type_come_back_exactly(key_group: bool) -> None:
    codec = RowCodec([c.type for c in COLUMNS], key_group=key_group)
    kgs = np.array([0, 32767, 5, 256])
    encoded = codec.encode(COLUMNS, kgs if key_group else None)
    # decoded from a copy: the bytes alone carry the rows
    back_kgs, back = codec.decode(pa.array(encoded.to_pylist(), pa.binary()))
    assert (back_kgs is not None) == key_group and (not key_group or back_kgs.tolist() == kgs.tolist())
    for column, decoded in zip(COLUMNS, back, strict=True):
        assert decoded.type == column.type and decoded.to_pylist() == column.to_pylist()


def test_a_slice_of_encoded_rows_decodes_and_rows_without_columns_are_their_key_group() -> None:
    codec = RowCodec([pa.int64(), pa.string()])
    encoded = codec.encode([pa.array([1, 2, 3]), pa.array(["a", None, "ccc"])])
    _, back = codec.decode(encoded.slice(1))
    assert [c.to_pylist() for c in back] == [[2, 3], [None, "ccc"]]
    no_columns = RowCodec([], key_group=True)
    assert no_columns.encode([], np.array([3, 0])).to_pylist() == [b"\x00\x03", b"\x00\x00"]


def test_equal_keys_give_equal_bytes_and_different_keys_different_bytes() -> None:
    codec = RowCodec([pa.string(), pa.string(), pa.float64()], key_group=True, keys=True)
    rows = [("a", "bc", 1.0), ("ab", "c", 1.0), ("a", "bc", 1.0), (None, "", 0.0), ("", None, 0.0),
            ("", "", -0.0), ("", "", 0.0), (None, None, None)]
    columns = [pa.array([r[i] for r in rows], t) for i, t in enumerate(codec.types)]
    encoded = codec.encode(columns, np.zeros(len(rows), np.int64)).to_pylist()
    assert encoded[0] == encoded[2] and encoded[5] == encoded[6]  # -0.0 is the key 0.0 (hash_array agrees)
    assert len({encoded[i] for i in (0, 1, 3, 4, 5, 7)}) == 6


def test_the_key_group_leads_the_byte_order() -> None:
    codec = RowCodec([pa.int64()], key_group=True, keys=True)
    kgs = np.array([300, 2, 2, 1, 300])
    encoded = codec.encode([pa.array([5, 9, -1, 2**40, None])], kgs).to_pylist()
    ordered = sorted(range(5), key=encoded.__getitem__)
    assert kgs[ordered].tolist() == [1, 2, 2, 300, 300]


def test_types_without_an_encoding_are_refused() -> None:
    assert not supported(pa.decimal128(10, 2)) and not supported(pa.list_(pa.int64()))
    with pytest.raises(TypeError, match="decimal"):
        RowCodec([pa.decimal128(10, 2)])


def test_long_strings_are_gathered_a_bounded_step_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # the gather index takes 8 bytes per byte moved: strings are moved GATHER_STEP bytes at a time,
    # rows whole (one longer than a step is a step of its own), and come back exactly
    monkeypatch.setattr(row_codec, "GATHER_STEP", 7)
    rng = np.random.default_rng(4)
    strings = [None if x % 9 == 4 else "".join(chr(97 + c) for c in rng.integers(0, 26, x % 23)) for x in range(300)]
    blobs = [None if s is None else s.encode() * 2 for s in strings]
    columns = [pa.array(strings, pa.string()), pa.array(range(300), pa.int64()), pa.array(blobs, pa.binary())]
    codec = RowCodec([c.type for c in columns])
    _, back = codec.decode(codec.encode(columns))
    assert [c.to_pylist() for c in back] == [c.to_pylist() for c in columns]


@pytest.mark.parametrize("types", [[pa.int64()], [pa.string(), pa.int32(), pa.binary()], []])
def test_a_row_key_followed_by_a_suffix_splits_back_into_both(types: list[pa.DataType]) -> None:
    # the COUNT(DISTINCT) entries of the rocksdb GROUP BY: a key row, then the aggregate index and
    # the value; the key row's length comes from its own fixed part, so any suffix splits off
    columns = {pa.int64(): pa.array([5, None, -1]), pa.string(): pa.array(["ab", "", None]),
               pa.int32(): pa.array([1, 2, None], pa.int32()), pa.binary(): pa.array([b"\x00", None, b"xyz"])}
    codec = RowCodec(types, key_group=True, keys=True)
    keys = codec.encode([columns[t] for t in types], np.array([3, 0, 70]))
    suffixes = pa.array([b"\x01tail", b"", b"\x00\x00\xff"])
    joined = pa.compute.binary_join_element_wise(keys, suffixes, b"")
    heads, rests = row_codec.split_at(joined, codec.leading_lengths(joined))
    assert heads.to_pylist() == keys.to_pylist() and rests.to_pylist() == suffixes.to_pylist()
