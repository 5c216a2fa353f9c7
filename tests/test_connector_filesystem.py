"""The filesystem connector driven through the Connector interface."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError, DataError, JobError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.connectors.base import SinkContext, SourceContext, SourceReader
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.operators.sink import SinkOperator
from tests.harness import OperatorHarness

FS = get_connector("filesystem")
COLUMNS = (
    ColumnDef("id", parse_type("INT")),
    ColumnDef("name", parse_type("STRING")),
    ColumnDef("ts", parse_type("TIMESTAMP(3)")),
    ColumnDef("doubled", parse_type("INT"), computed="id * 2"),
)


def table(path: Path | str, fmt: str, **options: str) -> TableDef:
    opts = {"connector": "filesystem", "path": str(path), "format": fmt}
    if fmt == "csv":  # these tests' empty CSV fields mean NULL, which Flink reads only with this option
        opts["csv.null-literal"] = ""
    opts.update(options)
    return TableDef("t", COLUMNS, opts)


def rows_of(n: int, start: int = 0) -> pa.RecordBatch:
    schema = table("x", "csv").physical_schema
    return pa.RecordBatch.from_pylist(
        [
            {"id": i, "name": None if i % 7 == 3 else f"n{i}",
             "ts": dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=250 * i)}
            for i in range(start, start + n)
        ],
        schema=schema,
    )


def source(t: TableDef, columns: list[str] | None = None, batch_size: int = 8192,
           subtask: int = 0, parallelism: int = 1) -> SourceReader:
    opts = FS.validate(t)
    cols = [c.name for c in t.physical_columns] if columns is None else columns
    return FS.create_source(SourceContext(t, opts, cols, subtask, parallelism, batch_size))


def drain(reader: SourceReader) -> pa.Table:
    batches = []
    while not reader.finished:
        b = reader.read_batch()
        if b is not None:
            batches.append(b)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def read_all(t: TableDef, **kwargs: object) -> pa.Table:
    """Open a new reader of ``t`` and read it to the end."""
    reader = source(t, **kwargs)  # type: ignore[arg-type]
    reader.open()
    return drain(reader)


def write_files(tmp_path: Path, fmt: str, counts: list[int], committed: bool = True) -> Path:
    """Files of ``counts`` rows each, written through the sink (so every format is covered)."""
    out = tmp_path / "data"
    start = 0
    for n in counts:
        t = table(out, fmt)
        sink = FS.create_sink(SinkContext(t, FS.validate(t), t.physical_schema))
        sink.open()
        sink.write(rows_of(n, start), None)
        staged = sink.prepare_commit(1)
        if committed:
            sink.commit([staged])
        sink.close()
        start += n
    return out


def visible(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith((".", "_")))


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "avro", "orc"])
def test_sink_then_source_round_trip(tmp_path: Path, fmt: str) -> None:
    out = write_files(tmp_path, fmt, [10, 5, 20])
    assert len(visible(out)) == 3
    got = read_all(table(out, fmt))
    # Part files are named by random uuids, so the order of files is not the write order.
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == rows_of(35).to_pylist()


def test_directory_listing_order_hidden_files_and_recursion(tmp_path: Path) -> None:
    (tmp_path / "b.csv").write_text("2,b,\n")
    (tmp_path / "a.csv").write_text("1,a,\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.csv").write_text("3,c,\n")
    (tmp_path / ".hidden.csv").write_text("99,x,\n")
    (tmp_path / "_SUCCESS").write_text("junk that is not csv at all")
    (tmp_path / "_tmp").mkdir()
    (tmp_path / "_tmp" / "d.csv").write_text("98,x,\n")
    got = read_all(table(tmp_path, "csv"))
    assert got.column("id").to_pylist() == [1, 2, 3]


def test_single_file_path(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("1,a,2024-01-01 00:00:00.000\n2,b,\n")
    got = read_all(table(path, "csv"))
    assert got.to_pylist() == [
        {"id": 1, "name": "a", "ts": dt.datetime(2024, 1, 1)},
        {"id": 2, "name": "b", "ts": None},
    ]


def test_files_are_split_among_subtasks(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.csv").write_text(f"{i},x,\n")
    ids = [read_all(table(tmp_path, "csv"), subtask=s, parallelism=2).column("id").to_pylist()
           for s in range(2)]
    assert ids == [[0, 2, 4], [1, 3]]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "avro", "orc"])
def test_projection_and_batch_size(tmp_path: Path, fmt: str) -> None:
    out = write_files(tmp_path, fmt, [25])
    reader = source(table(out, fmt), columns=["ts", "id"], batch_size=10)
    reader.open()
    sizes = []
    while not reader.finished:
        b = reader.read_batch()
        if b is not None:
            assert b.schema.names == ["ts", "id"]
            sizes.append(b.num_rows)
    assert sizes == [10, 10, 5]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_file_larger_than_the_format_block_leaves_in_full_batches(tmp_path: Path, fmt: str) -> None:
    # CSV and JSON decode 1 MB blocks (here about 25 k rows); the source still emits batch_size rows
    out = write_files(tmp_path, fmt, [60_000])
    assert sum(f.stat().st_size for f in out.iterdir()) > 2 << 20
    rows = read_all(table(out, fmt), batch_size=50_000)
    assert [b.num_rows for b in rows.to_batches()] == [50_000, 10_000]
    assert rows.column("id").to_pylist() == list(range(60_000))


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "avro", "orc"])
def test_snapshot_and_restore_at_every_point(tmp_path: Path, fmt: str) -> None:
    out = write_files(tmp_path, fmt, [7, 1, 12])
    t = table(out, fmt)
    full = read_all(t, batch_size=3)
    assert full.num_rows == 20
    for stop_after in range(0, 9):
        first = source(t, batch_size=3)
        first.open()
        head = []
        for _ in range(stop_after):
            b = first.read_batch()
            if b is not None:
                head.append(b)
        position = json.loads(json.dumps(first.snapshot_position()))
        first.close()
        second = source(t, batch_size=4)
        second.restore_position(position)
        second.open()
        tail = drain(second)
        combined = pa.Table.from_batches(head + tail.to_batches(), schema=full.schema)
        assert combined.equals(full), f"restored after {stop_after} batches"


def test_restore_keeps_the_parse_error_count(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("1,a,\nbad,b,\n3,c,\n")
    (tmp_path / "b.csv").write_text("4,d\n5,e,\n")
    t = table(tmp_path, "csv", **{"csv.ignore-parse-errors": "true"})
    reader = source(t, batch_size=100)
    reader.open()
    # As in Flink, a field that does not parse is NULL and its record is kept.
    assert reader.read_batch().column("id").to_pylist() == [1, None, 3]
    assert reader.parse_errors == 1
    position = reader.snapshot_position()
    restored = source(t)
    restored.restore_position(position)
    restored.open()
    assert drain(restored).column("id").to_pylist() == [5]
    assert restored.parse_errors == 2


def _file_with_bad_records(path: Path, rows: int, every: int) -> int:
    """A CSV file of ``rows`` records, every ``every``-th one short of a field; returns how many."""
    lines = [f"{i},n{i}," if i % every else f"{i},short" for i in range(1, rows + 1)]
    path.write_text("\n".join(lines) + "\n")
    return rows // every


@pytest.mark.parametrize("stop_after", [1, 4, 11])
def test_the_parse_error_count_covers_what_was_handed_on_not_what_was_decoded_ahead(
        tmp_path: Path, stop_after: int) -> None:
    # three 1 MB blocks: the fetcher thread decodes ahead of the batches handed on, and a restore
    # counts again only what comes after the checkpointed position
    bad = _file_with_bad_records(tmp_path / "a.csv", 150_000, 1000)
    assert (tmp_path / "a.csv").stat().st_size > 2 << 20
    t = table(tmp_path, "csv", **{"csv.ignore-parse-errors": "true"})
    reader = source(t, batch_size=5000)
    reader.open()
    head = [reader.read_batch() for _ in range(stop_after)]
    position = json.loads(json.dumps(reader.snapshot_position()))
    assert position["parse_errors"] < bad
    reader.close()
    restored = source(t, batch_size=5000)
    restored.restore_position(position)
    restored.open()
    rest = drain(restored)
    assert sum(b.num_rows for b in head) + rest.num_rows == 150_000 - bad
    assert restored.parse_errors == bad


def test_closing_mid_file_ends_the_fetcher_thread(tmp_path: Path) -> None:
    _file_with_bad_records(tmp_path / "a.csv", 150_000, 10**9)  # none bad
    reader = source(table(tmp_path, "csv"), batch_size=1000)
    reader.open()
    reader.read_batch()
    assert any(th.name == "sqlstream-file-fetcher" for th in threading.enumerate())
    reader.close()
    assert not any(th.name == "sqlstream-file-fetcher" for th in threading.enumerate())


def test_malformed_file_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("1,a,\n2,b,\n3,c,\n4,d,\n5,e,\n6,f,\n7,g,oops\n")
    reader = source(table(tmp_path, "csv"))
    reader.open()
    with pytest.raises(DataError, match=r"x.csv line 7: column 'ts': cannot parse 'oops' as TIMESTAMP\(3\)"):
        drain(reader)


def test_missing_path(tmp_path: Path) -> None:
    reader = source(table(tmp_path / "y.csv", "csv"))
    with pytest.raises(ConnectorError) as e:
        reader.open()
    assert str(e.value) == f"table 't': path '{tmp_path / 'y.csv'}' does not exist"


def test_option_validation(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="Did you mean 'csv.field-delimiter'"):
        FS.validate(table(tmp_path, "csv", **{"csv.field-delimitr": ";"}))
    with pytest.raises(ConnectorError, match="requires option 'path'"):
        FS.validate(TableDef("t", COLUMNS, {"connector": "filesystem", "format": "csv"}))
    with pytest.raises(ConnectorError, match="requires option 'format'"):
        FS.validate(TableDef("t", COLUMNS, {"connector": "filesystem", "path": "x"}))
    with pytest.raises(ConnectorError, match="must be one of csv, json, parquet, avro, raw, orc"):
        FS.validate(table(tmp_path, "xml"))
    with pytest.raises(ConnectorError, match="The 'protobuf' format is not supported for the 'filesystem' connector"):
        FS.validate(table(tmp_path, "protobuf"))
    with pytest.raises(ConnectorError, match="'raw' format only supports single physical column"):
        FS.validate(table(tmp_path, "raw"))
    with pytest.raises(ConnectorError, match="applies to format 'avro'"):
        FS.validate(table(tmp_path, "orc", **{"avro.codec": "xz"}))
    with pytest.raises(ConnectorError, match="applies to format 'json'"):
        FS.validate(table(tmp_path, "csv", **{"json.fail-on-missing-field": "true"}))
    with pytest.raises(ConnectorError, match="must be a single character"):
        FS.validate(table(tmp_path, "csv", **{"csv.field-delimiter": "ab"}))
    with pytest.raises(ConnectorError, match="sink.rolling-policy.file-size"):
        FS.validate(table(tmp_path, "csv", **{"sink.rolling-policy.file-size": "lots"}))
    with pytest.raises(ConnectorError, match="not a valid duration"):
        FS.validate(table(tmp_path, "csv", **{"source.monitor-interval": "often"}))
    typed = FS.validate(table(tmp_path, "CSV", **{"source.monitor-interval": "2 s"}))
    assert typed["format"] == "csv" and typed["source.monitor-interval"] == 2000


def test_monitored_directory_is_unbounded_and_picks_up_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("1,a,\n")
    reader = source(table(tmp_path, "csv", **{"source.monitor-interval": "10 ms"}))
    reader.open()
    assert not reader.bounded
    assert reader.read_batch().column("id").to_pylist() == [1]
    assert reader.read_batch() is None and not reader.finished
    # A new file appears atomically (as the sink does it): under a hidden name, then renamed.
    (tmp_path / ".b.csv.tmp").write_text("2,b,\n")
    os.replace(tmp_path / ".b.csv.tmp", tmp_path / "b.csv")
    deadline = time.monotonic() + 5
    got = None
    while got is None and time.monotonic() < deadline:
        got = reader.read_batch()
        time.sleep(0.01)
    assert got is not None and got.column("id").to_pylist() == [2]
    position = reader.snapshot_position()
    assert position["finished"] == ["a.csv"]
    assert (position["current"], position["offset"]) == ("b.csv", 1)


# -- sink --------------------------------------------------------------------


def sink_for(path: Path, fmt: str, subtask: int = 0, **options: str):
    t = table(path, fmt, **options)
    sink = FS.create_sink(SinkContext(t, FS.validate(t), t.physical_schema, subtask, 2))
    sink.open()
    return sink


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "avro", "orc"])
def test_two_phase_commit(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    sink = sink_for(out, fmt, subtask=1)
    sink.write(rows_of(5), None)
    assert visible(out) == []
    staged = json.loads(json.dumps(sink.prepare_commit(1)))
    assert visible(out) == []
    assert len(staged["files"]) == 1
    inprogress, final = staged["files"][0]
    lineage = staged["lineage"]
    assert os.path.basename(inprogress).startswith(".part-1-") and inprogress.endswith(f".{fmt}.{lineage}.inprogress")
    assert os.path.basename(final) == os.path.basename(inprogress)[1 : -len(f".{lineage}.inprogress")]
    sink.commit([staged])
    assert visible(out) == [os.path.basename(final)]
    sink.commit([staged])  # idempotent: a restored job may commit again
    assert visible(out) == [os.path.basename(final)]
    assert read_all(table(out, fmt)).to_pylist() == rows_of(5).to_pylist()
    assert sink.prepare_commit(2) == {"files": [], "lineage": lineage}  # nothing written since
    sink.close()


def test_commit_after_restore_by_another_writer(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = sink_for(out, "csv")
    first.write(rows_of(3), None)
    staged = first.prepare_commit(7)
    # The job fails here; a new writer commits what the completed checkpoint staged.
    second = sink_for(out, "csv")
    second.commit([staged])
    assert len(visible(out)) == 1


def test_abort_and_close_leave_nothing_visible(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = sink_for(out, "json")
    sink.write(rows_of(4), None)
    staged = sink.prepare_commit(1)
    sink.abort([staged])
    assert os.listdir(out) == []
    sink.write(rows_of(4), None)
    sink.close()
    assert os.listdir(out) == []


def test_close_keeps_staged_files_hidden(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = sink_for(out, "csv")
    sink.write(rows_of(4), None)
    staged = sink.prepare_commit(1)
    sink.write(rows_of(4, 4), None)
    sink.close()
    assert visible(out) == [] and len(os.listdir(out)) == 1
    sink_for(out, "csv").commit([staged])
    assert read_all(table(out, "csv")).column("id").to_pylist() == [0, 1, 2, 3]


def test_in_progress_files_of_a_killed_attempt_are_deleted_when_the_restored_writer_commits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    killed = sink_for(out, "csv")
    killed.write(rows_of(2), None)
    restored_from = killed.prepare_commit(1)  # checkpoint 1 completes; the process dies before committing it
    killed.write(rows_of(2, 2), None)
    killed.prepare_commit(2)  # checkpoint 2 never completes
    killed.write(rows_of(2, 4), None)  # being written at the kill (no close, no abort)
    other_job = sink_for(out, "csv")  # another job writing the same directory: not ours to delete
    other_job.write(rows_of(1, 9), None)
    theirs = other_job.prepare_commit(1)
    first_restore = sink_for(out, "csv")  # a first restore dies too, after staging a file
    first_restore.restore_committed([restored_from])
    first_restore.write(rows_of(1, 6), None)
    first_restore.prepare_commit(2)
    assert len(os.listdir(out)) == 5 and visible(out) == []
    restored = sink_for(out, "csv")
    restored.restore_committed([restored_from])
    restored.commit([restored_from])
    assert sorted(os.listdir(out)) == sorted([os.path.basename(restored_from["files"][0][1]),
                                              os.path.basename(theirs["files"][0][0])])
    restored.write(rows_of(1, 7), None)
    restored.commit([restored.prepare_commit(2)])
    other_job.commit([theirs])
    assert sorted(read_all(table(out, "csv")).column("id").to_pylist()) == [0, 1, 7, 9]
    assert [n for n in os.listdir(out) if n.startswith(".")] == []


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_rolling_by_file_size(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    sink = sink_for(out, fmt, **{"sink.rolling-policy.file-size": "1 b"})
    for i in range(3):
        sink.write(rows_of(2, 2 * i), None)
    staged = sink.prepare_commit(1)
    assert len(staged["files"]) == 3
    sink.commit([staged])
    assert len(visible(out)) == 3
    got = read_all(table(out, fmt))
    assert sorted(got.column("id").to_pylist()) == list(range(6))


def test_sink_is_append_only(tmp_path: Path) -> None:
    assert FS.accepts_updates is False
    sink = sink_for(tmp_path / "out", "csv")
    sink.write(rows_of(2), pa.array([0, 0], pa.int8()))
    with pytest.raises(ConnectorError, match="append-only"):
        sink.write(rows_of(2), pa.array([0, 1], pa.int8()))


def _hidden_files(out: Path) -> list[str]:
    return sorted(n for n in os.listdir(out) if n.startswith("."))


def test_a_failed_attempt_aborts_the_pre_commit_of_a_checkpoint_that_never_completed(tmp_path: Path) -> None:
    """The committer aborts on failure: the staged part file of an incomplete checkpoint is deleted.

    The sink pre-commits (stages its part file) when the savepoint's barrier reaches it; the
    savepoint then fails (its directory is a file), which fails the job before the savepoint
    completes.  No restore can commit that part file, so it must not be left behind.
    """
    out, not_a_dir = tmp_path / "out", tmp_path / "occupied"
    not_a_dir.write_text("")
    script = f"""
        SET 'parallelism.default' = '1';
        CREATE TABLE gen (seq BIGINT) WITH (
            'connector' = 'datagen', 'rows-per-second' = '200', 'fields.seq.kind' = 'random');
        CREATE TABLE out (seq BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
        INSERT INTO out SELECT seq FROM gen;
    """
    session = Session()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            session.execute_script(script)
        except BaseException as e:  # noqa: BLE001 - checked below
            errors.append(e)

    job = threading.Thread(target=run, daemon=True)
    job.start()
    deadline = time.monotonic() + 60
    while not (out.is_dir() and _hidden_files(out)) and time.monotonic() < deadline:
        time.sleep(0.02)  # the sink has written rows into an in-progress part file
    executor = session.current_executor
    assert executor is not None and _hidden_files(out), errors
    executor.savepoint(not_a_dir)
    job.join(60)
    assert not job.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], JobError), errors
    assert os.listdir(out) == []  # staged (aborted) and unstaged (closed) part files are gone


def test_abort_on_failure_keeps_what_a_completed_checkpoint_holds(tmp_path: Path) -> None:
    """A pre-commit of a completed checkpoint whose commit never ran stays staged, for the restore to commit."""
    out = tmp_path / "out"
    t = table(out, "csv")
    committer = OperatorHarness(SinkOperator(FS.create_sink(SinkContext(t, FS.validate(t), t.physical_schema))), None)
    committer.process_batch(rows_of(3))
    held = committer.snapshot(1)  # checkpoint 1 completes, but the job fails before the commit
    committer.process_batch(rows_of(2, 3))
    committer.snapshot(2)  # checkpoint 2 never completes
    assert len(_hidden_files(out)) == 2
    committer.operator.discard_uncommitted(1)
    committer.close()
    assert len(_hidden_files(out)) == 1 and visible(out) == []
    # the restore commits what checkpoint 1 staged
    OperatorHarness(SinkOperator(FS.create_sink(SinkContext(t, FS.validate(t), t.physical_schema))), None, restore=held)
    assert read_all(table(out, "csv")).column("id").to_pylist() == [0, 1, 2]


def test_metadata_columns_read_the_file_of_each_row(tmp_path: Path) -> None:
    out = write_files(tmp_path, "parquet", [2, 3])
    files = sorted(p for p in out.iterdir())
    script = f"""
        CREATE TABLE t (
            id INT, name STRING, ts TIMESTAMP(3),
            p STRING METADATA FROM 'file.path' VIRTUAL,
            `file.name` STRING METADATA VIRTUAL,
            size BIGINT METADATA FROM 'file.size' VIRTUAL,
            modified TIMESTAMP_LTZ(3) METADATA FROM 'file.modification-time' VIRTUAL
        ) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'parquet');
        SELECT id, `file.name`, size, p, modified FROM t;
    """
    rows = Session().execute_script(script)[-1].table.to_pylist()
    by_file = {f.name: f for f in files}
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3, 4]
    for r in rows:
        f = by_file[r["file.name"]]
        assert r["p"] == str(f) and r["size"] == f.stat().st_size
        assert r["modified"] == dt.datetime.fromtimestamp(f.stat().st_mtime_ns // 1_000_000 / 1000, dt.UTC)
    with pytest.raises(ConnectorError, match="declares persistable metadata columns, but connector 'filesystem' writes no metadata"):
        Session().execute_script(f"""
            CREATE TABLE w (id INT, p STRING METADATA FROM 'file.path')
            WITH ('connector' = 'filesystem', 'path' = '{tmp_path}/w', 'format' = 'csv');
            INSERT INTO w VALUES (1, 'x');
        """)
