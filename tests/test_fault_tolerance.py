"""Exactly-once under failures: SIGKILL the job at random points, restore, compare the output.

The harness runs real `sqlstream run` processes.  Each one is killed after a
random delay and restarted with --restore from the newest completed
checkpoint, until one finishes.  The committed output of the 2PC file sink
must then equal both a failure-free run and DuckDB's answer, row for row: no
loss, no duplicates.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from sqlstream.runtime.checkpoint.storage import completed_ids
from tests.conftest import duckdb_rows, rows

ROOT = Path(__file__).resolve().parent.parent
ROWS = 60_000
KILLS = 3  # SIGKILLs per test run, each at a random moment


def job_script(out: Path, chk: Path, backend: str, parallelism: int) -> str:
    return f"""
SET 'execution.checkpointing.interval' = '250 ms';
SET 'state.checkpoints.dir' = '{chk}';
SET 'state.backend.type' = '{backend}';
SET 'parallelism.default' = '{parallelism}';
SET 'table.exec.batch-size' = '500';
CREATE TABLE gen (
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(seq * 20, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
    'connector' = 'datagen', 'rows-per-second' = '12000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{ROWS - 1}'
);
CREATE TABLE out (window_start TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out
SELECT window_start, seq % 7 AS k, COUNT(*) AS n, SUM(seq) AS s
FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, seq % 7;
"""


def start(script: Path, env: dict[str, str], restore: Path | None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)]
    if restore is not None:
        cmd += ["--restore", str(restore)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def committed(out: Path) -> pa.Table:
    schema = pa.schema([("window_start", pa.timestamp("ms")), ("k", pa.int64()), ("n", pa.int64()), ("s", pa.int64())])
    parts = sorted(p for p in out.iterdir() if not p.name.startswith((".", "_"))) if out.exists() else []
    tables = [
        pacsv.read_csv(p, read_options=pacsv.ReadOptions(column_names=schema.names),
                       convert_options=pacsv.ConvertOptions(column_types=schema))
        for p in parts if p.stat().st_size
    ]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def expected_rows() -> list[tuple]:
    return duckdb_rows(f"""
        SELECT epoch_ms((seq * 20 // 2000) * 2000), seq % 7, COUNT(*), SUM(seq)
        FROM range({ROWS}) r(seq) GROUP BY ALL""")


def run_with_kills(tmp: Path, backend: str, parallelism: int, seed: int) -> tuple[pa.Table, int]:
    tmp.mkdir(parents=True, exist_ok=True)
    out, chk = tmp / "out", tmp / "chk"
    script = tmp / "job.sql"
    script.write_text(job_script(out, chk, backend, parallelism))
    env = {**os.environ, "SQLSTREAM_HOME": str(tmp / "home")}
    rng = random.Random(seed)
    kills = 0
    for _ in range(KILLS + 1):
        restore = chk if completed_ids(chk) else None
        proc = start(script, env, restore)
        try:
            # KILLS runs are killed at a random point; the last one may finish
            proc.wait(timeout=rng.uniform(0.9, 2.2) if kills < KILLS else 120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        return committed(out), kills
    raise AssertionError("the job never finished")


def run_clean(tmp: Path, backend: str, parallelism: int) -> pa.Table:
    tmp.mkdir(parents=True, exist_ok=True)
    out, chk = tmp / "out", tmp / "chk"
    script = tmp / "job.sql"
    script.write_text(job_script(out, chk, backend, parallelism))
    env = {**os.environ, "SQLSTREAM_HOME": str(tmp / "home")}
    proc = start(script, env, None)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return committed(out)


@pytest.mark.parametrize(("backend", "parallelism", "seed"), [("hashmap", 2, 1), ("rocksdb", 2, 2), ("hashmap", 1, 3)])
def test_sigkill_and_restore_gives_exactly_the_failure_free_output(tmp_path: Path, backend: str, parallelism: int, seed: int) -> None:
    clean = run_clean(tmp_path / "clean", backend, parallelism)
    expected = expected_rows()
    assert rows(clean) == expected
    started = time.monotonic()
    recovered, kills = run_with_kills(tmp_path / "killed", backend, parallelism, seed)
    assert kills >= 2, "the harness should have killed the job several times"
    assert rows(recovered) == expected
    assert time.monotonic() - started < 120
