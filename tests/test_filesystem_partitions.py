"""Partitioned filesystem tables (Flink's FileSystem SQL connector: Partition Files, Rolling Policy,
Partition Commit): Hive-style directories written, read back with partition columns and pruned
by WHERE, static partitions, the default partition, success files after commit."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pytest

from sqlstream.catalog.persistent import object_from_json, object_to_json
from sqlstream.core.errors import ConnectorError, DataError, SqlError
from sqlstream.core.expressions import Call, ColumnRef, Literal
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.connectors.base import SinkContext, SourceContext
from sqlstream.runtime.connectors.filesystem.partitions import TimeExtractor
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.operators.base import OperatorContext
from sqlstream.runtime.operators.sink import SinkOperator
from tests.conftest import rows
from tests.fault_harness import Job, expected_rows, job_script, run_with_kills

if TYPE_CHECKING:
    from tests.s3_server import S3Server

pytest_plugins = ("tests.s3_server",)

FS = get_connector("filesystem")

ROWS = """(1, 'a', '2024-03-01', 10), (2, 'b', '2024-03-01', 11), (3, 'c', '2024-03-02', 10),
          (4, 'd', '2024-03-01', 10), (5, 'e', CAST(NULL AS STRING), 1), (6, 'f', '', 2), (7, 'g/h', 'x=y/z', 3)"""
EXPECTED = [(1, "a", "2024-03-01", 10), (2, "b", "2024-03-01", 11), (3, "c", "2024-03-02", 10),
            (4, "d", "2024-03-01", 10), (5, "e", None, 1), (6, "f", None, 2), (7, "g/h", "x=y/z", 3)]


def _ddl(name: str, path: Path | str, fmt: str, extra: str = "") -> str:
    return (f"CREATE TABLE {name} (id INT, name STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ("
            f"'connector' = 'filesystem', 'path' = '{path}', 'format' = '{fmt}'{extra});")


def _select(session: Session, sql: str) -> list[tuple]:
    result = session.execute_script(sql)[-1]
    assert result.table is not None
    return rows(result.table.select([n for n in result.table.column_names if n != "op"]))


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_partitioned_round_trip_matches_duckdb_hive_partitioning(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    session = Session()
    session.execute_script(_ddl("t", out, fmt) + f"INSERT INTO t VALUES {ROWS};")
    dirs = sorted(str(p.relative_to(out)) for p in out.glob("*/*") if p.is_dir())
    assert dirs == ["dt=2024-03-01/hr=10", "dt=2024-03-01/hr=11", "dt=2024-03-02/hr=10",
                    "dt=__DEFAULT_PARTITION__/hr=1", "dt=__DEFAULT_PARTITION__/hr=2", "dt=x%3Dy%2Fz/hr=3"]
    # partition columns are not inside the files (Flink's layout)
    one = next(p for p in (out / "dt=2024-03-02" / "hr=10").iterdir())
    if fmt == "json":
        assert json.loads(one.read_text().splitlines()[0]) == {"id": 3, "name": "c"}
    elif fmt == "csv":
        assert one.read_text() == "3,c\n"
    assert _select(session, "SELECT * FROM t") == rows(pa.table(list(zip(*EXPECTED, strict=True)),
                                                                names=["id", "name", "dt", "hr"]))
    glob = f"{out}/*/*/*.{fmt}"
    reader = {"csv": f"read_csv('{glob}', columns = {{'id': 'INTEGER', 'name': 'VARCHAR'}}, header = false, ",
              "json": f"read_json('{glob}', format = 'newline_delimited', ",
              "parquet": f"read_parquet('{glob}', "}[fmt]
    duck = duckdb.connect().sql(
        f"SELECT id, name, NULLIF(dt, '__DEFAULT_PARTITION__'), hr FROM {reader}hive_partitioning = true, "
        "hive_types = {'dt': 'VARCHAR', 'hr': 'INTEGER'})").to_arrow_table()
    # DuckDB unescapes the %XX of the directory names too; the default partition is Flink's name
    assert rows(duck) == rows(pa.table(list(zip(*EXPECTED, strict=True)), names=["id", "name", "dt", "hr"]))


def test_partition_columns_are_typed_per_the_ddl_and_projection_of_partition_columns_only(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(
        f"CREATE TABLE t (v STRING, n BIGINT, ok BOOLEAN) PARTITIONED BY (n, ok) WITH ('connector' = 'filesystem', "
        f"'path' = '{tmp_path}', 'format' = 'parquet');"
        "INSERT INTO t VALUES ('a', 1, TRUE), ('b', 20, FALSE);")
    assert (tmp_path / "n=1" / "ok=true").is_dir()
    got = session.execute_script("SELECT n, ok FROM t WHERE n > 1")[-1].table
    assert got is not None and got.schema.field("n").type == pa.int64()
    assert got.select(["n", "ok"]).to_pylist() == [{"n": 20, "ok": False}]


def test_where_on_partition_columns_reads_only_the_matching_directories(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv") + f"INSERT INTO t VALUES {ROWS};")
    # a file no reader could decode: reading the partition would fail the query
    (tmp_path / "dt=2024-03-02" / "hr=10" / "garbage.csv").write_text("not,a,row,at,all\n")
    assert _select(session, "SELECT id, hr FROM t WHERE dt = '2024-03-01' AND id > 1") == [(2, 11), (4, 10)]
    assert _select(session, "SELECT id FROM t WHERE hr = 11 OR dt IS NULL") == [(2,), (5,), (6,)]
    with pytest.raises(DataError, match="garbage.csv"):  # the matching partition is read
        session.execute_script("SELECT id FROM t WHERE dt = '2024-03-02'")
    plan = session.execute_script("EXPLAIN SELECT id FROM t WHERE dt = '2024-03-01' AND id > 1")[-1].message
    assert "Source: t [filesystem]" in plan and "partitions=[($1:dt = '2024-03-01')]" in plan
    # the conditions on data columns are not pruning conditions
    assert "partitions=" not in session.execute_script("EXPLAIN SELECT id FROM t WHERE id > 1")[-1].message


def test_pruning_applies_below_a_watermark_and_computed_columns(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(
        f"CREATE TABLE t (id INT, ts TIMESTAMP(3), dt STRING, id2 AS id * 2, "
        f"WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) PARTITIONED BY (dt) WITH ('connector' = 'filesystem', "
        f"'path' = '{tmp_path}', 'format' = 'json');"
        "INSERT INTO t SELECT id, ts, dt FROM (VALUES (1, TIMESTAMP '2024-03-01 10:00:00', 'a'), "
        "(2, TIMESTAMP '2024-03-01 10:00:01', 'b')) AS v(id, ts, dt);")
    (tmp_path / "dt=a" / "garbage.json").write_text("{not json\n")
    plan = session.execute_script("EXPLAIN SELECT id2 FROM t WHERE dt = 'b'")[-1].message
    assert "WatermarkAssigner" in plan and "partitions=[($2:dt = 'b')]" in plan
    assert _select(session, "SELECT id2 FROM t WHERE dt = 'b'") == [(4,)]


def test_the_source_lists_files_only_in_the_kept_partitions(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv") + f"INSERT INTO t VALUES {ROWS};")
    t = session.catalog.get("t")
    assert isinstance(t, TableDef)
    # hr = 10, reading the partition columns in PARTITIONED BY order (dt, hr)
    pred = Call("=", (ColumnRef(1, "hr", pa.int32()), Literal(10, pa.int32())), pa.bool_())
    reader = FS.create_source(SourceContext(t, FS.validate(t), ["id", "dt"], partition_filter=pred))
    reader.open()
    assert reader.listed_partitions == ["dt=2024-03-01/hr=10", "dt=2024-03-02/hr=10"]  # type: ignore[attr-defined]
    batches = []
    while not reader.finished:
        b = reader.read_batch()
        if b is not None:
            batches.append(b)
    assert rows(pa.Table.from_batches(batches)) == [(1, "2024-03-01"), (3, "2024-03-02"), (4, "2024-03-01")]


def test_shuffle_by_partition_gives_each_partition_one_writer(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(
        "SET 'parallelism.default' = '2';"
        f"CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '400', "
        "'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '399');"
        f"CREATE TABLE t (id BIGINT, k BIGINT) PARTITIONED BY (k) WITH ('connector' = 'filesystem', "
        f"'path' = '{tmp_path}', 'format' = 'csv', 'sink.shuffle-by-partition.enable' = 'true');")
    plan = session.execute_script("EXPLAIN INSERT INTO t SELECT id, id % 5 FROM src")[-1].message
    assert "Sink: t [filesystem]  (hash" in plan
    session.execute_script("INSERT INTO t SELECT id, id % 5 FROM src")
    for k in range(5):
        writers = {p.name.split("-")[1] for p in (tmp_path / f"k={k}").glob("part-*")}
        assert len(writers) == 1, (k, writers)
    assert _select(session, "SELECT id, k FROM t") == [(i, i % 5) for i in range(400)]


def test_a_partition_value_not_of_the_column_type_is_a_clear_error(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv") + "INSERT INTO t VALUES (1, 'a', 'd', 1);")
    (tmp_path / "dt=d" / "hr=ten").mkdir()
    with pytest.raises(DataError, match="partition value hr='ten' is not a INT"):
        session.execute_script("SELECT * FROM t")


def test_a_partitioned_table_reads_a_directory_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "one.csv").write_text("1,a,d,1\n")
    session = Session()
    session.execute_script(_ddl("t", tmp_path / "one.csv", "csv"))
    with pytest.raises(ConnectorError, match="partitioned, so .path. must be a directory"):
        session.execute_script("SELECT * FROM t")


def test_a_monitored_partitioned_source_picks_up_new_partitions_and_restores(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv", ", 'source.monitor-interval' = '10 ms'")
                           + "INSERT INTO t VALUES (1, 'a', 'd1', 1);")
    t = session.catalog.get("t")
    assert isinstance(t, TableDef)
    reader = FS.create_source(SourceContext(t, FS.validate(t), ["hr", "id", "dt"]))
    reader.open()
    assert not reader.bounded
    assert reader.read_batch().to_pylist() == [{"hr": 1, "id": 1, "dt": "d1"}]
    assert reader.read_batch() is None
    # a new partition appears with a committed file (hidden, then renamed, as the sink does)
    (tmp_path / "dt=d2" / "hr=5").mkdir(parents=True)
    (tmp_path / "dt=d2" / "hr=5" / ".p.csv.tmp").write_text("2,b\n3,c\n")
    os.replace(tmp_path / "dt=d2" / "hr=5" / ".p.csv.tmp", tmp_path / "dt=d2" / "hr=5" / "p.csv")
    deadline = time.monotonic() + 5
    got = None
    while got is None and time.monotonic() < deadline:
        got = reader.read_batch()
        time.sleep(0.01)  # the monitor interval is real time
    assert got is not None and got.to_pylist() == [{"hr": 5, "id": 2, "dt": "d2"}, {"hr": 5, "id": 3, "dt": "d2"}]
    # a restored reader resumes inside the new partition's file, its values from the path
    position = reader.snapshot_position()
    restored = FS.create_source(SourceContext(t, FS.validate(t), ["hr", "id", "dt"], batch_size=1))
    restored.restore_position({**position, "offset": 1})
    restored.open()
    assert restored.read_batch().to_pylist() == [{"hr": 5, "id": 3, "dt": "d2"}]


def test_static_partition_insert(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(
        _ddl("t", tmp_path, "json")
        + "INSERT INTO t PARTITION (dt = '2024-03-05') SELECT 9, 'q', 7;"
        + "INSERT INTO t PARTITION (dt = '2024-03-06', hr = 1) SELECT 8, 'p';"
        + "INSERT INTO t PARTITION (hr = 2) (id, dt) SELECT 10, '2024-03-07';")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*")) == [
        "dt=2024-03-05/hr=7", "dt=2024-03-06/hr=1", "dt=2024-03-07/hr=2"]
    assert _select(session, "SELECT * FROM t") == [(8, "p", "2024-03-06", 1), (9, "q", "2024-03-05", 7),
                                                   (10, None, "2024-03-07", 2)]
    for bad, message in [
        ("INSERT INTO t PARTITION (name = 'x') SELECT 1, '2024-03-01', 1", "'name' is not a partition column"),
        ("INSERT INTO t PARTITION (dt = '2024-03-01') SELECT 1, 'x'", "the query produces 2 columns"),
        ("INSERT INTO t PARTITION (dt = '2024-03-01', dt = '2024-03-02') SELECT 1, 'x', 1", "given twice"),
        ("INSERT INTO t PARTITION (hr = 'ten') SELECT 1, 'x', 'd'", "cannot read 'ten' as INT"),
        ("INSERT INTO t PARTITION (hr = 1 + 1) SELECT 1, 'x', 'd'", "must be a literal"),
        ("INSERT INTO t PARTITION (hr = 1) (id, hr) SELECT 1, 2", "cannot also be in the column list"),
    ]:
        with pytest.raises(SqlError, match=message):
            session.execute_script(bad)


def test_null_and_empty_values_go_to_the_default_partition_name(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(
        _ddl("t", tmp_path, "json", ", 'partition.default-name' = 'none'")
        + "INSERT INTO t VALUES (1, 'a', CAST(NULL AS STRING), 1), (2, 'b', '', CAST(NULL AS INT)), (3, 'c', ' ', 2);")
    # a blank value is its own directory, as in Flink
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*")) == [
        "dt= /hr=2", "dt=none/hr=1", "dt=none/hr=none"]
    assert _select(session, "SELECT * FROM t") == [(1, "a", None, 1), (2, "b", None, None), (3, "c", " ", 2)]


# ---------------------------------------------------------------- the writer: commit and rolling

COLUMNS = (ColumnDef("id", parse_type("INT")), ColumnDef("dt", parse_type("STRING")),
           ColumnDef("hr", parse_type("STRING")))


def _table(path: Path, **options: str) -> TableDef:
    return TableDef("p", COLUMNS, {"connector": "filesystem", "path": str(path), "format": "csv",
                                   "sink.partition-commit.policy.kind": "success-file", **options},
                    partition_keys=("dt", "hr"))


def _sink(path: Path, clock: ManualClock, **options: str):  # noqa: ANN202 - the connector's writer
    t = _table(path, **options)
    sink = FS.create_sink(SinkContext(t, FS.validate(t), t.physical_schema, clock=clock))
    sink.open()
    return sink


def _batch(*values: tuple[int, str, str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"id": i, "dt": d, "hr": h} for i, d, h in values],
                                      schema=_table(Path("x")).physical_schema)


def _success(root: Path) -> list[str]:
    return sorted(str(p.parent.relative_to(root)) for p in root.rglob("_SUCCESS"))


def test_process_time_trigger_commits_after_the_delay_and_only_with_the_checkpoint(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = _sink(tmp_path, clock, **{"sink.partition-commit.delay": "1 h"})
    sink.write(_batch((1, "2024-03-01", "10"), (2, "2024-03-01", "11")), None)
    first = json.loads(json.dumps(sink.prepare_commit(1)))  # committables go through the checkpoint
    sink.commit([first])
    assert _success(tmp_path) == []  # files committed, the partitions not yet due
    assert [f for f in _files(tmp_path) if not f.split("/")[-1].startswith(".")] != []
    clock.advance(3_599_999)
    sink.write(_batch((3, "2024-03-01", "12")), None)
    sink.commit([sink.prepare_commit(2)])
    assert _success(tmp_path) == []
    clock.advance(1)
    sink.commit([sink.prepare_commit(3)])
    assert _success(tmp_path) == []  # exactly the delay: not yet (Flink: strictly after)
    clock.advance(1)
    staged = sink.prepare_commit(4)
    assert _success(tmp_path) == []  # due, but the checkpoint has not completed
    sink.commit([staged])
    assert _success(tmp_path) == ["dt=2024-03-01/hr=10", "dt=2024-03-01/hr=11"]
    sink.end_input()
    sink.commit([sink.prepare_commit(5)])  # the end of the input commits what is left
    assert _success(tmp_path) == ["dt=2024-03-01/hr=10", "dt=2024-03-01/hr=11", "dt=2024-03-01/hr=12"]


def test_partition_time_trigger_follows_the_watermark_in_the_time_zone(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = _sink(tmp_path, clock, **{
        "sink.partition-commit.trigger": "partition-time", "sink.partition-commit.delay": "1 h",
        "partition.time-extractor.timestamp-pattern": "$dt $hr:00:00",
        "sink.partition-commit.watermark-time-zone": "Asia/Shanghai"})
    sink.write(_batch((1, "2024-03-01", "10"), (2, "2024-03-01", "11")), None)
    # 2024-03-01 10:00 in Shanghai is 02:00 UTC; committed once the watermark passes 03:00 UTC
    three_utc = int(dt.datetime(2024, 3, 1, 3, tzinfo=dt.UTC).timestamp() * 1000)
    sink.on_watermark(three_utc)
    sink.commit([sink.prepare_commit(1)])
    assert _success(tmp_path) == []  # the watermark must pass it strictly, as in Flink
    sink.on_watermark(three_utc + 1)
    staged = sink.prepare_commit(2)
    # a restored writer knows the partitions still pending and commits what the checkpoint decided
    restored = _sink(tmp_path, clock, **{
        "sink.partition-commit.trigger": "partition-time", "sink.partition-commit.delay": "1 h",
        "partition.time-extractor.timestamp-pattern": "$dt $hr:00:00",
        "sink.partition-commit.watermark-time-zone": "Asia/Shanghai"})
    restored.restore_committed([staged])
    restored.commit([staged])
    assert _success(tmp_path) == ["dt=2024-03-01/hr=10"]
    restored.on_watermark(three_utc + 3_600_001)
    restored.commit([restored.prepare_commit(3)])
    assert _success(tmp_path) == ["dt=2024-03-01/hr=10", "dt=2024-03-01/hr=11"]


def test_the_sink_operator_hands_watermarks_to_the_writer_for_partition_time_commits(tmp_path: Path) -> None:
    sink = _sink(tmp_path, ManualClock(), **{"sink.partition-commit.trigger": "partition-time",
                                             "partition.time-extractor.timestamp-pattern": "$dt $hr:00:00"})
    op = SinkOperator(sink)
    op.open(OperatorContext("Sink"))
    op.process_batch(Chunk(_batch((1, "2024-03-01", "10"), (2, "2024-03-01", "11"))))
    ten = int(dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC).timestamp() * 1000)
    op.on_watermark(ten + 1)
    op.snapshot_state(1)
    assert _success(tmp_path) == []
    op.notify_checkpoint_complete(1)
    assert _success(tmp_path) == ["dt=2024-03-01/hr=10"]


def test_partition_time_extraction_as_flinks_default_extractor() -> None:
    utc = dt.UTC

    def ms(*args: int) -> int:
        return int(dt.datetime(*args, tzinfo=utc).timestamp() * 1000)

    # no pattern: the first value, a date or a date and time
    assert TimeExtractor(["dt", "hr"], None, "yyyy-MM-dd HH:mm:ss", "UTC")({"dt": "2024-03-01", "hr": "7"}) == \
        ms(2024, 3, 1)
    assert TimeExtractor(["dt"], None, "yyyy-MM-dd HH:mm:ss", "UTC")({"dt": "2024-03-01 06:30:00"}) == \
        ms(2024, 3, 1, 6, 30)
    # a pattern and a formatter; $hour is not mistaken for $h
    extractor = TimeExtractor(["day", "h", "hour"], "$day $hour:$h", "yyyyMMdd HH:mm", "UTC")
    assert extractor({"day": "20240301", "hour": "09", "h": "15"}) == ms(2024, 3, 1, 9, 15)
    with pytest.raises(ValueError, match="does not match the timestamp-formatter"):
        extractor({"day": "2024-03-01", "hour": "09", "h": "15"})


def test_rollover_interval_closes_files_open_too_long(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = _sink(tmp_path, clock, **{"sink.rolling-policy.rollover-interval": "10 s",
                                     "sink.rolling-policy.check-interval": "1 s"})
    sink.write(_batch((1, "d", "1")), None)
    clock.advance(9_000)
    sink.write(_batch((2, "d", "1")), None)  # checked: 9 s old
    clock.advance(999)
    sink.write(_batch((3, "d", "1")), None)  # 10 s old, but the next check is due at 10 s
    clock.advance(1)
    sink.write(_batch((4, "d", "1")), None)  # checked after writing: rolled
    clock.advance(500)
    sink.write(_batch((5, "d", "1")), None)  # a new file
    staged = sink.prepare_commit(1)
    assert len(staged["files"]) == 2
    sink.commit([staged])
    assert sorted(p.read_text() for p in (tmp_path / "dt=d" / "hr=1").glob("part-*")) == ["1\n2\n3\n4\n", "5\n"]


def test_inactivity_interval_closes_files_that_take_no_rows(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = _sink(tmp_path, clock, **{"sink.rolling-policy.inactivity-interval": "5 s",
                                     "sink.rolling-policy.check-interval": "1 s"})
    sink.write(_batch((1, "a", "1"), (2, "b", "1")), None)
    for i in range(5):  # partition b keeps taking rows, a is idle
        clock.advance(1_000)
        sink.write(_batch((3 + i, "b", "1")), None)
    # a was idle 5 s at the last check: closed; b stays open until the checkpoint
    assert [names[1].split("/")[0] for names in sink._pending] == ["dt=a"]  # noqa: SLF001 - the rolled files
    assert list(sink._open) == ["dt=b/hr=1"]  # noqa: SLF001
    staged = sink.prepare_commit(1)
    sink.commit([staged])
    assert [p.read_text() for p in (tmp_path / "dt=a" / "hr=1").glob("part-*")] == ["1\n"]


@pytest.mark.parametrize(("partitioned", "options", "message"), [
    ("(nope)", "", "partition column 'nope' is not a column"),
    ("(a, b, f, d)", "", "every physical column is a partition column"),
    ("(a)", "'sink.partition-commit.policy.kind' = 'metastore'", "needs a Hive metastore"),
    ("(a)", "'sink.partition-commit.policy.kind' = 'success-file,nope'", "'nope' must be"),
    ("(a)", "'sink.partition-commit.trigger' = 'event-time'", "must be one of"),
    ("(a)", "'sink.partition-commit.watermark-time-zone' = 'Mars/Base'", "not a time zone"),
    ("(a)", "'partition.time-extractor.timestamp-pattern' = '$b'", "names '\\$b'"),
    ("(a)", "'partition.time-extractor.timestamp-formatter' = 'yyyyMMdd EEE'", "'E'"),
    ("", "'sink.partition-commit.delay' = '1 h'", "needs a partitioned table"),
    ("", "'partition.default-name' = 'x'", "needs a partitioned table"),
    ("", "'sink.rolling-policy.check-interval' = '0 s'", "must be positive"),
    ("(f)", "", "partition column 'f' has a type"),
    ("(d)", "", "Flink writes a DATE as its day number"),
    ("(a)", "'format' = 'debezium-json'", "cannot use the changelog format 'debezium-json'"),
])
def test_partition_options_are_checked_at_create_table(tmp_path: Path, partitioned: str, options: str,
                                                        message: str) -> None:
    by = f"PARTITIONED BY {partitioned}" if partitioned else ""
    extra = f", {options}" if options else ""
    fmt = "" if "'format'" in options else ", 'format' = 'csv'"
    sql = (f"CREATE TABLE t (a STRING, b INT, f DOUBLE, d DATE) {by} WITH ('connector' = 'filesystem', "
           f"'path' = '{tmp_path}'{fmt}{extra})")
    with pytest.raises((SqlError, ConnectorError), match=message):
        Session().execute_script(sql)


def test_a_persistent_catalog_keeps_the_partition_columns(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv"))
    t = session.catalog.get("t")
    assert isinstance(t, TableDef)
    again = object_from_json(object_to_json(t))
    assert isinstance(again, TableDef) and again.partition_keys == ("dt", "hr")


def test_show_create_table_keeps_partitioned_by(tmp_path: Path) -> None:
    session = Session()
    session.execute_script(_ddl("t", tmp_path, "csv"))
    text = session.execute_script("SHOW CREATE TABLE t")[-1].message
    assert "PARTITIONED BY (`dt`, `hr`) WITH (" in text
    again = Session()
    again.execute_script(text.replace("`t`", "t2") + ";")
    t2 = again.catalog.get("t2")
    assert isinstance(t2, TableDef) and t2.partition_keys == ("dt", "hr")


def test_partitioned_table_on_s3_with_pruning(bucket: str, s3_server: S3Server) -> None:
    session = Session()
    session.execute_script(s3_server.set_statements() + _ddl("t", f"s3://{bucket}/t", "parquet",
                                                             ", 'sink.partition-commit.policy.kind' = 'success-file'")
                           + f"INSERT INTO t VALUES {ROWS};")
    keys = s3_server.keys(bucket)
    assert "t/dt=2024-03-01/hr=10/_SUCCESS" in keys and "t/dt=__DEFAULT_PARTITION__/hr=1/_SUCCESS" in keys
    assert not [k for k in keys if ".inprogress" in k]
    assert _select(session, "SELECT id, dt FROM t WHERE hr = 10") == [(1, "2024-03-01"), (3, "2024-03-02"),
                                                                       (4, "2024-03-01")]
    s3_server.client().put_object(Bucket=bucket, Key="t/dt=2024-03-02/hr=10/bad.parquet", Body=b"not parquet")
    assert _select(session, "SELECT id FROM t WHERE dt = '2024-03-01'") == [(1,), (2,), (4,)]


def _committed_partitioned(out: Path) -> list[tuple]:
    """The committed rows of the windowed job's partitioned sink, as DuckDB's hive_partitioning
    reads them (hidden in-progress files are not matched by the glob)."""
    return rows(duckdb.connect().sql(
        f"SELECT window_start, k, n, s FROM read_csv('{out}/k=*/part-*.csv', header = false, "
        "columns = {'window_start': 'TIMESTAMP', 'n': 'BIGINT', 's': 'BIGINT'}, hive_partitioning = true, "
        "hive_types = {'k': 'BIGINT'})").to_arrow_table())


@pytest.mark.slow
def test_sigkill_and_restore_of_a_partitioned_sink_gives_the_failure_free_output(tmp_path: Path) -> None:
    def script(root: Path) -> str:
        return job_script(root / "chk", f"'connector' = 'filesystem', 'path' = '{root / 'out'}', 'format' = 'csv', "
                          "'sink.partition-commit.policy.kind' = 'success-file'",
                          parallelism=2, rate=12_000, partitioned_by="k")

    clean = tmp_path / "clean"
    Job(clean, script(clean)).run_clean()
    expected = expected_rows()
    assert _committed_partitioned(clean / "out") == expected
    killed = tmp_path / "killed"
    run = run_with_kills(Job(killed, script(killed)), seed=5, kills=3)
    assert run.kills >= 2, "the harness should have killed the job several times"
    assert _committed_partitioned(killed / "out") == expected
    assert _success(killed / "out") == [f"k={k}" for k in range(7)]


def test_in_progress_files_of_a_killed_attempt_are_deleted_in_every_partition(tmp_path: Path) -> None:
    clock = ManualClock()
    killed = _sink(tmp_path, clock)
    killed.write(_batch((1, "2024-03-01", "10")), None)
    restored_from = json.loads(json.dumps(killed.prepare_commit(1)))  # through the checkpoint
    killed.write(_batch((2, "2024-03-01", "11"), (3, "2024-03-02", "00")), None)  # being written at the kill
    hidden = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob(".*.inprogress"))
    assert len(hidden) == 3
    restored = _sink(tmp_path, clock)
    restored.restore_committed([restored_from])
    restored.commit([restored_from])
    assert list(tmp_path.rglob(".*.inprogress")) == []
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("part-*")) == [
        f"dt=2024-03-01/hr=10/{Path(restored_from['files'][0][1]).name}"]
