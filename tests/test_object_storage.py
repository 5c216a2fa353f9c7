"""Filesystem tables and checkpoints on an object store: s3:// paths against moto's real S3 server."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError, PlanError, SqlStreamError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint.storage import (
    METADATA,
    CheckpointError,
    CheckpointStorage,
    local_copy,
    restore_point,
    write_subtask_state,
)
from sqlstream.runtime.connectors.base import SinkContext, SourceContext
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.fs import StorageError, resolve
from sqlstream.runtime.operators.sink import SinkOperator
from tests.conftest import rows, run_sql
from tests.fault_harness import (
    ROOT,
    Job,
    committed,
    expected_rows,
    file_job_script,
    job_script,
)
from tests.harness import OperatorHarness

if TYPE_CHECKING:
    from tests.s3_server import S3Server

pytest_plugins = ("tests.s3_server",)

FS = get_connector("filesystem")
COLUMNS = (ColumnDef("id", parse_type("INT")), ColumnDef("name", parse_type("STRING")))
SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])


def table(path: str, fmt: str = "csv") -> TableDef:
    return TableDef("t", COLUMNS, {"connector": "filesystem", "path": path, "format": fmt})


def batch(ids: range) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"id": i, "name": f"n{i}"} for i in ids], schema=SCHEMA)


def sink(t: TableDef, settings: dict[str, str]) -> SinkOperator:
    return SinkOperator(FS.create_sink(SinkContext(t, FS.validate(t), SCHEMA, settings=settings)))


def read(t: TableDef, settings: dict[str, str]) -> list[int]:
    reader = FS.create_source(SourceContext(t, FS.validate(t), ["id", "name"], settings=settings))
    reader.open()
    out: list[int] = []
    while not reader.finished:
        b = reader.read_batch()
        if b is not None:
            out += b.column("id").to_pylist()
    return sorted(out)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_a_job_writes_to_s3_and_another_reads_it_back(s3_server: S3Server, bucket: str, fmt: str) -> None:
    out = f"s3://{bucket}/out"
    session = Session()
    session.execute_script(s3_server.set_statements() + f"""
        CREATE TABLE gen (id BIGINT, name STRING) WITH (
            'connector' = 'datagen', 'number-of-rows' = '500', 'fields.id.kind' = 'sequence',
            'fields.id.start' = '1', 'fields.id.end' = '500', 'fields.name.length' = '5');
        CREATE TABLE out (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = '{fmt}');
        INSERT INTO out SELECT id, name FROM gen;
    """)
    keys = [k for k in s3_server.keys(bucket, "out/") if k != "out/"]  # (the directory marker)
    assert keys and all(k.endswith(f".{fmt}") and not k.startswith("out/.") for k in keys), keys
    got = run_sql(f"""
        CREATE TABLE src (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = '{fmt}');
        SELECT COUNT(*), SUM(id), COUNT(DISTINCT id) FROM src;
    """, s3_server.settings)
    assert rows(got) == [(500, 500 * 501 // 2, 500)]


def test_staged_part_files_are_hidden_until_commit_and_a_replayed_commit_is_idempotent(
        s3_server: S3Server, bucket: str) -> None:
    t = table(f"s3://{bucket}/out")
    settings = s3_server.settings
    committer = OperatorHarness(sink(t, settings), None)
    committer.process_batch(batch(range(3)))
    held = committer.snapshot(1)  # staged: uploaded under a hidden name, not yet visible
    keys = s3_server.keys(bucket, "out/")
    assert len([k for k in keys if "/." in k and k.endswith(".inprogress")]) == 1, keys
    assert read(t, settings) == []
    committer.operator.notify_checkpoint_complete(1)
    assert read(t, settings) == [0, 1, 2]
    committer.close()
    # a restore commits checkpoint 1's committable again: nothing changes, nothing fails
    OperatorHarness(sink(t, settings), None, restore=held).close()
    assert read(t, settings) == [0, 1, 2]
    assert not [k for k in s3_server.keys(bucket, "out/") if k.endswith(".inprogress")]


def test_a_killed_attempts_staged_objects_are_deleted_when_the_restored_job_commits(
        s3_server: S3Server, bucket: str) -> None:
    t = table(f"s3://{bucket}/out")
    settings = s3_server.settings
    killed = OperatorHarness(sink(t, settings), None)
    killed.process_batch(batch(range(3)))
    held = killed.snapshot(1)  # checkpoint 1 completes; the process dies before committing it
    killed.process_batch(batch(range(3, 6)))
    killed.snapshot(2)  # staged for checkpoint 2, which never completes (no close, no abort: killed)
    assert len([k for k in s3_server.keys(bucket, "out/") if k.endswith(".inprogress")]) == 2
    OperatorHarness(sink(t, settings), None, restore=held).close()
    assert read(t, settings) == [0, 1, 2]
    assert not [k for k in s3_server.keys(bucket, "out/") if k.endswith(".inprogress")]


def test_abort_and_close_leave_nothing_on_the_store(s3_server: S3Server, bucket: str) -> None:
    t = table(f"s3://{bucket}/out", "parquet")
    op = OperatorHarness(sink(t, s3_server.settings), None)
    op.process_batch(batch(range(5)))
    op.snapshot(1)  # staged, never completed
    op.process_batch(batch(range(5, 8)))  # not staged at all
    op.operator.discard_uncommitted(None)
    op.close()
    assert [k for k in s3_server.keys(bucket, "out/") if k != "out/"] == []


def test_a_single_object_and_hidden_objects(s3_server: S3Server, bucket: str) -> None:
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="in/a.csv", Body=b"1,a\n2,b\n")
    client.put_object(Bucket=bucket, Key="in/sub/b.csv", Body=b"3,c\n")
    client.put_object(Bucket=bucket, Key="in/.hidden.csv", Body=b"9,x\n")
    client.put_object(Bucket=bucket, Key="in/_temporary/c.csv", Body=b"9,x\n")
    assert read(table(f"s3://{bucket}/in"), s3_server.settings) == [1, 2, 3]
    assert read(table(f"s3://{bucket}/in/sub/b.csv"), s3_server.settings) == [3]


def test_a_malformed_object_is_named_by_its_uri(s3_server: S3Server, bucket: str) -> None:
    s3_server.client().put_object(Bucket=bucket, Key="bad/a.csv", Body=b"1,a\nnot-a-number,b\n")
    with pytest.raises(SqlStreamError, match=f"s3://{bucket}/bad/a.csv"):
        read(table(f"s3://{bucket}/bad"), s3_server.settings)


def test_a_missing_object_path_is_a_clear_error(s3_server: S3Server, bucket: str) -> None:
    with pytest.raises(ConnectorError, match=f"path 's3://{bucket}/nothing' .*does not exist"):
        read(table(f"s3://{bucket}/nothing"), s3_server.settings)


def test_an_unreachable_endpoint_fails_fast_naming_path_and_endpoint(s3_server: S3Server) -> None:
    settings = {**s3_server.settings, "s3.endpoint": "http://127.0.0.1:9"}  # nothing listens there
    start = time.monotonic()
    with pytest.raises(ConnectorError) as e:
        OperatorHarness(sink(table("s3://somewhere/out"), settings), None)
    assert time.monotonic() - start < 30
    message = str(e.value)
    assert "'s3://somewhere/out/." in message and "endpoint http://127.0.0.1:9" in message
    assert "Traceback" not in message
    with pytest.raises(ConnectorError, match="s3://somewhere/in' \\(endpoint http://127.0.0.1:9\\)"):
        read(table("s3://somewhere/in"), settings)


def test_a_missing_bucket_is_a_clear_error(s3_server: S3Server) -> None:
    with pytest.raises(ConnectorError, match="s3://no-such-bucket/out.*bucket does not exist"):
        OperatorHarness(sink(table("s3://no-such-bucket/out"), s3_server.settings), None)


def test_wrong_credentials_are_a_clear_error(s3_server_with_auth: tuple[S3Server, str]) -> None:
    server, name = s3_server_with_auth
    t = table(f"s3://{name}/out")
    op = OperatorHarness(sink(t, server.settings), None)  # the valid keys work
    op.process_batch(batch(range(2)))
    op.snapshot(1)
    op.operator.notify_checkpoint_complete(1)
    op.close()
    assert read(t, server.settings) == [0, 1]
    wrong = {**server.settings, "s3.secret-key": "not-the-secret"}
    with pytest.raises(ConnectorError, match=f"s3://{name}/out.*endpoint {server.endpoint}"):
        OperatorHarness(sink(t, wrong), None)
    with pytest.raises(ConnectorError, match=f"s3://{name}/out"):
        read(t, wrong)


def test_s3_keys_are_flink_set_keys(session: Session) -> None:
    session.execute_script("SET 's3.endpoint' = 'http://127.0.0.1:9000'; SET 's3.path.style.access' = 'true';"
                           "SET 's3.access-key' = 'k'; SET 's3.secret-key' = 's'; SET 's3.region' = 'eu-west-1';")
    listed = session.execute_script("SET;")[-1].table
    assert dict(zip(listed.column("key").to_pylist(), listed.column("value").to_pylist(), strict=True))[
        "s3.secret-key"] == "******"  # a secret, as Flink's GlobalConfiguration.isSensitive says
    with pytest.raises(PlanError, match="s3.path.style.access"):
        session.execute_script("SET 's3.path.style.access' = 'maybe';")
    with pytest.raises(PlanError, match="did you mean 's3.endpoint'"):
        session.execute_script("SET 's3.endpoint-url' = 'x';")


def test_an_unsupported_scheme_is_refused_at_create_table(session: Session, tmp_path: Path) -> None:
    with pytest.raises(SqlStreamError, match="unsupported scheme 'ftp://'"):
        session.execute_script("CREATE TABLE t (id INT) WITH ('connector' = 'filesystem', "
                               "'path' = 'ftp://host/x', 'format' = 'csv');")
    # file:// is a local path
    (tmp_path / "a.csv").write_text("1\n2\n")
    got = run_sql(f"CREATE TABLE t (id INT) WITH ('connector' = 'filesystem', 'path' = 'file://{tmp_path}', "
                  "'format' = 'csv'); SELECT SUM(id) FROM t;")
    assert rows(got) == [(3,)]


def _complete_checkpoints(server: S3Server, bucket: str, root: str) -> set[str]:
    return {k for k in server.keys(bucket, f"{root}/chk-") if k.endswith(f"/{METADATA}")}


def _committed_on_s3(server: S3Server, bucket: str, prefix: str, local: Path) -> pa.Table:
    """The rows the filesystem sink committed under s3://bucket/prefix (hidden objects left out)."""
    local.mkdir(parents=True)
    client = server.client()
    for key in server.keys(bucket, prefix + "/"):
        name = key.rsplit("/", 1)[-1]
        if name and not name.startswith((".", "_")):
            client.download_file(bucket, key, str(local / name))
    return committed(local)


@pytest.mark.slow
def test_sigkill_and_restore_with_checkpoints_on_s3_gives_the_failure_free_output(
        s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """The fault-tolerance job with its checkpoints and its sink on S3: killed three times and
    restored from s3://.../chk each time, its committed output equals a failure-free run's."""

    def script(name: str) -> str:
        sink = f"'connector' = 'filesystem', 'path' = 's3://{bucket}/{name}/out', 'format' = 'csv'"
        return s3_server.set_statements() + job_script(f"s3://{bucket}/{name}/chk", sink, backend="rocksdb",
                                                       parallelism=2, rate=6_000)

    expected = expected_rows()
    Job(tmp_path / "clean", script("clean")).run_clean()
    assert rows(_committed_on_s3(s3_server, bucket, "clean/out", tmp_path / "clean-out")) == expected
    # each run is killed at a random moment after a checkpoint of its own completed on the store
    # (the machine's load decides how long that takes), and the next restores from the store
    rng = random.Random(5)
    job = Job(tmp_path / "killed", script("killed"))
    restore: str | None = None
    kills = 0
    for _ in range(3):
        before = _complete_checkpoints(s3_server, bucket, "killed/chk")
        proc = job.start(restore)
        deadline = time.monotonic() + 120
        while _complete_checkpoints(s3_server, bucket, "killed/chk") <= before and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint completed on the store"
            time.sleep(0.1)
        time.sleep(rng.uniform(0, 1.0))
        kills += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        restore = f"s3://{bucket}/killed/chk"
    proc = job.start(restore)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert kills >= 2, "the job should have been killed mid-run several times"
    assert rows(_committed_on_s3(s3_server, bucket, "killed/out", tmp_path / "killed-out")) == expected
    # nothing staged is left visible, and the checkpoints live on the store, not in a local folder
    assert [k for k in s3_server.keys(bucket, "killed/chk/") if k.endswith("/_metadata")]
    assert not (tmp_path / "killed" / "chk").exists()


def test_a_checkpoint_root_on_an_unreachable_store_fails_before_the_job_starts(s3_server: S3Server) -> None:
    session = Session()
    session.config.update({**s3_server.settings, "s3.endpoint": "http://127.0.0.1:9"})
    with pytest.raises(SqlStreamError, match="execution.checkpointing.dir.*s3://nowhere/chk.*endpoint http://127.0.0.1:9"):
        session.execute_script("""
            SET 'execution.checkpointing.interval' = '1 s';
            SET 'execution.checkpointing.dir' = 's3://nowhere/chk';
            CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
            CREATE TABLE out (id BIGINT) WITH ('connector' = 'blackhole');
            INSERT INTO out SELECT id FROM gen;
        """)


@pytest.mark.slow
def test_stop_with_a_savepoint_on_s3_and_resume_from_it(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """The savepoint is written to the store (self-contained, _metadata last) and a job resumes
    from its URI: stopped plus resumed output equals the failure-free answer."""
    out = tmp_path / "out"
    script = s3_server.set_statements() + file_job_script(out, tmp_path / "chk", "rocksdb", 2)
    session = Session()
    errors: list[BaseException] = []
    job = threading.Thread(target=lambda: _run_into(session, script, errors), daemon=True)
    job.start()
    deadline = time.monotonic() + 60
    while committed(out).num_rows == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # some output committed first
    assert session.current_executor is not None, errors
    uri = session.current_executor.stop_with_savepoint(f"s3://{bucket}/savepoints/sp-1")
    job.join(60)
    assert not errors and uri == f"s3://{bucket}/savepoints/sp-1"
    keys = s3_server.keys(bucket, "savepoints/sp-1/")
    assert f"savepoints/sp-1/{METADATA}" in keys and len(keys) > 1
    partial, expected = rows(committed(out)), expected_rows()
    assert 0 < len(partial) < len(expected)
    Session(restore_from=uri).execute_script(s3_server.set_statements()
                                             + file_job_script(out, tmp_path / "chk2", "hashmap", 2))
    assert rows(committed(out)) == expected
    with pytest.raises(CheckpointError, match=f"s3://{bucket}/savepoints/none.* does not exist"):
        Session(restore_from=f"s3://{bucket}/savepoints/none").execute_script(
            s3_server.set_statements() + file_job_script(out, tmp_path / "chk3", "hashmap", 2))


def _run_into(session: Session, script: str, errors: list[BaseException]) -> None:
    try:
        session.execute_script(script)
    except BaseException as e:  # noqa: BLE001 - checked by the test
        errors.append(e)


def test_a_corrupt_newest_checkpoint_on_s3_is_skipped_and_pruning_reaches_the_store(
        s3_server: S3Server, bucket: str) -> None:
    """The checksums and the fallback work on the store: a changed state object of the newest
    checkpoint is found after the download and the previous checkpoint is restored; checkpoints
    pruned locally are deleted on the store too."""
    uri = f"s3://{bucket}/chk"
    remote = resolve(uri, s3_server.settings)
    storage = CheckpointStorage(local_copy(uri), retained=2, remote=remote)
    for n in (1, 2, 3):
        directory = storage.subtask_dir(n, "chain", 0)
        snapshot = {"state": write_subtask_state(directory, {"op": {"n": n}}, {"offset": n * 10})}
        storage.complete(n, {"checkpoint_id": n, "subtasks": {("chain", 0): snapshot}})
    assert sorted(_complete_checkpoints(s3_server, bucket, "chk")) == [f"chk/chk-{n}/{METADATA}" for n in (2, 3)]
    assert not s3_server.keys(bucket, "chk/chk-1/")  # pruned on the store as well
    s3_server.client().put_object(Bucket=bucket, Key="chk/chk-3/chain-0/operator-state.msgpack", Body=b"changed")
    point = restore_point(uri, s3_server.settings)
    assert point.checkpoint_id == 2 and point.metadata["subtasks"][("chain", 0)]["source"] == {"offset": 20}
    assert len(point.skipped) == 1 and "checkpoint 3 skipped" in point.skipped[0]
    with pytest.raises(CheckpointError, match=f"s3://{bucket}/elsewhere.* does not exist"):
        restore_point(f"s3://{bucket}/elsewhere", s3_server.settings)


def test_other_stores_resolve_through_pyarrow_fs() -> None:
    """gs:// and abfs:// map to pyarrow's GCS and Azure file systems (no request is made here);
    a store whose client library is missing is a clear error naming the path."""
    gs = resolve("gs://bkt/data/")
    assert type(gs.fs).__name__ == "GcsFileSystem" and gs.path == "bkt/data"
    assert gs.child("a.csv").uri == "gs://bkt/data/a.csv"
    abfs = resolve("abfs://container@account.dfs.core.windows.net/data")
    assert type(abfs.fs).__name__ == "AzureFileSystem" and abfs.path == "container/data"
    local = resolve("file:///tmp/x")
    assert not local.remote and local.path == "/tmp/x"
    with pytest.raises(StorageError, match="names no bucket"):
        resolve("s3:///key")


def test_a_job_checkpoints_to_s3_and_keeps_no_local_copy(s3_server: S3Server, bucket: str) -> None:
    uri = f"s3://{bucket}/jobchk"
    Session().execute_script(s3_server.set_statements() + f"""
        SET 'execution.checkpointing.interval' = '100 ms';
        SET 'execution.checkpointing.dir' = '{uri}';
        CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '600',
            'rows-per-second' = '2000', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '600');
        CREATE TABLE out (k BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
        INSERT INTO out SELECT id % 3, COUNT(*) FROM gen GROUP BY id % 3;
    """)
    assert _complete_checkpoints(s3_server, bucket, "jobchk")  # the final checkpoint at least
    assert not local_copy(uri).exists()


def test_a_monitored_prefix_on_s3_picks_up_new_objects_and_restores_its_position(
        s3_server: S3Server, bucket: str) -> None:
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="feed/a.csv", Body=b"1,a\n2,b\n")
    t = TableDef("t", COLUMNS, {"connector": "filesystem", "path": f"s3://{bucket}/feed", "format": "csv",
                                "source.monitor-interval": "10 ms"})
    reader = FS.create_source(SourceContext(t, FS.validate(t), ["id", "name"], batch_size=1,
                                            settings=s3_server.settings))
    reader.open()
    assert not reader.bounded
    assert reader.read_batch().column("id").to_pylist() == [1]
    position = reader.snapshot_position()  # one row of a.csv returned
    assert reader.read_batch().column("id").to_pylist() == [2]
    client.put_object(Bucket=bucket, Key="feed/.b.csv.inprogress", Body=b"9,x\n")  # hidden: never read
    client.put_object(Bucket=bucket, Key="feed/b.csv", Body=b"3,c\n")
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:
        got = reader.read_batch()
        time.sleep(0.01)
    assert got is not None and got.column("id").to_pylist() == [3]
    reader.close()
    restored = FS.create_source(SourceContext(t, FS.validate(t), ["id", "name"], settings=s3_server.settings))
    restored.restore_position(position)
    restored.open()
    ids: list[int] = []
    deadline = time.monotonic() + 10
    while len(ids) < 2 and time.monotonic() < deadline:
        b = restored.read_batch()
        ids += b.column("id").to_pylist() if b is not None else []
    assert ids == [2, 3]  # the rest of a.csv, then b.csv


@pytest.mark.slow
def test_the_savepoint_command_writes_to_the_jobs_state_savepoints_dir_on_s3(
        s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """`sqlstream savepoint JOB` without a directory uses the job's state.savepoints.dir (Flink's
    default savepoint directory), here an s3:// URI; --stop then stops the job."""
    script = tmp_path / "job.sql"
    script.write_text(s3_server.set_statements() + f"""
        SET 'execution.checkpointing.interval' = '200 ms';
        SET 'state.savepoints.dir' = 's3://{bucket}/savepoints';
        CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '500',
            'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100000000');
        CREATE TABLE out (k BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
        INSERT INTO out SELECT id % 3, COUNT(*) FROM gen GROUP BY id % 3;
    """)
    env = {**os.environ, "SQLSTREAM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert job.stderr is not None
        job_id = re.search(r"Job id: (\w+)", job.stderr.readline()).group(1)  # type: ignore[union-attr]
        deadline = time.monotonic() + 60
        while True:  # the job accepts savepoints once it runs
            done = subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", "savepoint", job_id, "--stop"],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert done.returncode == 0, done.stdout + done.stderr
        uri = re.search(r"Savepoint completed: (\S+)", done.stdout).group(1)  # type: ignore[union-attr]
        assert uri.startswith(f"s3://{bucket}/savepoints/savepoint-")
        assert f"{uri.removeprefix(f's3://{bucket}/')}/{METADATA}" in s3_server.keys(bucket, "savepoints/")
        job.wait(60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def test_metadata_columns_of_an_object(s3_server: S3Server, bucket: str) -> None:
    s3_server.client().put_object(Bucket=bucket, Key="meta/a.csv", Body=b"1,a\n2,b\n")
    got = run_sql(s3_server.set_statements() + f"""
        CREATE TABLE t (id INT, name STRING, p STRING METADATA FROM 'file.path' VIRTUAL,
                        n STRING METADATA FROM 'file.name' VIRTUAL, s BIGINT METADATA FROM 'file.size' VIRTUAL)
        WITH ('connector' = 'filesystem', 'path' = 's3://{bucket}/meta', 'format' = 'csv');
        SELECT id, p, n, s FROM t;
    """)
    assert got.to_pylist() == [{"id": i, "p": f"s3://{bucket}/meta/a.csv", "n": "a.csv", "s": 8} for i in (1, 2)]


def test_a_commit_journal_the_store_refuses_once_fails_the_attempt_over_and_the_restart_commits_exactly_once(
        s3_server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlstream.runtime.fs import Location

    upload = Location.upload
    refused: list[str] = []

    def flaky_upload(self: Location, local: str | os.PathLike[str]) -> None:
        # the store fails the first commit-journal write, as an unreachable S3 or a lost node's disk does
        if "/commits/" in self.path and not refused:
            refused.append(self.path)
            raise self.error("write", OSError("connection reset"))
        upload(self, local)

    monkeypatch.setattr(Location, "upload", flaky_upload)
    out = tmp_path / "out"
    result = Session().execute_script(s3_server.set_statements() + f"""
        SET 'execution.checkpointing.interval' = '100 ms';
        SET 'execution.checkpointing.dir' = 's3://{bucket}/flaky';
        SET 'restart-strategy.type' = 'fixed-delay';
        SET 'restart-strategy.fixed-delay.attempts' = '2';
        SET 'restart-strategy.fixed-delay.delay' = '0 s';
        CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '600',
            'rows-per-second' = '2000', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '600');
        CREATE TABLE out (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
        INSERT INTO out SELECT id FROM gen;
    """)[-1]
    assert refused, "the journal was never written to the store"
    assert result.job is not None and result.job.restarts == 1
    written = sorted(int(line) for f in out.rglob("*") if f.is_file() and not f.name.startswith(".")
                     for line in f.read_text().split())
    assert written == list(range(1, 601))
