"""Exactly-once under failures: SIGKILL the job at random points, restore, compare the output.

The job of tests/fault_harness.py into the 2PC filesystem sink, run as real
`sqlstream run` processes, each killed after a random delay and restarted with
--restore from the newest completed checkpoint, until one finishes.  The
committed output must then equal both a failure-free run and DuckDB's answer,
row for row: no loss, no duplicates.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import rows
from tests.fault_harness import Job, committed, expected_rows, file_job_script, run_with_kills

pytestmark = pytest.mark.slow

KILLS = 3  # SIGKILLs per test run, each at a random moment


@pytest.mark.parametrize(("backend", "parallelism", "seed"), [("hashmap", 2, 1), ("rocksdb", 2, 2), ("hashmap", 1, 3)])
def test_sigkill_and_restore_gives_exactly_the_failure_free_output(tmp_path: Path, backend: str, parallelism: int, seed: int) -> None:
    clean = tmp_path / "clean"
    Job(clean, file_job_script(clean / "out", clean / "chk", backend, parallelism)).run_clean()
    expected = expected_rows()
    assert rows(committed(clean / "out")) == expected
    started = time.monotonic()
    killed = tmp_path / "killed"
    run = run_with_kills(Job(killed, file_job_script(killed / "out", killed / "chk", backend, parallelism)),
                         seed, KILLS)
    assert run.kills >= 2, "the harness should have killed the job several times"
    assert rows(committed(killed / "out")) == expected
    assert time.monotonic() - started < 120
