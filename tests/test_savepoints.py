"""Savepoints: stop a running job with a savepoint, resume it (on either state backend).

The committed output of the stopped run plus the resumed run must equal the
failure-free answer exactly; a savepoint is canonical, so a hashmap job can
resume on rocksdb and the other way round.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint.storage import CheckpointError
from sqlstream.runtime.state import base as state_base
from tests.conftest import rows
from tests.fault_harness import WINDOW_SCHEMA, committed, expected_rows, file_job_script


def _run_until_savepoint(script: str, savepoint_root: Path, after_s: float,
                         schema: pa.Schema = WINDOW_SCHEMA) -> Path:
    """Run ``script`` until its sink (rows of ``schema``) has committed some output, then stop it
    with a savepoint under ``savepoint_root``."""
    session = Session()
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            session.execute_script(script)
        except BaseException as e:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(after_s)
    out = Path(script.split("'path' = '")[1].split("'")[0])
    deadline = time.monotonic() + 60
    while committed(out, schema).num_rows == 0 and time.monotonic() < deadline:  # some output committed first
        time.sleep(0.05)
    executor = session.current_executor
    assert executor is not None, errors
    path = executor.stop_with_savepoint(savepoint_root / "sp")
    assert done.wait(60)
    assert not errors, errors
    return path


@pytest.mark.slow
@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap")])
def test_stop_with_savepoint_and_resume_on_the_other_backend(tmp_path: Path, first: str, second: str) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    savepoint = _run_until_savepoint(file_job_script(out, chk, first, 2), tmp_path, after_s=1.2)
    partial = rows(committed(out))
    expected = expected_rows()
    assert 0 < len(partial) < len(expected)
    assert set(partial) <= set(expected)
    Session(restore_from=str(savepoint)).execute_script(file_job_script(out, tmp_path / "chk2", second, 2))
    assert rows(committed(out)) == expected


@pytest.mark.slow
def test_a_changed_plan_is_refused_unless_state_may_be_dropped(tmp_path: Path) -> None:
    out, chk = tmp_path / "out", tmp_path / "chk"
    savepoint = _run_until_savepoint(file_job_script(out, chk, "hashmap", 1), tmp_path, after_s=0.8)
    changed = file_job_script(out, tmp_path / "chk2", "hashmap", 1).replace("COUNT(*) AS n", "MAX(seq) AS n")
    with pytest.raises(CheckpointError, match="allow-non-restored-state"):
        Session(restore_from=str(savepoint)).execute_script(changed)
    # with the flag the job starts, dropping the old aggregate's state
    Session(restore_from=str(savepoint), allow_non_restored_state=True).execute_script(changed)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_rescale_from_parallelism_2_to_4_through_a_savepoint(tmp_path: Path, backend: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # small batches: the savepoint spans many, and each new subtask reads only those of its key groups
    monkeypatch.setattr(state_base, "BATCH_ENTRIES", 16)
    out = tmp_path / "out"
    script = file_job_script(out, tmp_path / "chk", backend, 2).replace(
        "'fields.seq.kind' = 'sequence'", "'scan.parallelism' = '2', 'fields.seq.kind' = 'sequence'")
    savepoint = _run_until_savepoint(script, tmp_path, after_s=1.2)
    rescaled = script.replace("'parallelism.default' = '2'", "'parallelism.default' = '4'")
    result = Session(restore_from=str(savepoint)).execute_script(rescaled)[-1]
    assert rows(committed(out)) == expected_rows()
    # the window aggregation really ran with 4 subtasks after the restore
    assert result.job is not None


def test_a_source_cannot_change_parallelism_on_restore(tmp_path: Path) -> None:
    out = tmp_path / "out"
    savepoint = _run_until_savepoint(file_job_script(out, tmp_path / "chk", "hashmap", 2), tmp_path, after_s=0.8)
    with pytest.raises(CheckpointError, match="parallelism"):
        Session(restore_from=str(savepoint)).execute_script(file_job_script(out, tmp_path / "chk2", "hashmap", 4))
