"""The postgres-cdc source against a real PostgreSQL (wal_level = logical): snapshot, changes, slot, restore.

A GROUP BY over the cdc table is written by key into a PostgreSQL result table (the
postgres upsert sink); once the job has caught up, that table must equal the source
table aggregated by PostgreSQL itself: a change lost or read twice shows as a wrong COUNT
or SUM.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from sqlstream.core.errors import ConnectorError, SqlStreamError
from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint.storage import completed_ids
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import RowKind
from tests.fault_harness import Job

pytest_plugins = ("tests.postgres_server",)

CDC = get_connector("postgres-cdc")
CATCH_UP_S = 60.0
AGGREGATE = "SELECT k, COUNT(*), SUM(v) FROM {src} GROUP BY k"


# The test server commits asynchronously; a slot decodes only flushed WAL, so the tests' own
# changes commit synchronously: a reader polled after a statement sees its change.
SYNC = "-c synchronous_commit=on"


def execute(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True, options=SYNC) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def cdc_ddl(url: str, src: str, slot: str, mode: str = "all", startup: str = "initial",
            **changed: str | None) -> str:
    """CREATE TABLE cdc over PostgreSQL table ``src``; ``changed`` options replace (None: drop) the usual ones."""
    params = conninfo_to_dict(url)
    options: dict[str, str | None] = {
        "connector": "postgres-cdc", "hostname": params["host"], "port": str(params["port"]),
        "username": params["user"], "database-name": params["dbname"], "schema-name": "public",
        "table-name": src, "slot.name": slot, "changelog-mode": mode, "scan.startup.mode": startup, **changed,
    }
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in options.items() if v is not None)
    return f"CREATE TABLE cdc (id INT, k INT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ({with_});"


def tables(url: str, full_identity: bool = True) -> tuple[str, str, str]:
    """A fresh source table, result table and slot name."""
    tag = uuid.uuid4().hex[:8]
    src, out = f"src_{tag}", f"agg_{tag}"
    execute(url, f"CREATE TABLE {src} (id int PRIMARY KEY, k int, v bigint)")
    if full_identity:
        execute(url, f"ALTER TABLE {src} REPLICA IDENTITY FULL")
    execute(url, f"CREATE TABLE {out} (k int PRIMARY KEY, n bigint, s bigint)")
    return src, out, f"slot_{tag}"


def job_sql(url: str, src: str, out: str, slot: str, mode: str, checkpoints: Path | None = None) -> str:
    config = ""
    if checkpoints is not None:
        config = (f"SET 'execution.checkpointing.interval' = '200ms';"
                  f"SET 'execution.checkpointing.dir' = '{checkpoints}';")
    return (
        config + cdc_ddl(url, src, slot, mode)
        + f"CREATE TABLE res (k INT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED) "
        f"WITH ('connector' = 'postgres', 'url' = '{url}', 'table-name' = '{out}');"
        + "INSERT INTO res SELECT k, COUNT(*), SUM(v) FROM cdc GROUP BY k;"
    )


@contextmanager
def running(sql: str, restore: Path | None = None) -> Iterator[Session]:
    """The job running in a thread until the block ends (then cancelled); its failure is raised."""
    session = Session()
    if restore is not None:
        session.restore_from = str(restore)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            session.execute_script(sql)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            failure.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield session
    finally:
        while thread.is_alive():
            executor = session.current_executor
            if executor is not None:
                executor.cancel()
            thread.join(0.05)
    if failure:
        raise failure[0]


def caught_up(url: str, src: str, out: str) -> None:
    """Wait until the result table holds PostgreSQL's own aggregate of the source table."""
    expected = sorted(execute(url, AGGREGATE.format(src=src)))
    deadline = time.monotonic() + CATCH_UP_S
    while True:
        got = sorted(execute(url, f"SELECT k, n, s FROM {out}"))
        if got == expected:
            return
        if time.monotonic() > deadline:
            assert got == expected
        time.sleep(0.1)


def changes(url: str, src: str, round_: int) -> None:
    """Inserts, updates (of the group key and the primary key too) and deletes, in three transactions."""
    base = 1000 * round_
    with psycopg.connect(url, options=SYNC) as conn, conn.transaction():
        for i in range(40):
            conn.execute(f"INSERT INTO {src} VALUES ({base + i}, {i % 5}, {i})")
    with psycopg.connect(url, options=SYNC) as conn, conn.transaction():
        conn.execute(f"UPDATE {src} SET v = v + 7, k = (k + 1) % 6 WHERE id % 3 = 0")
        conn.execute(f"UPDATE {src} SET id = id + 500 WHERE id % 7 = 2")  # primary keys change
    with psycopg.connect(url, options=SYNC) as conn, conn.transaction():
        conn.execute(f"DELETE FROM {src} WHERE id % 4 = 1")


def confirmed_flush(url: str, slot: str) -> str | None:
    found = execute(url, f"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{slot}'")
    return found[0][0] if found else None


def lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@pytest.mark.parametrize("mode", ["all", "upsert"])
def test_snapshot_then_changes_aggregate_as_postgres_does(postgres_server: str, mode: str) -> None:
    url = postgres_server
    src, out, slot = tables(url, full_identity=mode == "all")
    execute(url, f"INSERT INTO {src} SELECT i, i % 4, i * 10 FROM generate_series(1, 50) i")
    try:
        with running(job_sql(url, src, out, slot, mode)):
            caught_up(url, src, out)  # the snapshot
            changes(url, src, 1)
            caught_up(url, src, out)
            changes(url, src, 2)
            execute(url, f"DELETE FROM {src} WHERE k = 2")  # a group disappears: its row is deleted
            caught_up(url, src, out)
    finally:
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_restore_mid_stream_gives_the_same_result_and_the_slot_moves_only_on_checkpoints(
    postgres_server: str, tmp_path: Path
) -> None:
    url = postgres_server
    src, out, slot = tables(url)
    execute(url, f"INSERT INTO {src} SELECT i, i % 4, i FROM generate_series(1, 30) i")
    sql = job_sql(url, src, out, slot, "all", tmp_path / "chk")
    try:
        with running(sql) as session:
            caught_up(url, src, out)
            start = lsn(confirmed_flush(url, slot))
            changes(url, src, 1)
            caught_up(url, src, out)
            # only a completed checkpoint moves the slot on: wait for one after the changes
            deadline = time.monotonic() + CATCH_UP_S
            while lsn(confirmed_flush(url, slot)) <= start:
                assert time.monotonic() < deadline, "the slot never advanced"
                time.sleep(0.05)
            assert session.current_executor is not None
            changes(url, src, 2)  # cancelled while or before these are read
        changes(url, src, 3)  # while the job is down
        with running(sql, restore=tmp_path / "chk"):
            caught_up(url, src, out)
    finally:
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_the_slot_is_not_advanced_without_a_completed_checkpoint(postgres_server: str) -> None:
    url = postgres_server
    src, out, slot = tables(url)
    execute(url, f"INSERT INTO {src} VALUES (1, 1, 1)")
    try:
        with running(job_sql(url, src, out, slot, "all")):  # no checkpointing
            caught_up(url, src, out)
            created = confirmed_flush(url, slot)
            changes(url, src, 1)
            caught_up(url, src, out)
            assert confirmed_flush(url, slot) == created  # the changes stay in the slot
    finally:
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"decoding.plugin.name": "wal2json"}, "only 'pgoutput'"),
        ({"scan.startup.mode": "earliest-offset"}, "must be one of initial, latest-offset"),
        ({"changelog-mode": "retract"}, "must be one of all, upsert"),
        ({"slot.name": "Bad-Slot"}, "lower-case letters"),
        ({"debezium.poll.interval.ms": "-1"}, "must not be negative"),
        ({"hostname": None}, "requires option 'hostname'"),
    ],
)
def test_bad_options_are_refused_at_create_table(options: dict[str, str | None], message: str) -> None:
    ddl = cdc_ddl("postgresql://u@127.0.0.1:5432/db", "t", "s", **options)
    with pytest.raises(ConnectorError, match=message):
        Session().execute_script(ddl)


def test_a_primary_key_is_required() -> None:
    ddl = cdc_ddl("postgresql://u@127.0.0.1:5432/db", "t", "s").replace(", PRIMARY KEY (id) NOT ENFORCED", "")
    with pytest.raises(ConnectorError, match="require a PRIMARY KEY"):
        Session().execute_script(ddl)


def _select(url: str, src: str, slot: str, mode: str = "all") -> None:
    Session().execute_script(cdc_ddl(url, src, slot, mode) + "SELECT * FROM cdc;")


def test_an_unreachable_server_is_named(postgres_server: str) -> None:
    port = conninfo_to_dict(postgres_server)["port"]
    url = postgres_server.replace(f":{port}/", ":1/")
    with pytest.raises(SqlStreamError, match=r"cannot connect to PostgreSQL at '127.0.0.1:1/"):
        _select(url, "t", "s")


def test_a_missing_table_is_named(postgres_server: str) -> None:
    with pytest.raises(SqlStreamError, match="PostgreSQL table 'public.no_such' does not exist"):
        _select(postgres_server, "no_such", "s")


def test_changelog_mode_all_needs_replica_identity_full(postgres_server: str) -> None:
    src, _, slot = tables(postgres_server, full_identity=False)
    with pytest.raises(SqlStreamError, match="REPLICA IDENTITY FULL"):
        _select(postgres_server, src, slot)


def reader(url: str, src: str, slot: str, position: int | None = None, mode: str = "all",
           startup: str = "initial") -> SourceReader:
    """A source reading ``src`` that polls the slot on every read_batch."""
    session = Session()
    session.execute_script(cdc_ddl(url, src, slot, mode, startup, **{"debezium.poll.interval.ms": "0"}))
    table = session.catalog.get("cdc")
    ctx = SourceContext(table, CDC.validate(table), ["id", "k", "v"])
    source = CDC.create_source(ctx)
    if position is not None:
        source.restore_position(position)
    source.open()
    return source


def read_all(source: SourceReader) -> list[tuple[str, tuple]]:
    """(kind, row) of everything the reader has now (it polls the slot once per call)."""
    out: list[tuple[str, tuple]] = []
    for _ in range(3):
        batch = source.read_batch()
        if batch is None:
            continue
        kinds = source.current_kinds
        shorts = ["+I"] * batch.num_rows if kinds is None else [RowKind(k).short for k in kinds.to_pylist()]
        out += list(zip(shorts, [tuple(r.values()) for r in batch.to_pylist()], strict=True))
    return out


def test_reader_emits_before_images_resumes_after_its_position_and_advances_the_slot_on_completion(
    postgres_server: str,
) -> None:
    url = postgres_server
    src, _, slot = tables(url)
    execute(url, f"INSERT INTO {src} VALUES (1, 1, 10), (2, 2, 20)")
    first = reader(url, src, slot)
    try:
        assert read_all(first) == [("+I", (1, 1, 10)), ("+I", (2, 2, 20))]  # the snapshot
        execute(url, f"UPDATE {src} SET v = 11 WHERE id = 1")
        assert read_all(first) == [("-U", (1, 1, 10)), ("+U", (1, 1, 11))]
        position = first.snapshot_position()
        first.checkpoint_taken(1)
        execute(url, f"DELETE FROM {src} WHERE id = 2")
        assert read_all(first) == [("-D", (2, 2, 20))]
        created = confirmed_flush(url, slot)
        first.checkpoint_taken(2)
        assert confirmed_flush(url, slot) == created  # taken is not completed
        first.notify_checkpoint_complete(1)
        assert lsn(confirmed_flush(url, slot)) == position  # checkpoint 1's position, not the newest
    finally:
        first.close()
    # restored at checkpoint 1: the delete after it again, nothing before it
    second = reader(url, src, slot, position)
    try:
        assert read_all(second) == [("-D", (2, 2, 20))]
    finally:
        second.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_upsert_mode_emits_new_images_keyed_deletes_and_deletes_a_changed_key(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url, full_identity=False)
    source = reader(url, src, slot, mode="upsert")
    try:
        assert read_all(source) == []  # an empty snapshot
        execute(url, f"INSERT INTO {src} VALUES (1, 1, 10)")
        execute(url, f"UPDATE {src} SET v = 11 WHERE id = 1")
        execute(url, f"UPDATE {src} SET id = 2 WHERE id = 1")  # the key changes: the old key is deleted
        execute(url, f"DELETE FROM {src} WHERE id = 2")
        assert read_all(source) == [("+I", (1, 1, 10)), ("+U", (1, 1, 11)), ("-D", (1, None, None)),
                                    ("+U", (2, 1, 11)), ("-D", (2, None, None))]
    finally:
        source.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_a_restore_behind_the_slot_is_refused_as_a_loss(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url)
    first = reader(url, src, slot)
    try:
        read_all(first)
        position = first.snapshot_position()
        first.checkpoint_taken(1)
        execute(url, f"INSERT INTO {src} VALUES (1, 1, 1)")
        read_all(first)
        first.checkpoint_taken(2)
        first.notify_checkpoint_complete(2)
    finally:
        first.close()
    second = reader(url, src, slot, position)
    try:
        with pytest.raises(ConnectorError, match="past the restored position"):
            second.read_batch()
    finally:
        second.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_truncate_fails_clearly(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url)
    source = reader(url, src, slot)
    try:
        read_all(source)
        execute(url, f"TRUNCATE {src}")
        with pytest.raises(ConnectorError, match="was truncated"):
            read_all(source)
    finally:
        source.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_latest_offset_skips_the_existing_rows(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url)
    execute(url, f"INSERT INTO {src} VALUES (1, 1, 10)")
    source = reader(url, src, slot, startup="latest-offset")
    try:
        assert read_all(source) == []
        execute(url, f"INSERT INTO {src} VALUES (2, 2, 20)")
        assert read_all(source) == [("+I", (2, 2, 20))]
    finally:
        source.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_an_empty_poll_waits_the_poll_interval_on_the_clock(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url)
    session = Session()
    session.execute_script(cdc_ddl(url, src, slot, **{"debezium.poll.interval.ms": "1000"}))
    table = session.catalog.get("cdc")
    clock = ManualClock()
    source = CDC.create_source(SourceContext(table, CDC.validate(table), ["id", "k", "v"], clock=clock))
    source.open()
    try:
        source.read_batch()  # the (empty) snapshot
        assert source.read_batch() is None  # nothing new: the next poll waits 1 s
        execute(url, f"INSERT INTO {src} VALUES (1, 1, 1)")
        assert source.read_batch() is None
        clock.advance(1000)
        batch = source.read_batch()
        assert batch is not None and batch.to_pylist() == [{"id": 1, "k": 1, "v": 1}]
    finally:
        source.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_a_server_without_logical_wal_is_named(postgres_server_without_logical_wal: str) -> None:
    url = postgres_server_without_logical_wal
    src, _, slot = tables(url)
    with pytest.raises(SqlStreamError, match="wal_level = 'replica'.*needs wal_level = logical"):
        _select(url, src, slot)


def test_text_values_convert_to_the_declared_types_in_snapshot_and_changes(postgres_server: str) -> None:
    url = postgres_server
    tag = uuid.uuid4().hex[:8]
    src, slot = f"types_{tag}", f"slot_{tag}"
    execute(url, f"CREATE TABLE {src} (id int PRIMARY KEY, s text, b boolean, d numeric(10, 2), f double precision, "
                 "day date, ts timestamp(3), tz timestamptz)")
    execute(url, f"ALTER TABLE {src} REPLICA IDENTITY FULL")
    row = "'x y', true, 12.34, 0.5, '2024-02-29', '2024-02-29 10:11:12.345', '2024-02-29 10:11:12+02'"
    execute(url, f"INSERT INTO {src} VALUES (1, {row}), (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    params = conninfo_to_dict(url)
    session = Session()
    session.execute_script(
        "CREATE TABLE cdc (id INT, s STRING, b BOOLEAN, d DECIMAL(10, 2), f DOUBLE, day DATE, ts TIMESTAMP(3), "
        "tz TIMESTAMP_LTZ(3), PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'postgres-cdc', "
        f"'hostname' = '{params['host']}', 'port' = '{params['port']}', 'username' = '{params['user']}', "
        f"'database-name' = '{params['dbname']}', 'schema-name' = 'public', 'table-name' = '{src}', "
        f"'slot.name' = '{slot}', 'debezium.poll.interval.ms' = '0')"
    )
    table = session.catalog.get("cdc")
    columns = [c.name for c in table.physical_columns]
    source = CDC.create_source(SourceContext(table, CDC.validate(table), columns))
    source.open()
    try:
        expected = (1, "x y", True, Decimal("12.34"), 0.5, dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 10, 11, 12, 345000),
                    dt.datetime(2024, 2, 29, 8, 11, 12, tzinfo=dt.UTC))
        nulls = (2, None, None, None, None, None, None, None)
        assert read_all(source) == [("+I", expected), ("+I", nulls)]
        execute(url, f"DELETE FROM {src} WHERE id = 1")
        execute(url, f"INSERT INTO {src} VALUES (3, {row})")
        assert read_all(source) == [("-D", expected), ("+I", (3, *expected[1:]))]
    finally:
        source.close()
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")


def test_upsert_mode_needs_the_primary_key_to_be_the_replica_identity(postgres_server: str) -> None:
    url = postgres_server
    src, _, slot = tables(url, full_identity=False)
    ddl = cdc_ddl(url, src, slot, "upsert").replace("PRIMARY KEY (id)", "PRIMARY KEY (k)")
    with pytest.raises(SqlStreamError, match=r"PRIMARY KEY \(k\) must be the replica identity .* \(id\)"):
        Session().execute_script(ddl + "SELECT * FROM cdc;")


@pytest.mark.slow
def test_sigkilled_jobs_restored_from_their_checkpoints_lose_and_repeat_nothing(
    postgres_server: str, tmp_path: Path
) -> None:
    """Real `sqlstream run` processes SIGKILLed while changes arrive, each restored from the newest
    completed checkpoint: the aggregate ends equal to PostgreSQL's own."""
    url = postgres_server
    src, out, slot = tables(url)
    execute(url, f"INSERT INTO {src} SELECT i, i % 4, i FROM generate_series(1, 30) i")
    job = Job(tmp_path, job_sql(url, src, out, slot, "all", tmp_path / "chk"))
    rng = random.Random(17)
    try:
        for round_ in range(1, 5):
            proc = job.start(job.chk if completed_ids(job.chk) else None)
            try:
                changes(url, src, round_)
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=rng.uniform(1.0, 3.0))
                assert proc.returncode is None, proc.stderr.read() if proc.stderr else ""
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        proc = job.start(job.chk)
        try:
            caught_up(url, src, out)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    finally:
        execute(url, f"SELECT pg_drop_replication_slot('{slot}')")
