"""Exactly-once into Iceberg and Delta tables under failures: SIGKILL `sqlstream run`, restore, compare the table.

The job and kill loop of tests/fault_harness.py into the lakehouse sinks: real job processes
are killed after a random delay -- while rows are staged, checkpoints complete, or commits
are being made -- and restarted with --restore from the newest completed checkpoint, KILLS
times, and then left to finish.  The table must then hold exactly the rows of a failure-free
run and of DuckDB: a checkpoint's commit is made once (a replay after a restore finds its
app id and checkpoint id in the table and is skipped), never twice, never not at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from tests.conftest import duckdb_rows, rows
from tests.fault_harness import (
    ROWS,
    WINDOW_COLUMNS,
    WINDOW_ORACLE,
    WINDOW_QUERY,
    Job,
    job_script,
    run_with_kills,
)

pytestmark = pytest.mark.slow

KILLS = 5

# mode -> (sink columns, query, DuckDB's answer)
JOBS = {
    # a windowed aggregation appends: a duplicated or lost commit shows as an extra or missing row
    "append": (WINDOW_COLUMNS, WINDOW_QUERY, WINDOW_ORACLE),
    # a changelog (GROUP BY without window) is applied by key (Delta: MERGE; Iceberg: delete and upsert)
    "upsert": (
        "k BIGINT, n BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED",
        "SELECT seq % 11 AS k, COUNT(*) AS n, SUM(seq) AS s FROM gen GROUP BY seq % 11",
        f"SELECT seq % 11, COUNT(*), SUM(seq) FROM range({ROWS}) r(seq) GROUP BY ALL",
    ),
}


def sink_options(kind: str, tmp: Path) -> str:
    if kind == "delta":
        return f"'connector' = 'delta', 'table-path' = '{tmp / 'delta'}'"
    return (f"'connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'sql', "
            f"'uri' = 'sqlite:///{tmp}/catalog.db', 'warehouse' = '{tmp / 'warehouse'}'")


def table_rows(kind: str, tmp: Path) -> list[tuple]:
    if kind == "delta":
        table = DeltaTable(str(tmp / "delta")).to_pyarrow_table()
    else:
        table = SqlCatalog("lake", uri=f"sqlite:///{tmp}/catalog.db").load_table("default_database.out").scan().to_arrow()
    return sorted(rows(table))


def commits(kind: str, tmp: Path) -> list[tuple[str, str]]:
    """(app id, checkpoint id) of every commit the sinks made (an Iceberg commit that applies changes makes
    several snapshots, which share its commit id)."""
    if kind == "delta":
        infos = [c for c in DeltaTable(str(tmp / "delta")).history() if "sqlstream.app-id" in c]
        return [(c["sqlstream.app-id"], c["sqlstream.checkpoint-id"]) for c in infos]
    table = SqlCatalog("lake", uri=f"sqlite:///{tmp}/catalog.db").load_table("default_database.out")
    made = {(s.summary["sqlstream.app-id"], s.summary["sqlstream.checkpoint-id"], s.summary["sqlstream.commit-id"])
            for s in table.metadata.snapshots}
    return [(app, checkpoint) for app, checkpoint, _commit in made]


def job(kind: str, mode: str, tmp: Path) -> Job:
    columns, query, _ = JOBS[mode]
    # 10 s of input: on a quiet machine a restored run at the default 20 k rows/s (3 s of input)
    # could finish before the harness had killed it twice
    return Job(tmp, job_script(tmp / "chk", sink_options(kind, tmp), columns, query, parallelism=2, retained=2,
                               rate=6_000))


@pytest.mark.parametrize(("kind", "mode", "seed"), [("delta", "append", 1), ("delta", "upsert", 2),
                                                    ("iceberg", "append", 3), ("iceberg", "upsert", 4)])
def test_sigkill_and_restore_commits_exactly_the_failure_free_rows(kind: str, mode: str, seed: int,
                                                                   tmp_path: Path) -> None:
    expected = sorted(duckdb_rows(JOBS[mode][2]))
    clean = job(kind, mode, tmp_path / "clean")
    clean.run_clean()
    assert table_rows(kind, tmp_path / "clean") == expected
    killed = job(kind, mode, tmp_path / "killed")
    run = run_with_kills(killed, seed, KILLS)
    assert table_rows(kind, tmp_path / "killed") == expected
    made = commits(kind, tmp_path / "killed")
    assert made and len(made) == len(set(made)), "a checkpoint was committed twice"
    assert run.kills >= 2, "the harness should have killed the job several times"
