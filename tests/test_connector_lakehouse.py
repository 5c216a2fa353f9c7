"""The 'iceberg' and 'delta' connectors against the real libraries (pyiceberg with a SQLite catalog, delta-rs).

Jobs write through SQL and the tables are read back with pyiceberg / deltalake and, through
the data files the table lists, with DuckDB; the exactly-once commit is driven directly
through the sink writer (a commit replayed after a restore is skipped).
"""

from __future__ import annotations

import datetime
import sys
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from sqlstream.core.errors import ConnectorError, DataError, PlanError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter, SourceContext
from sqlstream.runtime.connectors.delta import DeltaOptions
from sqlstream.runtime.connectors.iceberg import IcebergOptions
from sqlstream.runtime.connectors.lakehouse import STAGING_DIR
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import RowKind
from tests.conftest import duckdb_rows, rows, run_sql

N = 2000
GEN = f"""CREATE TABLE gen (seq BIGINT, ts AS TO_TIMESTAMP_LTZ(seq * 20, 3))
WITH ('connector' = 'datagen', 'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0',
      'fields.seq.end' = '{N - 1}');"""
COLUMNS = "k BIGINT, name STRING, ts TIMESTAMP_LTZ(3), price DECIMAL(10, 2), small SMALLINT, day DATE"
INSERT = """INSERT INTO lake SELECT seq, CONCAT('n', CAST(seq % 13 AS STRING)), ts,
CAST(seq AS DECIMAL(10, 2)) / 4, CAST(seq % 100 AS SMALLINT), CAST(ts AS DATE) FROM gen;"""
# DuckDB's answer for the rows INSERT writes, summed up
ORACLE = f"""SELECT COUNT(*), SUM(seq), COUNT(DISTINCT 'n' || (seq % 13)), SUM(CAST(seq AS DECIMAL(10, 2)) / 4),
SUM(seq % 100), MAX(seq * 20) FROM range({N}) r(seq)"""
SUMMARY = "SELECT COUNT(*), SUM(k), COUNT(DISTINCT name), SUM(price), SUM(small), MAX(epoch_ms(ts)) FROM t"


def delta_with(path: Path, **extra: str) -> str:
    options = {"connector": "delta", "table-path": str(path), **extra}
    return ", ".join(f"'{k}' = '{v}'" for k, v in options.items())


def iceberg_with(tmp: Path, **extra: str) -> str:
    options = {"connector": "iceberg", "catalog-name": "lake", "catalog-type": "sql",
               "uri": f"sqlite:///{tmp}/catalog.db", "warehouse": str(tmp / "warehouse"), **extra}
    return ", ".join(f"'{k}' = '{v}'" for k, v in options.items())


def iceberg_catalog(tmp: Path) -> SqlCatalog:
    return SqlCatalog("lake", uri=f"sqlite:///{tmp}/catalog.db")


def execute(script: str) -> None:
    Session().execute_script(script)


def summary(table: pa.Table) -> list[tuple]:
    return duckdb_rows(SUMMARY, t=table)


def local(uri: str) -> str:
    return uri.removeprefix("file://")


# -- round trips ------------------------------------------------------------


def test_insert_into_delta_creates_the_table_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "delta"
    execute(f"{GEN} CREATE TABLE lake ({COLUMNS}) WITH ({delta_with(path)}); {INSERT}")
    dt = DeltaTable(str(path))
    written = dt.to_pyarrow_table()
    expected = duckdb_rows(ORACLE)
    assert summary(written) == expected
    assert [f.type for f in written.schema] == [pa.int64(), pa.string(), pa.timestamp("us", "UTC"),
                                                pa.decimal128(10, 2), pa.int16(), pa.date32()]
    # DuckDB reads the data files the Delta log lists, independently of delta-rs's reader
    files = [local(u) for u in dt.file_uris()]
    assert duckdb.sql(f"{SUMMARY.replace('FROM t', 'FROM read_parquet($files)')}",
                      params={"files": files}).fetchall() == expected
    # ... and sqlstream reads it back as a bounded source, in parallel
    back = run_sql(f"CREATE TABLE lake ({COLUMNS}) WITH ({delta_with(path)});"
                   "SELECT COUNT(*), SUM(k), COUNT(DISTINCT name), SUM(price), SUM(CAST(small AS BIGINT)), MAX(ts) FROM lake;",
                   {"parallelism.default": "2"})
    got = rows(back)[0]
    assert got[:5] == expected[0][:5]
    assert got[5].timestamp() * 1000 == expected[0][5]


def test_insert_into_iceberg_creates_the_table_and_reads_back(tmp_path: Path) -> None:
    execute(f"{GEN} CREATE TABLE lake ({COLUMNS}) WITH ({iceberg_with(tmp_path)}); {INSERT}")
    table = iceberg_catalog(tmp_path).load_table("default_database.lake")
    assert [str(f.field_type) for f in table.schema().fields] == [
        "long", "string", "timestamptz", "decimal(10, 2)", "int", "date"]
    expected = duckdb_rows(ORACLE)
    assert summary(table.scan().to_arrow()) == expected
    files = [local(task.file.file_path) for task in table.scan().plan_files()]
    assert duckdb.sql(f"{SUMMARY.replace('FROM t', 'FROM read_parquet($files)')}",
                      params={"files": files}).fetchall() == expected
    back = run_sql(f"CREATE TABLE lake ({COLUMNS}) WITH ({iceberg_with(tmp_path)});"
                   "SELECT COUNT(*), SUM(k), COUNT(DISTINCT name), SUM(price), SUM(CAST(small AS BIGINT)), MAX(ts) FROM lake;",
                   {"parallelism.default": "2"})
    got = rows(back)[0]
    assert got[:5] == expected[0][:5]
    assert got[5].timestamp() * 1000 == expected[0][5]


def test_iceberg_table_in_a_named_database_and_table(tmp_path: Path) -> None:
    execute(f"{GEN} CREATE TABLE lake ({COLUMNS}) WITH "
            f"({iceberg_with(tmp_path, **{'catalog-database': 'sales', 'catalog-table': 'orders'})}); {INSERT}")
    assert iceberg_catalog(tmp_path).load_table("sales.orders").scan().to_arrow().num_rows == N


def test_delta_upsert_merges_the_changelog_by_primary_key(tmp_path: Path) -> None:
    """An aggregate of an aggregate retracts and deletes rows: the table holds the final result."""
    path = tmp_path / "delta"
    query = ("INSERT INTO lake SELECT n, COUNT(*) FROM "
             "(SELECT seq % 37 AS k, COUNT(*) AS n FROM gen GROUP BY seq % 37) GROUP BY n;")
    execute(f"{GEN} CREATE TABLE lake (n BIGINT, c BIGINT, PRIMARY KEY (n) NOT ENFORCED) "
            f"WITH ({delta_with(path)}); {query}")
    expected = duckdb_rows(f"SELECT n, COUNT(*) FROM (SELECT seq % 37 AS k, COUNT(*) AS n FROM range({N}) r(seq) "
                           "GROUP BY ALL) GROUP BY n")
    assert sorted(rows(DeltaTable(str(path)).to_pyarrow_table())) == sorted(expected)
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "MERGE"


def test_an_updating_query_into_a_delta_table_without_key_is_refused_at_plan_time(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="table sink 'lake' .*'delta'.* Declare PRIMARY KEY"):
        execute(f"{GEN} CREATE TABLE lake (k BIGINT, c BIGINT) WITH ({delta_with(tmp_path / 'd')});"
                "INSERT INTO lake SELECT seq % 3, COUNT(*) FROM gen GROUP BY seq % 3;")
    assert not (tmp_path / "d").exists()


def test_iceberg_upsert_applies_the_changelog_by_primary_key(tmp_path: Path) -> None:
    """An aggregate of an aggregate retracts and deletes rows: the table holds the final result, read back by
    pyiceberg and, through the data files of its current snapshot (copy-on-write: no delete files), by DuckDB."""
    query = ("INSERT INTO lake SELECT n, COUNT(*) FROM "
             "(SELECT seq % 37 AS k, COUNT(*) AS n FROM gen GROUP BY seq % 37) GROUP BY n;")
    execute(f"{GEN} SET 'execution.checkpointing.interval' = '50ms';"
            f"CREATE TABLE lake (n BIGINT, c BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ({iceberg_with(tmp_path)});"
            f"{query}")
    expected = duckdb_rows(f"SELECT n, COUNT(*) FROM (SELECT seq % 37 AS k, COUNT(*) AS n FROM range({N}) r(seq) "
                           "GROUP BY ALL) GROUP BY n")
    table = iceberg_catalog(tmp_path).load_table("default_database.lake")
    assert sorted(rows(table.scan().to_arrow())) == sorted(expected)
    tasks = list(table.scan().plan_files())
    assert all(not task.delete_files for task in tasks)
    files = [local(task.file.file_path) for task in tasks]
    assert sorted(duckdb.sql("SELECT n, c FROM read_parquet($files)", params={"files": files}).fetchall()) == \
        sorted(expected)


def test_an_updating_query_into_an_iceberg_table_without_key_is_refused_at_plan_time(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="table sink 'lake' .*'iceberg'.* Declare PRIMARY KEY"):
        execute(f"{GEN} CREATE TABLE lake (k BIGINT, c BIGINT) WITH ({iceberg_with(tmp_path)});"
                "INSERT INTO lake SELECT seq % 3, COUNT(*) FROM gen GROUP BY seq % 3;")


# -- the exactly-once commit --------------------------------------------------

KEYED = (ColumnDef("k", parse_type("BIGINT"), nullable=False), ColumnDef("v", parse_type("STRING")))


def sink(options: dict[str, str], primary_key: tuple[str, ...] = ()) -> SinkWriter:
    table = TableDef("lake", KEYED, options, primary_key=primary_key)
    connector = get_connector(options["connector"])
    writer = connector.create_sink(SinkContext(table, connector.validate(table), table.physical_schema,
                                               updating=bool(primary_key)))
    writer.open()
    return writer


def batch(keys: list[int], values: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.int64()), pa.array(values)], names=["k", "v"])


def lake_options(kind: str, tmp: Path) -> dict[str, str]:
    if kind == "delta":
        return {"connector": "delta", "table-path": str(tmp / "delta")}
    return {"connector": "iceberg", "catalog-name": "lake", "catalog-type": "sql",
            "uri": f"sqlite:///{tmp}/catalog.db", "warehouse": str(tmp / "warehouse")}


def contents(kind: str, tmp: Path) -> tuple[list[tuple], int]:
    """The table's rows, and how many commits made it (Delta versions / Iceberg snapshots)."""
    if kind == "delta":
        dt = DeltaTable(str(tmp / "delta"))
        return sorted(rows(dt.to_pyarrow_table())), dt.version()
    table = iceberg_catalog(tmp).load_table("default_database.lake")
    return sorted(rows(table.scan().to_arrow())), len(table.metadata.snapshots)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_one_commit_per_checkpoint_and_a_replayed_commit_is_skipped(kind: str, tmp_path: Path) -> None:
    options = lake_options(kind, tmp_path)
    writer = sink(options)
    writer.write(batch([1, 2], ["a", "b"]), None)
    writer.write(batch([3], ["c"]), None)
    first = writer.prepare_commit(1)
    empty = writer.prepare_commit(2)
    assert empty["files"] == []  # nothing written since: it only carries the lineage, no empty commit
    writer.write(batch([4], ["d"]), None)
    second = writer.prepare_commit(3)
    _, before = contents(kind, tmp_path)
    writer.commit([first])
    writer.commit([empty, second])
    committed, commits = contents(kind, tmp_path)
    assert committed == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert commits == before + 2
    writer.close()
    # a restored job commits the committables of its checkpoint again, in a new writer: skipped
    restored = sink(options)
    restored.commit([first, second])
    assert contents(kind, tmp_path) == (committed, commits)
    restored.close()
    staging = (tmp_path / "delta" if kind == "delta" else tmp_path / "warehouse" / "default_database" / "lake") / STAGING_DIR
    assert list(staging.iterdir()) == []


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_commit_carries_the_app_id_and_checkpoint_id(kind: str, tmp_path: Path) -> None:
    writer = sink(lake_options(kind, tmp_path))
    writer.write(batch([1], ["a"]), None)
    committable = writer.prepare_commit(7)
    writer.commit([committable])
    if kind == "delta":
        dt = DeltaTable(str(tmp_path / "delta"))
        assert dt.transaction_version(committable["app"]) == 7
        info = dt.history(1)[0]
    else:
        info = iceberg_catalog(tmp_path).load_table("default_database.lake").current_snapshot().summary
    assert info["sqlstream.app-id"] == committable["app"]
    assert info["sqlstream.checkpoint-id"] == "7"


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_aborted_and_unstaged_rows_are_never_committed(kind: str, tmp_path: Path) -> None:
    writer = sink(lake_options(kind, tmp_path))
    writer.write(batch([1], ["a"]), None)
    doomed = writer.prepare_commit(1)
    writer.abort([doomed])
    writer.write(batch([2], ["b"]), None)
    writer.close()  # the rows after the last checkpoint are replayed by the restored job
    staging = (tmp_path / "delta" if kind == "delta" else tmp_path / "warehouse" / "default_database" / "lake") / STAGING_DIR
    assert list(staging.iterdir()) == []
    if kind == "delta":
        assert DeltaTable(str(tmp_path / "delta")).to_pyarrow_table().num_rows == 0
    else:
        assert iceberg_catalog(tmp_path).load_table("default_database.lake").current_snapshot() is None


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_staged_files_of_a_killed_attempt_are_deleted_when_the_restored_writer_commits(
    kind: str, tmp_path: Path
) -> None:
    options = lake_options(kind, tmp_path)
    staging = (tmp_path / "delta" if kind == "delta" else tmp_path / "warehouse" / "default_database" / "lake") / STAGING_DIR
    killed = sink(options)
    killed.write(batch([1], ["a"]), None)
    restored_from = killed.prepare_commit(1)  # checkpoint 1 completes; the process dies before committing it
    killed.write(batch([2], ["b"]), None)
    killed.prepare_commit(2)  # checkpoint 2 never completes
    killed.write(batch([3], ["c"]), None)  # being written when the process is killed (no close, no abort)
    other_job = sink(options)  # another job writing the same table: its staged rows are not ours to delete
    other_job.write(batch([9], ["z"]), None)
    theirs = other_job.prepare_commit(1)
    assert len(list(staging.iterdir())) == 4
    # a first restore dies too, after staging a file of its own
    first_restore = sink(options)
    first_restore.restore_committed([restored_from])
    first_restore.write(batch([4], ["d"]), None)
    first_restore.prepare_commit(2)
    # the restore that lives commits checkpoint 1 and deletes every leftover of the lineage
    restored = sink(options)
    restored.restore_committed([restored_from])
    restored.commit([restored_from])
    assert sorted(p.name for p in staging.iterdir()) == [Path(theirs["files"][0]).name]
    assert contents(kind, tmp_path)[0] == [(1, "a")]
    restored.write(batch([5], ["e"]), None)
    restored.commit([restored.prepare_commit(2)])
    other_job.commit([theirs])
    assert contents(kind, tmp_path)[0] == [(1, "a"), (5, "e"), (9, "z")]
    assert list(staging.iterdir()) == []


def test_delta_upsert_applies_deletes_and_the_last_change_per_key(tmp_path: Path) -> None:
    writer = sink(lake_options("delta", tmp_path), primary_key=("k",))
    writer.write(batch([1, 2, 3], ["a", "b", "c"]), None)
    writer.commit([writer.prepare_commit(1)])
    kinds = pa.array([RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE, RowKind.INSERT,
                      RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER], pa.int8())
    writer.write(batch([1, 1, 2, 4, 4, 4], ["a", "A", "b", "d", "d", "D"]), kinds)
    writer.commit([writer.prepare_commit(2)])
    assert contents("delta", tmp_path)[0] == [(1, "A"), (3, "c"), (4, "D")]


def test_iceberg_applies_deletes_and_the_last_change_per_key_once(tmp_path: Path) -> None:
    options = lake_options("iceberg", tmp_path)
    writer = sink(options, primary_key=("k",))
    writer.write(batch([1, 2, 3], ["a", "b", "c"]), None)
    writer.commit([writer.prepare_commit(1)])
    kinds = pa.array([RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE, RowKind.INSERT,
                      RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.INSERT, RowKind.DELETE], pa.int8())
    writer.write(batch([1, 1, 2, 4, 4, 4, 5, 5], ["a", "A", "b", "d", "d", "D", "e", "e"]), kinds)
    second = writer.prepare_commit(2)
    writer.commit([second])
    committed, snapshots = contents("iceberg", tmp_path)
    assert committed == [(1, "A"), (3, "c"), (4, "D")]
    table = iceberg_catalog(tmp_path).load_table("default_database.lake")
    tagged = [s.summary for s in table.metadata.snapshots if s.summary.get("sqlstream.checkpoint-id") == "2"]
    assert len(tagged) >= 2 and len({t["sqlstream.commit-id"] for t in tagged}) == 1  # several snapshots, one commit
    writer.close()
    restored = sink(options, primary_key=("k",))
    restored.commit([second])  # replayed after a restore: the table holds it already
    assert contents("iceberg", tmp_path) == (committed, snapshots)
    restored.close()


@pytest.mark.parametrize(("upsert", "expected"), [("false", [(1, "a"), (1, "b")]), ("true", [(1, "b")])])
def test_iceberg_insert_only_rows_append_unless_write_upsert_is_enabled(
    tmp_path: Path, upsert: str, expected: list[tuple]
) -> None:
    # as Flink's Iceberg sink: +I rows are appended; in upsert mode each replaces the row of its key
    writer = sink({**lake_options("iceberg", tmp_path), "write.upsert.enabled": upsert}, primary_key=("k",))
    writer.write(batch([1], ["a"]), None)
    writer.commit([writer.prepare_commit(1)])
    writer.write(batch([1], ["b"]), None)
    writer.commit([writer.prepare_commit(2)])
    assert contents("iceberg", tmp_path)[0] == expected


def test_iceberg_commits_rows_an_earlier_version_staged_without_row_kinds(tmp_path: Path) -> None:
    options = lake_options("iceberg", tmp_path)
    earlier = sink(options)  # keyless: stages no row kinds, as every iceberg sink did before upserts
    earlier.write(batch([1], ["a"]), None)
    staged = earlier.prepare_commit(1)
    sink(options, primary_key=("k",)).commit([staged])  # the restored job has the key
    assert contents("iceberg", tmp_path)[0] == [(1, "a")]


def test_iceberg_upsert_mode_needs_a_primary_key(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="Equality field columns shouldn't be empty"):
        execute(f"CREATE TABLE lake (k BIGINT) WITH ({iceberg_with(tmp_path, **{'write.upsert.enabled': 'true'})})")


def test_an_append_sink_refuses_update_rows(tmp_path: Path) -> None:
    writer = sink(lake_options("iceberg", tmp_path))
    with pytest.raises(ConnectorError, match="appends and cannot write update or delete rows"):
        writer.write(batch([1], ["a"]), pa.array([RowKind.DELETE], pa.int8()))


# -- sources -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_source_reads_the_version_it_started_with_and_resumes_by_rows(kind: str, tmp_path: Path) -> None:
    options = lake_options(kind, tmp_path)
    writer = sink(options)
    writer.write(batch(list(range(10)), [str(i) for i in range(10)]), None)
    writer.commit([writer.prepare_commit(1)])
    table = TableDef("lake", KEYED, options)
    connector = get_connector(kind)

    def reader(position: object = None) -> object:
        r = connector.create_source(SourceContext(table, connector.validate(table), ["v", "k"], batch_size=4))
        if position is not None:
            r.restore_position(position)
        r.open()
        return r

    first = reader()
    head = first.read_batch()
    assert head.schema.names == ["v", "k"] and head.num_rows == 4
    position = first.snapshot_position()
    # a newer commit does not change what a restored reader reads
    writer.write(batch([100], ["x"]), None)
    writer.commit([writer.prepare_commit(2)])
    resumed = reader(position)
    tail = []
    while (b := resumed.read_batch()) is not None:
        tail.append(b)
    assert resumed.finished
    assert sorted(rows(pa.Table.from_batches([head, *tail]))) == [(str(i), i) for i in range(10)]
    assert reader().snapshot_position() != position  # a new job reads the newest version


def test_delta_source_reads_version_as_of_and_timestamp_as_of(tmp_path: Path) -> None:
    options = lake_options("delta", tmp_path)
    writer = sink(options)
    for n in range(3):
        writer.write(batch([n], [str(n)]), None)
        writer.commit([writer.prepare_commit(n + 1)])
    got = run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH ({delta_with(tmp_path / 'delta', versionAsOf='2')});"
                  "SELECT k FROM lake;")
    assert sorted(rows(got)) == [(0,), (1,)]
    # the version current at version 2's commit time, written as Flink's Delta connector takes it
    times = {c["version"]: c["timestamp"] for c in DeltaTable(str(tmp_path / "delta")).history()}
    assert times[2] < times[3]
    at = datetime.datetime.fromtimestamp(times[2] / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    got = run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH "
                  f"({delta_with(tmp_path / 'delta', timestampAsOf=at)}); SELECT k FROM lake;")
    assert sorted(rows(got)) == [(0,), (1,)]


def test_iceberg_source_reads_a_snapshot_id_or_the_snapshot_as_of_a_time(tmp_path: Path) -> None:
    options = lake_options("iceberg", tmp_path)
    writer = sink(options)
    writer.write(batch([1], ["a"]), None)
    writer.commit([writer.prepare_commit(1)])
    first = iceberg_catalog(tmp_path).load_table("default_database.lake").current_snapshot().snapshot_id
    writer.write(batch([2], ["b"]), None)
    writer.commit([writer.prepare_commit(2)])
    got = run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH "
                  f"({iceberg_with(tmp_path, **{'snapshot-id': str(first)})}); SELECT k, v FROM lake;")
    assert rows(got) == [(1, "a")]
    table = iceberg_catalog(tmp_path).load_table("default_database.lake")
    at = table.snapshot_by_id(first).timestamp_ms
    assert at < table.current_snapshot().timestamp_ms
    got = run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH "
                  f"({iceberg_with(tmp_path, **{'as-of-timestamp': str(at)})}); SELECT k, v FROM lake;")
    assert rows(got) == [(1, "a")]
    with pytest.raises(ConnectorError, match=f"has no snapshot at or before {at - 1} ms"):
        run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH "
                f"({iceberg_with(tmp_path, **{'as-of-timestamp': str(at - 1)})}); SELECT k, v FROM lake;")
    with pytest.raises(ConnectorError, match="has no snapshot 12345"):
        run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH "
                f"({iceberg_with(tmp_path, **{'snapshot-id': '12345'})}); SELECT k, v FROM lake;")


def test_reading_a_missing_table_or_column_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="Delta table '.*nothing' does not exist"):
        run_sql(f"CREATE TABLE lake (k BIGINT) WITH ({delta_with(tmp_path / 'nothing')}); SELECT k FROM lake;")
    with pytest.raises(ConnectorError, match="Iceberg table 'default_database.lake' of catalog 'lake' does not exist"):
        run_sql(f"CREATE TABLE lake (k BIGINT) WITH ({iceberg_with(tmp_path)}); SELECT k FROM lake;")
    writer = sink(lake_options("delta", tmp_path))
    writer.write(batch([1], ["a"]), None)
    writer.commit([writer.prepare_commit(1)])
    with pytest.raises(ConnectorError, match="column 'missing' is not a column of Delta table .*columns: k, v"):
        run_sql(f"CREATE TABLE lake (missing BIGINT) WITH ({delta_with(tmp_path / 'delta')}); SELECT * FROM lake;")


# -- options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"connector": "delta"}, "connector 'delta' requires option 'table-path'"),
        ({"connector": "delta", "table-pth": "/x"}, "unknown option 'table-pth' for connector 'delta'. "
                                                   "Did you mean 'table-path'?"),
        ({"connector": "delta", "table-path": "/x", "versionAsOf": "-1"}, "'versionAsOf' = '-1' must not be negative"),
        ({"connector": "delta", "table-path": "/x", "versionAsOf": "one"}, "'versionAsOf' = 'one' is not a valid int"),
        ({"connector": "delta", "table-path": "/x", "timestampAsOf": "yesterday"},
         "'timestampAsOf' = 'yesterday' is not an ISO-8601 timestamp"),
        ({"connector": "delta", "table-path": "/x", "timestampAsOf": "2024-01-01", "versionAsOf": "1"},
         "options 'versionAsOf' and 'timestampAsOf' exclude each other"),
        ({"connector": "iceberg", "catalog-name": "c", "catalog-type": "sql", "uri": "sqlite:///c.db",
          "snapshot-id": "1", "as-of-timestamp": "1"}, "options 'snapshot-id' and 'as-of-timestamp' exclude each other"),
        ({"connector": "iceberg", "catalog-type": "sql", "uri": "sqlite:///c.db"},
         "connector 'iceberg' requires option 'catalog-name'"),
        ({"connector": "iceberg", "catalog-name": "c", "catalog-type": "hive", "uri": "thrift://h:9083"},
         "option 'catalog-type' = 'hive' must be one of sql"),
        ({"connector": "iceberg", "catalog-name": "c", "catalog-type": "sql", "uri": "catalog.db"},
         "option 'uri' = 'catalog.db' is not a SQLAlchemy URL"),
        ({"connector": "iceberg", "catalog-name": "c", "catalog-type": "sql", "uri": "sqlite:///c.db",
          "catalog-tabel": "t"}, "unknown option 'catalog-tabel' for connector 'iceberg'. Did you mean 'catalog-table'?"),
    ],
)
def test_bad_options_fail_at_create_table(options: dict[str, str], message: str) -> None:
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
    with pytest.raises(ConnectorError, match=f"table 'lake': .*{message.replace('(', '.').replace(')', '.')}"):
        Session().execute_script(f"CREATE TABLE lake (k BIGINT) WITH ({with_});")


def test_a_column_type_delta_has_not_is_refused_at_create_table(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="table 'lake': column 't' has type TIME, which Delta Lake has no type for"):
        execute(f"CREATE TABLE lake (k INT, t TIME) WITH ({delta_with(tmp_path / 'd')});")


def test_iceberg_primary_key_becomes_the_identifier_fields_of_a_created_table(tmp_path: Path) -> None:
    execute(f"{GEN} CREATE TABLE lake (k BIGINT, v STRING, PRIMARY KEY (k) NOT ENFORCED) "
            f"WITH ({iceberg_with(tmp_path)}); INSERT INTO lake SELECT seq, CAST(seq AS STRING) FROM gen;")
    table = iceberg_catalog(tmp_path).load_table("default_database.lake")
    assert table.schema().identifier_field_names() == {"k"}
    assert table.schema().find_field("k").required
    assert table.scan().to_arrow().num_rows == N


def test_delta_source_reads_a_partitioned_table_another_writer_made(tmp_path: Path) -> None:
    path = tmp_path / "parted"
    write_deltalake(str(path), pa.table({"p": [1, 1, 2, 3], "v": ["a", "b", "c", "d"]}), partition_by=["p"])
    got = run_sql(f"CREATE TABLE lake (v STRING, p BIGINT) WITH ({delta_with(path)}); SELECT p, v FROM lake;",
                  {"parallelism.default": "2"})
    assert rows(got) == [(1, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_rows_are_written_as_an_existing_tables_types_and_a_value_that_does_not_fit_fails(tmp_path: Path) -> None:
    path = tmp_path / "narrow"
    write_deltalake(str(path), pa.table({"k": pa.array([0], pa.int32()), "v": ["zero"]}))
    writer = sink({"connector": "delta", "table-path": str(path)})
    writer.write(batch([1], ["one"]), None)
    writer.commit([writer.prepare_commit(1)])
    written = DeltaTable(str(path)).to_pyarrow_table()
    assert written.schema.field("k").type == pa.int32()
    assert sorted(rows(written)) == [(0, "zero"), (1, "one")]
    writer.write(batch([2**40], ["too big"]), None)
    with pytest.raises(DataError, match="column 'k' \\(int64\\) does not convert to int32"):
        writer.commit([writer.prepare_commit(2)])


def test_a_null_in_a_required_iceberg_column_fails_before_the_commit(tmp_path: Path) -> None:
    writer = sink(lake_options("iceberg", tmp_path), primary_key=("k",))
    writer.write(pa.RecordBatch.from_arrays([pa.array([None], pa.int64()), pa.array(["a"])], names=["k", "v"]), None)
    with pytest.raises(DataError, match="column 'k' of Iceberg table 'default_database.lake' .* is required"):
        writer.commit([writer.prepare_commit(1)])
    assert iceberg_catalog(tmp_path).load_table("default_database.lake").current_snapshot() is None


def test_delta_with_a_primary_key_upserts_an_insert_only_stream(tmp_path: Path) -> None:
    path = tmp_path / "delta"
    for start, end, tag in ((0, 9, "a"), (5, 14, "b")):
        execute(f"""CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'fields.seq.kind' = 'sequence',
                    'fields.seq.start' = '{start}', 'fields.seq.end' = '{end}');
                    CREATE TABLE lake (k BIGINT, v STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ({delta_with(path)});
                    INSERT INTO lake SELECT seq, '{tag}' FROM gen;""")
    assert sorted(rows(DeltaTable(str(path)).to_pyarrow_table())) == [(k, "a" if k < 5 else "b") for k in range(15)]


def test_the_options_dataclasses_are_the_option_schemas_and_parse_to_python_values() -> None:
    for name, kind in (("delta", DeltaOptions), ("iceberg", IcebergOptions)):
        spec = get_connector(name)
        assert spec.options_type is kind
        assert [o.key for o in kind.declared()] == [o.key for o in spec.options]
    table = TableDef("lake", KEYED, {"connector": "iceberg", "catalog-name": "c", "catalog-type": "SQL",
                                     "uri": "sqlite:///c.db", "snapshot-id": "42"})
    opts = IcebergOptions.from_options(get_connector("iceberg").validate(table), "lake")
    assert (opts.catalog_type, opts.snapshot_id, opts.warehouse) == ("sql", 42, None)
    assert opts.identifier("lake") == ("default_database", "lake")
    table = TableDef("lake", KEYED, {"connector": "delta", "table-path": "/t", "versionAsOf": "3"})
    assert DeltaOptions.from_options(get_connector("delta").validate(table), "lake") == DeltaOptions("/t", 3)


@pytest.mark.parametrize(("name", "module", "options"), [
    ("delta", "deltalake", "'table-path' = '/t'"),
    ("iceberg", "pyiceberg", "'catalog-name' = 'c', 'catalog-type' = 'sql', 'uri' = 'sqlite:///c.db'"),
])
def test_a_missing_library_is_named_with_its_extra_at_create_table(
    name: str, module: str, options: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what Python does for a package that is not importable
    with pytest.raises(ConnectorError, match=f"connector '{name}' needs {module}, which is not installed: "
                                             f"pip install 'sqlstream\\[{name}\\]'"):
        execute(f"CREATE TABLE lake (k BIGINT) WITH ('connector' = '{name}', {options});")


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_table_created_by_a_sink_that_committed_nothing_reads_as_empty(kind: str, tmp_path: Path) -> None:
    options = lake_options(kind, tmp_path)
    if kind == "delta":
        options["table-path"] = (tmp_path / "delta").as_uri()  # a file:// URI works as a path does
    sink(options).close()
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
    assert rows(run_sql(f"CREATE TABLE lake (k BIGINT, v STRING) WITH ({with_}); SELECT k, v FROM lake;")) == []


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_sink_subtasks_opening_at_once_all_find_the_table_one_of_them_created(kind: str, tmp_path: Path) -> None:
    """delta-rs fails all but one concurrent creation of a table (measured: 28 of 30 rounds of 4 threads)."""
    for round_ in range(5):
        options = lake_options(kind, tmp_path / str(round_))
        (tmp_path / str(round_)).mkdir()
        errors: list[BaseException] = []

        def open_one(opts: dict[str, str] = options, errors: list[BaseException] = errors) -> None:
            try:
                sink(opts).close()
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        threads = [threading.Thread(target=open_one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
