"""The job and the kill loop of the exactly-once tests (test_fault_tolerance*.py).

One job: a bounded datagen sequence of ``ROWS`` rows with event time, through
a query (by default a 2-second tumbling window per ``seq % 7``) into the sink
under test, checkpointing every 250 ms.  ``run_with_kills`` runs it as real
``sqlstream run`` processes, SIGKILLs each after a random delay and restarts it
with --restore from the newest completed checkpoint, ``kills`` times, then lets
the last run finish; the tests compare the sink's contents with a failure-free
run and DuckDB.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from sqlstream.runtime.checkpoint.storage import completed_ids
from tests.conftest import duckdb_rows

ROOT = Path(__file__).resolve().parent.parent
ROWS = 60_000

WINDOW_COLUMNS = "window_start TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT"
WINDOW_QUERY = """SELECT window_start, seq % 7 AS k, COUNT(*) AS n, SUM(seq) AS s
FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, seq % 7"""
# DuckDB's answer to WINDOW_QUERY
WINDOW_ORACLE = f"""SELECT epoch_ms((seq * 20 // 2000) * 2000), seq % 7, COUNT(*), SUM(seq)
FROM range({ROWS}) r(seq) GROUP BY ALL"""


def job_script(chk: Path, sink: str, columns: str = WINDOW_COLUMNS, query: str = WINDOW_QUERY, *,
               backend: str = "hashmap", parallelism: int = 1, rate: int = 20_000,
               retained: int | None = None, partitioned_by: str = "") -> str:
    """The job writing ``query`` into table ``out`` (``columns``) WITH (``sink``).  Sinks that
    commit from notifications keep two checkpoints (``retained``): with one, a checkpoint that
    completes while the next one (often the final one) is published fails the job, because
    publishing prunes the older checkpoint's directory while CheckpointCoordinator._complete
    still walks it to measure its size.  ``partitioned_by`` names the sink's partition columns."""
    keep = f"SET 'state.checkpoints.num-retained' = '{retained}';\n" if retained is not None else ""
    return f"""
SET 'execution.checkpointing.interval' = '250 ms';
SET 'state.checkpoints.dir' = '{chk}';
{keep}SET 'state.backend.type' = '{backend}';
SET 'parallelism.default' = '{parallelism}';
SET 'table.exec.batch-size' = '500';
CREATE TABLE gen (
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(seq * 20, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
    'connector' = 'datagen', 'rows-per-second' = '{rate}',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{ROWS - 1}'
);
CREATE TABLE out ({columns}){f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""} WITH ({sink});
INSERT INTO out {query};
"""


def file_job_script(out: Path, chk: Path, backend: str, parallelism: int) -> str:
    """The windowed job into a CSV directory (the 2PC filesystem sink); also run by the savepoint
    and Ray tests."""
    return job_script(chk, f"'connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv'",
                      backend=backend, parallelism=parallelism, rate=12_000)


WINDOW_SCHEMA = pa.schema([("window_start", pa.timestamp("ms")), ("k", pa.int64()), ("n", pa.int64()),
                           ("s", pa.int64())])


def committed(out: Path, schema: pa.Schema = WINDOW_SCHEMA) -> pa.Table:
    """The rows (of ``schema``: the windowed job's by default) the filesystem sink committed under
    ``out`` (in-progress files are hidden)."""
    parts = sorted(p for p in out.iterdir() if not p.name.startswith((".", "_"))) if out.exists() else []
    tables = [
        pacsv.read_csv(p, read_options=pacsv.ReadOptions(column_names=schema.names),
                       convert_options=pacsv.ConvertOptions(column_types=schema))
        for p in parts if p.stat().st_size
    ]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def expected_rows() -> list[tuple]:
    """DuckDB's answer to the windowed job."""
    return duckdb_rows(WINDOW_ORACLE)


@dataclass
class Job:
    """A job script written under ``tmp``, with its checkpoint directory and environment."""

    tmp: Path
    script: str
    chk: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.chk = self.tmp / "chk"
        (self.tmp / "job.sql").write_text(self.script)
        self.env = {**os.environ, "SQLSTREAM_HOME": str(self.tmp / "home")}

    def start(self, restore: Path | None = None) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "sqlstream.frontend.cli", "run", str(self.tmp / "job.sql")]
        if restore is not None:
            cmd += ["--restore", str(restore)]
        return subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)

    def run_clean(self, timeout_s: float = 120) -> None:
        """One failure-free run to its end."""
        proc = self.start()
        _, err = proc.communicate(timeout=timeout_s)
        assert proc.returncode == 0, err


@dataclass
class KilledRun:
    kills: int
    lifetimes: list[tuple[int, int]]  # (start, end) wall-clock ms of each process, in order


def run_with_kills(job: Job, seed: int, kills: int, alive_s: tuple[float, float] = (0.9, 2.2),
                   finish_timeout_s: float = 120) -> KilledRun:
    """Run ``job`` ``kills`` times, SIGKILLing each run after a random time in ``alive_s``, each
    restored from the newest completed checkpoint; the next run must finish."""
    rng = random.Random(seed)
    lifetimes: list[tuple[int, int]] = []
    killed = 0
    while True:
        restore = job.chk if completed_ids(job.chk) else None
        began = time.time_ns() // 1_000_000
        proc = job.start(restore)
        try:
            proc.wait(timeout=rng.uniform(*alive_s) if killed < kills else finish_timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed += 1
            continue
        finally:
            lifetimes.append((began, time.time_ns() // 1_000_000 + 1))
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        return KilledRun(killed, lifetimes)
