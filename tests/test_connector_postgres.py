"""The postgres connector against a real PostgreSQL: two-phase-commit sink, upserts, scans, lookups."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.connectors.base import (
    LookupContext,
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.operators.sink import FINAL_CHECKPOINT, SinkOperator
from sqlstream.runtime.state.codec import decode, encode
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness

# Provides the postgres_server fixture (opt-in, like tests/kafka_broker.py).
pytest_plugins = ("tests.postgres_server",)

ROOT = Path(__file__).resolve().parent.parent
PG = get_connector("postgres")
COLUMNS = (
    ColumnDef("id", parse_type("INT")),
    ColumnDef("name", parse_type("STRING")),
    ColumnDef("ts", parse_type("TIMESTAMP(3)")),
)
SCHEMA = pa.schema([pa.field(c.name, c.type) for c in COLUMNS])
PG_COLUMNS = "id integer, name text, ts timestamp(3)"


def execute(url: str, statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def new_table(url: str, columns: str = PG_COLUMNS) -> str:
    name = f"t_{uuid.uuid4().hex[:10]}"
    execute(url, f"CREATE TABLE {name} ({columns})")
    return name


def table(url: str, name: str, options: dict[str, str] | None = None, columns: tuple[ColumnDef, ...] = COLUMNS,
          primary_key: tuple[str, ...] = ()) -> TableDef:
    opts = {"connector": "postgres", "url": url, "table-name": name, **(options or {})}
    return TableDef("t", columns, opts, primary_key=primary_key)


def exactly_once(url: str, name: str, prefix: str, **kwargs: Any) -> TableDef:
    return table(url, name, {"sink.delivery-guarantee": "exactly-once", "sink.transaction-id-prefix": prefix}, **kwargs)


def sink(t: TableDef, subtask: int = 0, parallelism: int = 1, updating: bool = False) -> SinkWriter:
    schema = pa.schema([pa.field(c.name, c.type) for c in t.physical_columns])
    writer = PG.create_sink(SinkContext(t, PG.validate(t), schema, subtask, parallelism, updating))
    writer.open()
    return writer


def rows_of(n: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"id": i, "name": None if i % 7 == 3 else f"n'{i}\t", "ts": dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=250 * i)}
         for i in range(start, start + n)],
        schema=SCHEMA,
    )


def content(url: str, name: str) -> list[dict]:
    cols = ("id", "name", "ts")
    return [dict(zip(cols, r, strict=True)) for r in execute(url, f"SELECT id, name, ts FROM {name} ORDER BY id")]


def prepared(url: str) -> set[str]:
    return {gid for (gid,) in execute(url, "SELECT gid FROM pg_prepared_xacts")}


# ---------------------------------------------------------------------------
# exactly-once, appending


def test_exactly_once_round_trip(postgres_server: str) -> None:
    name = new_table(postgres_server)
    writer = sink(exactly_once(postgres_server, name, "round_trip"))
    writer.write(rows_of(40), None)
    c1 = writer.prepare_commit(1)
    writer.write(rows_of(25, 40), None)
    c2 = decode(encode(writer.prepare_commit(2)))
    assert writer.prepare_commit(3) is None  # nothing written since: no transaction to prepare
    assert c1.startswith("round_trip-0-") and c1.endswith("-1")
    writer.commit([c1, c2])
    writer.close()
    assert content(postgres_server, name) == rows_of(65).to_pylist()
    assert not {c1, c2} & prepared(postgres_server)


def test_nothing_is_visible_before_commit_prepared(postgres_server: str) -> None:
    name = new_table(postgres_server)
    writer = sink(exactly_once(postgres_server, name, "invisible"))
    writer.write(rows_of(10), None)
    assert content(postgres_server, name) == []
    gid = writer.prepare_commit(1)
    assert gid in prepared(postgres_server)
    assert content(postgres_server, name) == []
    writer.commit([gid])
    assert len(content(postgres_server, name)) == 10
    writer.close()


def test_an_ended_attempt_rolls_back_the_prepared_transactions_no_completed_checkpoint_holds(
    postgres_server: str,
) -> None:
    """The committer aborts when an attempt ends: checkpoint 2 never completed, so its gid is rolled
    back at once (it held its locks until a successor's clean-up before); checkpoint 1 completed
    but was not committed yet, so its gid stays prepared and the restore commits it."""
    name = new_table(postgres_server)
    t = exactly_once(postgres_server, name, "ended")
    committer = OperatorHarness(SinkOperator(PG.create_sink(SinkContext(t, PG.validate(t), SCHEMA))), None)
    committer.process_batch(rows_of(10))
    held = committer.snapshot(1)
    committer.process_batch(rows_of(5, 10))
    committer.snapshot(2)
    gid1, gid2 = held.operator["pending"][1], committer.operator.pending[2]
    assert {gid1, gid2} <= prepared(postgres_server)
    committer.operator.discard_uncommitted(1)  # the attempt failed; checkpoint 1 is the latest that completed
    committer.close()
    assert gid1 in prepared(postgres_server) and gid2 not in prepared(postgres_server)
    restored = OperatorHarness(SinkOperator(PG.create_sink(SinkContext(t, PG.validate(t), SCHEMA))), None, restore=held)
    restored.close()
    assert content(postgres_server, name) == rows_of(10).to_pylist()
    assert gid1 not in prepared(postgres_server)


def test_committing_again_after_a_restore_writes_no_duplicates(postgres_server: str) -> None:
    name = new_table(postgres_server)
    t = exactly_once(postgres_server, name, "twice")
    first = sink(t)
    first.write(rows_of(10), None)
    c1 = first.prepare_commit(1)
    first.write(rows_of(10, 10), None)
    c2 = first.prepare_commit(2)
    first.commit([c1])  # the process dies before checkpoint 2's commit
    first.close()
    restored = [decode(encode(c)) for c in (c1, c2)]
    second = sink(t)
    second.commit(restored)
    second.commit(restored)
    second.close()
    third = sink(t)
    third.commit(restored)
    third.write(rows_of(5, 20), None)
    third.commit([third.prepare_commit(FINAL_CHECKPOINT)])
    assert content(postgres_server, name) == rows_of(25).to_pylist()


CRASHING_WRITER = """
import os, sys
import pyarrow as pa
from tests.test_connector_postgres import exactly_once, rows_of, sink
url, name, prefix, subtask = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
writer = sink(exactly_once(url, name, prefix), subtask, parallelism=2)
writer.write(rows_of(3, 100 * subtask), None)
committed = writer.prepare_commit(1)
writer.commit([committed])
writer.write(rows_of(3, 100 * subtask + 10), None)
print(committed, writer.prepare_commit(2), flush=True)  # checkpoint 2 never completes
writer.write(rows_of(3, 100 * subtask + 20), None)  # an open transaction, not prepared
os._exit(0)
"""


def crash_writer(url: str, name: str, prefix: str, subtask: int) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", CRASHING_WRITER, url, name, prefix, str(subtask)],
                         check=True, timeout=60, capture_output=True, text=True, cwd=ROOT)
    committed, lingering = out.stdout.split()
    return committed, lingering


def test_lingering_prepared_transactions_of_a_crashed_writer_are_rolled_back(postgres_server: str) -> None:
    name = new_table(postgres_server)
    committed, lingering = crash_writer(postgres_server, name, "crash", 0)
    _, other_subtask = crash_writer(postgres_server, name, "crash", 1)
    _, other_prefix = crash_writer(postgres_server, name, "crash_other", 0)
    assert {lingering, other_subtask, other_prefix} <= prepared(postgres_server)
    committed_ids = [0, 0, 1, 1, 2, 2, 100, 101, 102]  # checkpoint 1 of each crashed writer
    assert sorted(r["id"] for r in content(postgres_server, name)) == committed_ids
    restarted = sink(exactly_once(postgres_server, name, "crash"), 0, parallelism=2)
    restarted.commit([committed])  # restored from checkpoint 1
    assert lingering in prepared(postgres_server)  # still: cleaning up waits for the first write
    restarted.write(rows_of(2, 50), None)
    assert lingering not in prepared(postgres_server)
    assert {other_subtask, other_prefix} <= prepared(postgres_server)  # not this writer's
    restarted.commit([restarted.prepare_commit(2)])
    restarted.close()
    ids = sorted(r["id"] for r in content(postgres_server, name))
    assert ids == sorted([*committed_ids, 50, 51])
    for gid in (other_subtask, other_prefix):
        execute(postgres_server, f"ROLLBACK PREPARED '{gid}'")


# ---------------------------------------------------------------------------
# exactly-once, upserting


KV = (ColumnDef("k", parse_type("INT")), ColumnDef("v", parse_type("STRING")))
KV_SCHEMA = pa.schema([pa.field(c.name, c.type) for c in KV])


def kv_table(url: str) -> str:
    return new_table(url, "k integer PRIMARY KEY, v text")


def changes(*rows: tuple[int, int, str | None]) -> tuple[pa.RecordBatch, pa.Array]:
    """(kind, k, v) rows as a batch and its kinds."""
    batch = pa.RecordBatch.from_pylist([{"k": k, "v": v} for _, k, v in rows], schema=KV_SCHEMA)
    return batch, pa.array([kind for kind, _, _ in rows], pa.int8())


def kv(url: str, name: str) -> dict[int, str]:
    return dict(execute(url, f"SELECT k, v FROM {name} ORDER BY k"))


def test_exactly_once_upsert_stages_changes_until_commit(postgres_server: str) -> None:
    name = kv_table(postgres_server)
    writer = sink(exactly_once(postgres_server, name, "upsert", columns=KV), updating=True)
    writer.write(*changes((RowKind.INSERT, 1, "a"), (RowKind.INSERT, 2, "b"), (RowKind.INSERT, 3, "c")))
    c1 = writer.prepare_commit(1)
    # The same keys again before checkpoint 1 commits: a direct write would wait on c1's row locks.
    writer.write(*changes((RowKind.UPDATE_BEFORE, 1, "a"), (RowKind.UPDATE_AFTER, 1, "a2"), (RowKind.DELETE, 2, "b"),
                          (RowKind.INSERT, 4, "d"), (RowKind.DELETE, 4, "d"), (RowKind.INSERT, 5, "e")))
    c2 = writer.prepare_commit(2)
    assert kv(postgres_server, name) == {}
    writer.commit([c1])
    assert kv(postgres_server, name) == {1: "a", 2: "b", 3: "c"}
    writer.commit([c2])
    assert kv(postgres_server, name) == {1: "a2", 3: "c", 5: "e"}
    writer.commit([c1, c2])  # again, as after a restore
    assert kv(postgres_server, name) == {1: "a2", 3: "c", 5: "e"}
    assert execute(postgres_server, f"SELECT count(*) FROM {name}__sqlstream_stage") == [(0,)]
    writer.close()


def test_upsert_commit_interrupted_between_commit_prepared_and_apply(postgres_server: str) -> None:
    name = kv_table(postgres_server)
    t = exactly_once(postgres_server, name, "half", columns=KV)
    first = sink(t, updating=True)
    first.write(*changes((RowKind.INSERT, 1, "x"), (RowKind.INSERT, 2, "y")))
    gid = first.prepare_commit(1)
    execute(postgres_server, f"COMMIT PREPARED '{gid}'")  # the commit's first step, then a crash
    first.close()
    assert kv(postgres_server, name) == {}
    second = sink(t, updating=True)
    second.commit([gid])  # restored
    assert kv(postgres_server, name) == {1: "x", 2: "y"}
    second.close()


def test_staged_changes_of_checkpoints_that_no_restore_kept_are_dropped(postgres_server: str) -> None:
    name = kv_table(postgres_server)
    t = exactly_once(postgres_server, name, "final", columns=KV)
    first = sink(t, updating=True)
    first.write(*changes((RowKind.INSERT, 1, "x")))
    c1 = first.prepare_commit(1)
    first.commit([c1])
    first.write(*changes((RowKind.UPDATE_AFTER, 1, "y")))
    final = first.prepare_commit(FINAL_CHECKPOINT)
    execute(postgres_server, f"COMMIT PREPARED '{final}'")  # crash inside the final commit
    first.close()
    second = sink(t, updating=True)  # restored from checkpoint 1: the final changes are replayed
    second.commit([c1])
    second.write(*changes((RowKind.UPDATE_AFTER, 1, "z")))
    assert execute(postgres_server, f"SELECT count(*) FROM {name}__sqlstream_stage") == [(0,)]
    second.commit([second.prepare_commit(FINAL_CHECKPOINT)])
    assert kv(postgres_server, name) == {1: "z"}
    second.close()


# ---------------------------------------------------------------------------
# SQL jobs: changelogs into upsert tables, append-only tables


# Two checkpoints are kept: with one, a checkpoint that completes while the next one is published
# fails the job (publishing prunes its directory while CheckpointCoordinator._complete measures it).
def changelog_job(url: str, name: str, guarantee: str, tmp: Path) -> str:
    return f"""
SET 'parallelism.default' = '2';
SET 'table.exec.batch-size' = '97';
SET 'execution.checkpointing.interval' = '100 ms';
SET 'state.checkpoints.dir' = '{tmp / "chk"}';
SET 'state.checkpoints.num-retained' = '2';
CREATE TABLE gen (seq BIGINT) WITH (
    'connector' = 'datagen', 'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '5999'
);
CREATE TABLE histogram (n BIGINT, keys BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH (
    'connector' = 'postgres', 'url' = '{url}', 'table-name' = '{name}',
    'sink.delivery-guarantee' = '{guarantee}', 'sink.transaction-id-prefix' = 'hist_{guarantee.replace("-", "_")}'
);
INSERT INTO histogram
SELECT n, COUNT(*) AS keys FROM (
    SELECT seq % 37 AS k, COUNT(*) AS n FROM gen WHERE seq < 40 * (seq % 37) GROUP BY seq % 37
) GROUP BY n;
"""


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_changelog_of_a_group_by_upserts_into_a_table_with_a_primary_key(
    postgres_server: str, guarantee: str, tmp_path: Path
) -> None:
    name = new_table(postgres_server, "n bigint PRIMARY KEY, keys bigint")
    Session().execute_script(changelog_job(postgres_server, name, guarantee, tmp_path))
    expected = duckdb_rows("""
        SELECT n, COUNT(*) FROM (SELECT seq % 37 AS k, COUNT(*) AS n FROM range(6000) r(seq)
                                 WHERE seq < 40 * (seq % 37) GROUP BY ALL) GROUP BY n""")
    assert sorted(execute(postgres_server, f"SELECT n, keys FROM {name}")) == expected
    assert not any(g.startswith("hist_") for g in prepared(postgres_server))


def test_updating_query_into_a_table_without_key_is_refused(postgres_server: str) -> None:
    name = new_table(postgres_server, "k bigint, n bigint")
    with pytest.raises(ConnectorError, match="has no primary key"):
        Session().execute_script(f"""
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE counts (k BIGINT, n BIGINT) WITH ('connector' = 'postgres', 'url' = '{postgres_server}', 'table-name' = '{name}');
INSERT INTO counts SELECT seq % 3, COUNT(*) FROM gen GROUP BY seq % 3;""")


def test_declared_key_must_be_a_unique_key_of_the_postgres_table(postgres_server: str) -> None:
    name = new_table(postgres_server, "k integer PRIMARY KEY, v text")
    with pytest.raises(ConnectorError, match=r"PRIMARY KEY \(v\) is not the primary key or a unique index"):
        sink(table(postgres_server, name, columns=KV, primary_key=("v",)), updating=True)


def test_append_job_with_all_types(postgres_server: str, tmp_path: Path) -> None:
    name = new_table(postgres_server, "i integer, b bigint, d double precision, m numeric(10, 2), s text, "
                                      "f boolean, day date, ts timestamp(3), tz timestamptz")
    data = tmp_path / "in.json"
    data.write_text(
        '{"i": 1, "b": 10000000000, "d": 1.5, "m": 12.34, "s": "a \\"q\\",\\tb", "f": true, "day": "2024-02-29", '
        '"ts": "2024-01-01 10:00:00.125", "ms": 1704103200125}\n'
        '{"i": null, "b": null, "d": null, "m": null, "s": "", "f": null, "day": null, "ts": null, "ms": null}\n'
    )
    Session().execute_script(f"""
CREATE TABLE src (i INT, b BIGINT, d DOUBLE, m DECIMAL(10, 2), s STRING, f BOOLEAN, day DATE, ts TIMESTAMP(3),
                  ms BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'json');
CREATE TABLE out (i INT, b BIGINT, d DOUBLE, m DECIMAL(10, 2), s STRING, f BOOLEAN, day DATE, ts TIMESTAMP(3),
                  tz TIMESTAMP_LTZ(3))
WITH ('connector' = 'jdbc', 'url' = 'jdbc:{postgres_server}', 'table-name' = '{name}');
INSERT INTO out SELECT i, b, d, m, s, f, day, ts, TO_TIMESTAMP_LTZ(ms, 3) FROM src;""")
    got = execute(postgres_server, f"SELECT * FROM {name} ORDER BY i NULLS LAST")
    assert got == [
        (1, 10000000000, 1.5, Decimal("12.34"), 'a "q",\tb', True, dt.date(2024, 2, 29),
         dt.datetime(2024, 1, 1, 10, 0, 0, 125000), dt.datetime(2024, 1, 1, 10, 0, 0, 125000, tzinfo=dt.UTC)),
        (None, None, None, None, "", None, None, None, None),
    ]
    back = run_sql(f"""
CREATE TABLE src (i INT, b BIGINT, d DOUBLE, m DECIMAL(10, 2), s STRING, f BOOLEAN, day DATE, ts TIMESTAMP(3),
                  tz TIMESTAMP_LTZ(3))
WITH ('connector' = 'postgres', 'url' = '{postgres_server}', 'table-name' = '{name}');
SELECT * FROM src;""")
    assert rows(back) == rows(pa.Table.from_pylist([dict(zip(back.column_names, r, strict=True)) for r in got],
                                                   schema=back.schema))


# ---------------------------------------------------------------------------
# source


def scan_table(url: str, n: int) -> str:
    name = new_table(url, "id integer PRIMARY KEY, name text, ts timestamp(3)")
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s)",
                        [tuple(r.values()) for r in reversed(rows_of(n).to_pylist())])
    return name


def source(t: TableDef, columns: list[str], subtask: int = 0, parallelism: int = 1, batch_size: int = 8192,
           position: Any = None) -> SourceReader:
    reader = PG.create_source(SourceContext(t, PG.validate(t), columns, subtask, parallelism, batch_size))
    if position is not None:
        reader.restore_position(decode(encode(position)))
    reader.open()
    return reader


def drain(reader: SourceReader) -> list[dict]:
    out: list[dict] = []
    while not reader.finished:
        batch = reader.read_batch()
        if batch is not None:
            out.extend(batch.to_pylist())
    reader.close()
    return out


def test_scan_reads_the_projected_columns_in_key_order(postgres_server: str) -> None:
    name = scan_table(postgres_server, 50)
    t = table(postgres_server, name, primary_key=("id",))
    got = drain(source(t, ["name", "id"], batch_size=7))
    assert got == [{"name": r["name"], "id": r["id"]} for r in rows_of(50).to_pylist()]


def test_scan_restores_a_position_and_splits_over_subtasks(postgres_server: str) -> None:
    name = scan_table(postgres_server, 60)
    t = table(postgres_server, name)  # no declared key: the table's own primary key orders the rows
    reader = source(t, ["id"], batch_size=8)
    seen = [r["id"] for r in reader.read_batch().to_pylist() + reader.read_batch().to_pylist()]
    position = reader.snapshot_position()
    reader.close()
    assert seen == list(range(16)) and position == 16
    assert [r["id"] for r in drain(source(t, ["id"], batch_size=8, position=position))] == list(range(16, 60))
    parts = [[r["id"] for r in drain(source(t, ["id"], i, 3, batch_size=5))] for i in range(3)]
    assert sorted(sum(parts, [])) == list(range(60)) and all(len(p) == 20 for p in parts)


def test_scan_through_sql_with_a_filter_and_count(postgres_server: str) -> None:
    name = scan_table(postgres_server, 100)
    ddl = f"""SET 'parallelism.default' = '2';
CREATE TABLE src (id INT, name STRING, ts TIMESTAMP(3)) WITH (
    'connector' = 'postgres', 'url' = '{postgres_server}', 'table-name' = '{name}');
"""
    got = run_sql(ddl + "SELECT id, ts FROM src WHERE id % 9 = 4;")
    data = pa.Table.from_batches([rows_of(100)])
    assert rows(got) == duckdb_rows("SELECT id, ts FROM data WHERE id % 9 = 4", data=data)
    assert rows(run_sql(ddl + "SELECT COUNT(*) FROM src;")) == [(100,)]


# ---------------------------------------------------------------------------
# lookup


def dim_table(url: str) -> str:
    name = new_table(url, "cur text PRIMARY KEY, rate integer, region text")
    execute(url, f"INSERT INTO {name} VALUES ('EUR', 100, 'eu'), ('USD', 90, 'us'), ('JPY', 1, 'asia')")
    return name


def lookup_table(url: str, name: str, **options: str) -> TableDef:
    cols = (ColumnDef("cur", parse_type("STRING")), ColumnDef("rate", parse_type("INT")),
            ColumnDef("region", parse_type("STRING")))
    return table(url, name, options, columns=cols)


def test_lookup_with_cache(postgres_server: str) -> None:
    name = dim_table(postgres_server)
    t = lookup_table(postgres_server, name, **{"lookup.cache.max-rows": "2", "lookup.cache.ttl": "300 ms"})
    clock = ManualClock()
    lookup = PG.create_lookup(LookupContext(t, PG.validate(t), ["cur"], ["rate", "region"], clock))
    assert lookup([("EUR",), ("CHF",)]) == {("EUR",): [(100, "eu")], ("CHF",): []}
    execute(postgres_server, f"UPDATE {name} SET rate = rate + 1")
    execute(postgres_server, f"INSERT INTO {name} VALUES ('CHF', 95, 'eu')")
    assert lookup([("EUR",), ("CHF",)]) == {("EUR",): [(100, "eu")], ("CHF",): []}  # cached, misses too
    assert lookup([("USD",)]) == {("USD",): [(91, "us")]}  # over max-rows: EUR, least recently used, goes
    assert lookup([("CHF",), ("EUR",)]) == {("CHF",): [], ("EUR",): [(101, "eu")]}
    clock.advance(299)
    assert lookup([("CHF",)]) == {("CHF",): []}  # cached 299 ms ago: still fresh
    clock.advance(1)
    assert lookup([("CHF",)]) == {("CHF",): [(95, "eu")]}  # expired 300 ms after it was loaded


def test_lookup_without_cache_reconnects_after_the_connection_dies(postgres_server: str) -> None:
    name = dim_table(postgres_server)
    t = lookup_table(postgres_server, name)
    lookup = PG.create_lookup(LookupContext(t, PG.validate(t), ["region", "rate"], ["cur"]))
    assert lookup([("eu", 100), ("us", 1), ("asia", 1)]) == {("eu", 100): [("EUR",)], ("asia", 1): [("JPY",)]}
    execute(postgres_server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE application_name = 'sqlstream' AND pid <> pg_backend_pid()")
    execute(postgres_server, f"UPDATE {name} SET region = 'us' WHERE cur = 'JPY'")
    assert lookup([("us", 1), ("eu", None)]) == {("us", 1): [("JPY",)]}


def test_lookup_join_in_sql(postgres_server: str, tmp_path: Path) -> None:
    name = dim_table(postgres_server)
    (tmp_path / "orders.csv").write_text("1,EUR,5\n2,USD,7\n3,CHF,9\n4,EUR,1\n")
    got = run_sql(f"""
CREATE TABLE orders (oid INT, cur STRING, amt INT, pt AS PROCTIME())
WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "orders.csv"}', 'format' = 'csv');
CREATE TABLE rates (cur STRING, rate INT, region STRING, PRIMARY KEY (cur) NOT ENFORCED)
WITH ('connector' = 'postgres', 'url' = '{postgres_server}', 'table-name' = '{name}', 'lookup.cache.max-rows' = '10');
SELECT o.oid, o.amt * r.rate AS price, r.region FROM orders AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.pt AS r ON o.cur = r.cur;""")
    assert rows(got) == [(1, 500, "eu"), (2, 630, "us"), (3, None, None), (4, 100, "eu")]


# ---------------------------------------------------------------------------
# errors and options


def test_missing_table_and_unreachable_server_are_reported(postgres_server: str) -> None:
    with pytest.raises(ConnectorError, match="PostgreSQL table 'no_such' does not exist in database"):
        sink(table(postgres_server, "no_such"))
    with pytest.raises(ConnectorError, match="column 'name' is not a column of PostgreSQL table"):
        sink(table(postgres_server, new_table(postgres_server, "id integer, ts timestamp")))
    started = time.monotonic()
    with psycopg.connect(postgres_server) as conn:
        port = conn.info.port
    closed = postgres_server.replace(f":{port}/", ":1/")
    with pytest.raises(ConnectorError, match="cannot connect to PostgreSQL at '127.0.0.1:1/sqlstream_test'"):
        sink(table(closed, "x"))
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": None}, "requires option 'url'"),
        ({"table-name": None}, "requires option 'table-name'"),
        ({"url": "jdbc:mysql://h/db"}, "is not a PostgreSQL URL"),
        ({"url": "postgresql://h/db?nonsense=1"}, "not a valid PostgreSQL URL or conninfo"),
        ({"table-name": "a.b.c"}, "must be 'table' or 'schema.table'"),
        ({"sink.delivery-guarantee": "exactly-once"}, "requires option 'sink.transaction-id-prefix'"),
        ({"sink.delivery-guarantee": "exactly-once", "sink.transaction-id-prefix": "a b"}, "must be 1 to 100"),
        ({"sink.delivery-guarantee": "none"}, "must be one of at-least-once, exactly-once"),
        ({"lookup.cache.max-rows": "0"}, "must be at least 1"),
        ({"lookup.max-retries": "-1"}, "must not be negative"),
        ({"lookup.cache.ttl": "soon"}, "is not a valid duration"),
        ({"tablename": "x"}, "Did you mean 'table-name'"),
    ],
)
def test_bad_options_give_connector_errors(options: dict[str, str | None], message: str) -> None:
    opts = {"connector": "postgres", "url": "postgresql://u@localhost:5432/db", "table-name": "t"}
    for key, value in options.items():
        if value is None:
            opts.pop(key)
        else:
            opts[key] = value
    with pytest.raises(ConnectorError, match=message):
        PG.validate(TableDef("t", COLUMNS, opts))


def test_options_are_typed_and_urls_of_every_form_accepted() -> None:
    for url in ("postgresql://u:p@h:5/db", "postgres://h/db", "jdbc:postgresql://h:5432/db?user=u&password=p",
                "host=h port=5 dbname=db"):
        opts = PG.validate(TableDef("t", COLUMNS, {"connector": "postgres", "url": url, "table-name": "s.t",
                                                    "lookup.cache.ttl": "10 s"}))
        assert opts["lookup.cache.ttl"] == 10_000
        assert opts["sink.delivery-guarantee"] == "at-least-once"
        assert opts["lookup.max-retries"] == 3
    assert get_connector("jdbc") is PG
