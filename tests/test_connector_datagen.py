"""The datagen connector driven through the Connector interface."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock, ManualClock
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.connectors.throttle import MAX_BLOCK_S

DG = get_connector("datagen")
FAST = {"rows-per-second": "100000000"}


def table(columns: dict[str, str], **options: str) -> TableDef:
    cols = tuple(ColumnDef(name, parse_type(t)) for name, t in columns.items())
    return TableDef("gen", cols, {"connector": "datagen", **options})


def source(t: TableDef, columns: list[str] | None = None, batch_size: int = 1000,
           subtask: int = 0, parallelism: int = 1, clock: Clock = SYSTEM_CLOCK) -> SourceReader:
    opts = DG.validate(t)
    cols = [c.name for c in t.physical_columns] if columns is None else columns
    return DG.create_source(SourceContext(t, opts, cols, subtask, parallelism, batch_size, clock))


def read(reader: SourceReader, limit: int | None = None, opened: bool = False) -> list[pa.RecordBatch]:
    """Batches until finished (or until ``limit`` rows)."""
    if not opened:
        reader.open()
    out: list[pa.RecordBatch] = []
    rows = 0
    while not reader.finished and (limit is None or rows < limit):
        b = reader.read_batch()
        if b is not None:
            out.append(b)
            rows += b.num_rows
    return out


def column(batches: list[pa.RecordBatch], name: str) -> list:
    return [v for b in batches for v in b.column(name).to_pylist()]


def test_sequence_is_bounded_with_exact_values() -> None:
    t = table({"id": "BIGINT", "name": "STRING"},
              **{"fields.id.kind": "sequence", "fields.id.start": "5", "fields.id.end": "2504"}, **FAST)
    reader = source(t, batch_size=300)
    assert reader.bounded
    batches = read(reader)
    assert column(batches, "id") == list(range(5, 2505))
    assert all(b.num_rows <= 300 for b in batches)
    assert reader.read_batch() is None and reader.finished


def test_sequence_split_among_subtasks_in_contiguous_ranges() -> None:
    t = table({"id": "INT", "s": "STRING"},
              **{"fields.id.kind": "sequence", "fields.id.start": "1", "fields.id.end": "10",
                 "fields.s.kind": "sequence", "fields.s.start": "100", "fields.s.end": "109"}, **FAST)
    parts = [read(source(t, subtask=i, parallelism=3)) for i in range(3)]
    ids = [column(p, "id") for p in parts]
    assert ids == [[1, 2, 3], [4, 5, 6], [7, 8, 9, 10]]
    assert column(parts[0], "s") == ["100", "101", "102"]


def test_number_of_rows_bounds_the_source_over_all_subtasks() -> None:
    t = table({"x": "INT"}, **{"number-of-rows": "1001"}, **FAST)
    counts = [sum(b.num_rows for b in read(source(t, subtask=i, parallelism=4))) for i in range(4)]
    assert sum(counts) == 1001
    # The shorter of number-of-rows and a sequence wins.
    t = table({"x": "INT"}, **{"number-of-rows": "50", "fields.x.kind": "sequence",
                               "fields.x.start": "0", "fields.x.end": "9"}, **FAST)
    assert column(read(source(t)), "x") == list(range(10))


def test_unbounded_without_limits() -> None:
    reader = source(table({"x": "INT"}, **FAST))
    assert not reader.bounded
    assert sum(b.num_rows for b in read(reader, limit=5000)) >= 5000
    assert not reader.finished


def test_random_values_respect_min_max_and_length() -> None:
    t = table(
        {"i": "INT", "t": "TINYINT", "b": "BIGINT", "d": "DOUBLE", "f": "FLOAT", "m": "DECIMAL(6, 2)",
         "s": "STRING", "v": "VARCHAR(10)", "ok": "BOOLEAN"},
        **{"fields.i.min": "-5", "fields.i.max": "5", "fields.t.min": "120", "fields.d.min": "0.5",
           "fields.d.max": "0.75", "fields.f.max": "2", "fields.m.min": "-1.5", "fields.m.max": "1.5",
           "fields.s.length": "7", "fields.b.min": "9223372036854775806", "number-of-rows": "5000"},
        **FAST,
    )
    batches = read(source(t))
    i = column(batches, "i")
    assert min(i) == -5 and max(i) == 5
    assert all(120 <= v <= 127 for v in column(batches, "t"))
    assert set(column(batches, "b")) == {9223372036854775806, 9223372036854775807}
    assert all(0.5 <= v <= 0.75 for v in column(batches, "d"))
    assert all(0 <= v <= 2 for v in column(batches, "f"))
    m = column(batches, "m")
    assert all(Decimal("-1.5") <= v <= Decimal("1.5") for v in m) and len(set(m)) > 200
    s = column(batches, "s")
    assert all(len(v) == 7 and set(v) <= set("0123456789abcdef") for v in s)
    assert all(len(v) == 100 for v in column(batches, "v"))  # Flink's default length
    ok = column(batches, "ok")
    assert 2000 < sum(ok) < 3000


def test_null_rate_is_roughly_respected() -> None:
    t = table({"a": "INT", "b": "STRING"},
              **{"fields.a.null-rate": "0.3", "number-of-rows": "10000"}, **FAST)
    batches = read(source(t))
    nulls = column(batches, "a").count(None)
    assert 2500 < nulls < 3500
    assert column(batches, "b").count(None) == 0


def test_timestamps_go_back_at_most_max_past() -> None:
    t = table({"ts": "TIMESTAMP(3)", "ltz": "TIMESTAMP_LTZ(3)", "day": "DATE"},
              **{"fields.ts.max-past": "10 s", "number-of-rows": "2000"}, **FAST)
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    batches = read(source(t))
    after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    ts = column(batches, "ts")
    assert all(before - dt.timedelta(seconds=11) <= v <= after + dt.timedelta(seconds=1) for v in ts)
    assert max(ts) - min(ts) > dt.timedelta(seconds=5)
    ltz = column(batches, "ltz")
    assert ltz[0].tzinfo is not None
    assert abs(ltz[0].replace(tzinfo=None) - before) < dt.timedelta(seconds=2)
    assert column(batches, "day")[0] in (before.date(), after.date())


def test_seed_makes_values_deterministic_and_batch_size_independent() -> None:
    cols = {"a": "INT", "s": "STRING", "d": "DOUBLE", "ts": "TIMESTAMP(3)"}
    opts = {"seed": "7", "number-of-rows": "500", "fields.ts.max-past": "1 min", **FAST}
    one = pa.Table.from_batches(read(source(table(cols, **opts), batch_size=64)))
    two = pa.Table.from_batches(read(source(table(cols, **opts), batch_size=500)))
    assert one.drop_columns(["ts"]).equals(two.drop_columns(["ts"]))
    other = pa.Table.from_batches(read(source(table(cols, **{**opts, "seed": "8"}))))
    assert not one.column("a").equals(other.column("a"))


def test_projection_keeps_each_columns_values() -> None:
    t = table({"a": "INT", "b": "STRING", "c": "BIGINT"}, seed="3", **{"number-of-rows": "100"}, **FAST)
    full = pa.Table.from_batches(read(source(t)))
    part = pa.Table.from_batches(read(source(t, columns=["c", "a"])))
    assert part.schema.names == ["c", "a"]
    assert part.column("c").equals(full.column("c")) and part.column("a").equals(full.column("a"))


@pytest.mark.parametrize("seed", [{"seed": "11"}, {}])
def test_snapshot_and_restore_replays_exactly(seed: dict) -> None:
    cols = {"id": "BIGINT", "a": "INT", "s": "STRING", "ts": "TIMESTAMP_LTZ(3)", "m": "DECIMAL(8, 3)"}
    t = table(cols, **{"fields.id.kind": "sequence", "fields.id.start": "0", "fields.id.end": "999",
                       "fields.ts.max-past": "5 s", "fields.a.null-rate": "0.2"}, **seed, **FAST)
    for stop in (0, 1, 3, 7):
        first = source(t, batch_size=97)
        first.open()
        head = [first.read_batch() for _ in range(stop)]
        position = json.loads(json.dumps(first.snapshot_position()))
        # The reference: the same source continued without interruption.
        rest_reference = read(first, opened=True)
        second = source(t, batch_size=50)
        second.restore_position(position)
        tail = read(second)
        combined = pa.Table.from_batches(head + tail)
        reference = pa.Table.from_batches(head + rest_reference)
        assert combined.equals(reference)
        assert combined.column("id").to_pylist() == list(range(1000))


def test_throttling_returns_none_without_blocking_long() -> None:
    clock = ManualClock()
    t = table({"x": "INT"}, **{"rows-per-second": "20", "number-of-rows": "10"})
    reader = source(t, clock=clock)
    reader.open()
    start = clock.monotonic()
    rows = nones = 0
    for _ in range(1000):  # bounded by reads, not by time
        if reader.finished:
            break
        b = reader.read_batch()
        rows += 0 if b is None else b.num_rows
        nones += b is None
    assert rows == 10
    assert nones > 0  # the reader returns while it waits, so its subtask stays responsive
    assert max(clock.sleeps) <= MAX_BLOCK_S  # and never blocks longer than that
    assert 0.45 <= clock.monotonic() - start <= 0.45 + MAX_BLOCK_S  # 10 rows at 20 rows/s: the last at 9 / 20 s


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields.nme.kind": "random"}, "option 'fields.nme.kind' refers to unknown column 'nme'. Did you mean 'name'?"),
        ({"fields.id.lenght": "5"}, "unknown option 'fields.id.lenght' for column 'id'. Did you mean 'fields.id.length'?"),
        ({"fields.id.kind": "sequence", "fields.id.start": "1"}, "sequence column 'id' requires option 'fields.id.end'"),
        ({"fields.id.kind": "sequence", "fields.id.end": "1"}, "sequence column 'id' requires option 'fields.id.start'"),
        ({"fields.id.min": "10", "fields.id.max": "1"}, "table 'gen': option 'fields.id.min' = 10 is greater than 'fields.id.max' = 1"),
        ({"fields.id.min": "abc"}, "table 'gen': option 'fields.id.min' = 'abc' is not a number"),
        ({"fields.id.min": "1.5"}, "'fields.id.min' = '1.5' must be an integer"),
        ({"fields.id.kind": "sometimes"}, "'fields.id.kind' = 'sometimes' must be 'random' or 'sequence'"),
        ({"fields.id.null-rate": "2"}, "'fields.id.null-rate' = '2' must be a number between 0 and 1"),
        ({"fields.name.min": "1"}, "option 'fields.name.min' only applies to numeric columns"),
        ({"fields.id.start": "1"}, "option 'fields.id.start' only applies to kind 'sequence'"),
        ({"fields.id.max-past": "1 s"}, "'fields.id.max-past' only applies to TIMESTAMP and DATE columns"),
        ({"fields.id.kind": "sequence", "fields.id.start": "5", "fields.id.end": "1"}, "is greater than"),
        ({"fields.id.max": "99999999999"}, "out of range for INT"),
        ({"rows-per-secnd": "5"}, "unknown option 'rows-per-secnd' for connector 'datagen'. Did you mean 'rows-per-second'?"),
        ({"rows-per-second": "0"}, "'rows-per-second' = '0' must be positive"),
        ({"number-of-rows": "many"}, "option 'number-of-rows' = 'many' is not a valid int"),
    ],
)
def test_validation_errors(options: dict, message: str) -> None:
    with pytest.raises(ConnectorError) as e:
        DG.validate(table({"id": "INT", "name": "STRING"}, **options))
    assert message in str(e.value)
    assert "gen" in str(e.value)


def test_unsupported_type() -> None:
    with pytest.raises(ConnectorError, match="datagen cannot generate column 'a' of type ARRAY<INT>"):
        DG.validate(table({"a": "ARRAY<INT>"}))
