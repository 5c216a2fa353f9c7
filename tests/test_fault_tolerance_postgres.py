"""Exactly-once into PostgreSQL under failures: SIGKILL `sqlstream run`, restore, compare the table.

The harness of tests/test_fault_tolerance.py with the postgres sink in
exactly-once mode (two-phase commit): real job processes are killed after a
random delay -- while transactions are open, prepared, or being committed --
and restarted with --restore from the newest completed checkpoint, KILLS times,
and then left to finish.  The table must then hold exactly the rows of a failure-free run and
of DuckDB: a killed writer's prepared transactions are either committed once
(their checkpoint completed) or rolled back (it did not), never both, never
neither.  Nothing may be left prepared or staged afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from sqlstream.runtime.checkpoint.storage import completed_ids
from tests.conftest import duckdb_rows

pytest_plugins = ("tests.postgres_server",)

ROOT = Path(__file__).resolve().parent.parent
ROWS = 60_000
KILLS = 6  # enough to land in every phase of a checkpoint now and then; bounds the test's time

# mode -> (PostgreSQL columns, sqlstream columns, query, DuckDB's answer)
JOBS = {
    # a windowed aggregation appends: a duplicated or lost commit shows as an extra or missing row
    "append": (
        "window_start timestamp(3), k bigint, n bigint, s bigint",
        "window_start TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT",
        """SELECT window_start, seq % 7 AS k, COUNT(*) AS n, SUM(seq) AS s
FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, seq % 7""",
        f"""SELECT make_timestamp((seq * 20 // 2000) * 2000 * 1000), seq % 7, COUNT(*), SUM(seq)
FROM range({ROWS}) r(seq) GROUP BY ALL""",
    ),
    # a changelog (GROUP BY without window) upserts by key through the staging table
    "upsert": (
        "k bigint PRIMARY KEY, n bigint, s bigint",
        "k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED",
        "SELECT seq % 11 AS k, COUNT(*) AS n, SUM(seq) AS s FROM gen GROUP BY seq % 11",
        f"SELECT seq % 11, COUNT(*), SUM(seq) FROM range({ROWS}) r(seq) GROUP BY ALL",
    ),
}


# The jobs keep two checkpoints: with one, a checkpoint that completes while the next one (often
# the final one) is published fails the job, because publishing prunes the older checkpoint's
# directory while CheckpointCoordinator._complete still walks it to measure its size.
def job_script(url: str, name: str, prefix: str, chk: Path, mode: str, parallelism: int) -> str:
    _, columns, query, _ = JOBS[mode]
    return f"""
SET 'execution.checkpointing.interval' = '250 ms';
SET 'state.checkpoints.dir' = '{chk}';
SET 'state.checkpoints.num-retained' = '2';
SET 'parallelism.default' = '{parallelism}';
SET 'table.exec.batch-size' = '500';
CREATE TABLE gen (
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(seq * 20, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
    'connector' = 'datagen', 'rows-per-second' = '20000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{ROWS - 1}'
);
CREATE TABLE out ({columns}) WITH (
    'connector' = 'postgres', 'url' = '{url}', 'table-name' = '{name}',
    'sink.delivery-guarantee' = 'exactly-once', 'sink.transaction-id-prefix' = '{prefix}'
);
INSERT INTO out {query};
"""


def execute(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def start(script: Path, env: dict[str, str], restore: Path | None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script)]
    if restore is not None:
        cmd += ["--restore", str(restore)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def prepare_job(url: str, tmp: Path, mode: str, parallelism: int) -> tuple[Path, str, str, dict[str, str]]:
    """A fresh table and prefix, the job script; returns (script, table, prefix, env)."""
    tmp.mkdir(parents=True, exist_ok=True)
    name, prefix = f"ft_{uuid.uuid4().hex[:10]}", f"ft_{uuid.uuid4().hex[:8]}"
    execute(url, f"CREATE TABLE {name} ({JOBS[mode][0]})")
    script = tmp / "job.sql"
    script.write_text(job_script(url, name, prefix, tmp / "chk", mode, parallelism))
    return script, name, prefix, {**os.environ, "SQLSTREAM_HOME": str(tmp / "home")}


def table_rows(url: str, name: str) -> list[tuple]:
    return sorted(execute(url, f"SELECT * FROM {name}"))


def leftovers(url: str, name: str, prefix: str, mode: str) -> tuple[list[tuple], list[tuple]]:
    """Prepared transactions of the prefix, and staged rows, that outlived the job."""
    prepared = execute(url, f"SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '{prefix}-%'")
    staged = execute(url, f"SELECT * FROM {name}__sqlstream_stage") if mode == "upsert" else []
    return prepared, staged


def run_clean(url: str, tmp: Path, mode: str, parallelism: int) -> list[tuple]:
    script, name, prefix, env = prepare_job(url, tmp, mode, parallelism)
    proc = start(script, env, None)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert leftovers(url, name, prefix, mode) == ([], [])
    return table_rows(url, name)


def run_with_kills(url: str, tmp: Path, mode: str, parallelism: int, seed: int) -> tuple[list[tuple], int]:
    script, name, prefix, env = prepare_job(url, tmp, mode, parallelism)
    chk = tmp / "chk"
    rng = random.Random(seed)
    kills = 0
    while True:
        restore = chk if completed_ids(chk) else None
        proc = start(script, env, restore)
        try:
            proc.wait(timeout=rng.uniform(0.9, 2.2) if kills < KILLS else 120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        assert leftovers(url, name, prefix, mode) == ([], [])
        return table_rows(url, name), kills


@pytest.mark.parametrize(("mode", "parallelism", "seed"), [("append", 2, 1), ("upsert", 2, 2)])
def test_sigkill_and_restore_writes_exactly_the_failure_free_rows(
    postgres_server: str, tmp_path: Path, mode: str, parallelism: int, seed: int
) -> None:
    expected = duckdb_rows(JOBS[mode][3])
    clean = run_clean(postgres_server, tmp_path / "clean", mode, parallelism)
    assert clean == expected
    started = time.monotonic()
    recovered, kills = run_with_kills(postgres_server, tmp_path / "killed", mode, parallelism, seed)
    assert recovered == expected
    assert kills >= 2, "the harness should have killed the job several times"
    assert time.monotonic() - started < 60
