"""Exactly-once into PostgreSQL under failures: SIGKILL `sqlstream run`, restore, compare the table.

The job and kill loop of tests/fault_harness.py into the postgres sink in
exactly-once mode (two-phase commit): real job processes are killed after a
random delay -- while transactions are open, prepared, or being committed --
and restarted with --restore from the newest completed checkpoint, KILLS times,
and then left to finish.  The table must then hold exactly the rows of a failure-free run and
of DuckDB: a killed writer's prepared transactions are either committed once
(their checkpoint completed) or rolled back (it did not), never both, never
neither.  Nothing may be left prepared or staged afterwards.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.conftest import duckdb_rows
from tests.fault_harness import (
    ROWS,
    WINDOW_COLUMNS,
    WINDOW_ORACLE,
    WINDOW_QUERY,
    Job,
    job_script,
    run_with_kills,
)

pytest_plugins = ("tests.postgres_server",)
pytestmark = pytest.mark.slow

KILLS = 6  # enough to land in every phase of a checkpoint now and then; bounds the test's time

# mode -> (PostgreSQL columns, sqlstream columns, query, DuckDB's answer)
JOBS = {
    # a windowed aggregation appends: a duplicated or lost commit shows as an extra or missing row
    "append": (
        "window_start timestamp(3), k bigint, n bigint, s bigint",
        WINDOW_COLUMNS,
        WINDOW_QUERY,
        WINDOW_ORACLE,
    ),
    # a changelog (GROUP BY without window) upserts by key through the staging table
    "upsert": (
        "k bigint PRIMARY KEY, n bigint, s bigint",
        "k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED",
        "SELECT seq % 11 AS k, COUNT(*) AS n, SUM(seq) AS s FROM gen GROUP BY seq % 11",
        f"SELECT seq % 11, COUNT(*), SUM(seq) FROM range({ROWS}) r(seq) GROUP BY ALL",
    ),
}


def execute(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def prepare_job(url: str, tmp: Path, mode: str, parallelism: int) -> tuple[Job, str, str]:
    """A fresh table and prefix, the job; returns (job, table, prefix)."""
    name, prefix = f"ft_{uuid.uuid4().hex[:10]}", f"ft_{uuid.uuid4().hex[:8]}"
    pg_columns, columns, query, _ = JOBS[mode]
    execute(url, f"CREATE TABLE {name} ({pg_columns})")
    sink = (f"'connector' = 'postgres', 'url' = '{url}', 'table-name' = '{name}', "
            f"'sink.delivery-guarantee' = 'exactly-once', 'sink.transaction-id-prefix' = '{prefix}'")
    # 10 s of input: on a quiet machine a restored run at the default 20 k rows/s (3 s of input)
    # could finish before the harness had killed it twice
    job = Job(tmp, job_script(tmp / "chk", sink, columns, query, parallelism=parallelism, retained=2, rate=6_000))
    return job, name, prefix


def table_rows(url: str, name: str) -> list[tuple]:
    return sorted(execute(url, f"SELECT * FROM {name}"))


def leftovers(url: str, name: str, prefix: str, mode: str) -> tuple[list[tuple], list[tuple]]:
    """Prepared transactions of the prefix, and staged rows, that outlived the job."""
    prepared = execute(url, f"SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '{prefix}-%'")
    staged = execute(url, f"SELECT * FROM {name}__sqlstream_stage") if mode == "upsert" else []
    return prepared, staged


def run_clean(url: str, tmp: Path, mode: str, parallelism: int) -> list[tuple]:
    job, name, prefix = prepare_job(url, tmp, mode, parallelism)
    job.run_clean()
    assert leftovers(url, name, prefix, mode) == ([], [])
    return table_rows(url, name)


def run_killed(url: str, tmp: Path, mode: str, parallelism: int, seed: int) -> tuple[list[tuple], int]:
    job, name, prefix = prepare_job(url, tmp, mode, parallelism)
    run = run_with_kills(job, seed, KILLS)
    assert leftovers(url, name, prefix, mode) == ([], [])
    return table_rows(url, name), run.kills


@pytest.mark.parametrize(("mode", "parallelism", "seed"), [("append", 2, 1), ("upsert", 2, 2)])
def test_sigkill_and_restore_writes_exactly_the_failure_free_rows(
    postgres_server: str, tmp_path: Path, mode: str, parallelism: int, seed: int
) -> None:
    expected = duckdb_rows(JOBS[mode][3])
    clean = run_clean(postgres_server, tmp_path / "clean", mode, parallelism)
    assert clean == expected
    started = time.monotonic()
    recovered, kills = run_killed(postgres_server, tmp_path / "killed", mode, parallelism, seed)
    assert recovered == expected
    assert kills >= 2, "the harness should have killed the job several times"
    assert time.monotonic() - started < 60
