"""A full disk, on a small tmpfs the test mounts: the job fails with a clear error (no traceback), and once
space is freed a restore from its checkpoints writes every row exactly once.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the tests are skipped, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.jobmanager_api import ROOT
from tests.test_jobs_detached import wait_for

ROWS = 20_000

JOB = """
SET 'execution.checkpointing.interval' = '200 ms';
SET 'state.checkpoints.dir' = '{chk}';
SET 'table.exec.batch-size' = '200';
CREATE TABLE gen (seq BIGINT, pad STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '{rate}',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}',
    'fields.pad.length' = '{pad}');
CREATE TABLE out (seq BIGINT, pad STRING) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO out SELECT seq, pad FROM gen;
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({made.stderr.strip() or 'mount failed'}): "
                    "the disk-full behaviour is untested")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def run(home: Path, script: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(script), *args], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=180)
    return proc.returncode, err


def committed(out: Path) -> list[int]:
    files = [p for p in out.glob("*") if not p.name.startswith((".", "_")) and p.stat().st_size]
    names = ", ".join(f"'{p}'" for p in files)
    return [r[0] for r in duckdb.sql(f"SELECT seq FROM read_csv([{names}], header = false, "
                                     "columns = {'seq': 'BIGINT', 'pad': 'VARCHAR'}) ORDER BY seq").fetchall()]


def fill(directory: Path) -> Path:
    """Writes a file in ``directory`` until the disk is full; returns it (deleting it frees the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to flush when it closes
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


@pytest.mark.slow
def test_a_sink_that_fills_its_disk_fails_cleanly_and_a_restore_after_freeing_space_is_exactly_once(
        small_disk: Path, tmp_path: Path) -> None:
    out, chk = small_disk / "out", tmp_path / "chk"
    script = tmp_path / "job.sql"  # about 4 MB of rows for a 2 MiB disk
    script.write_text(JOB.format(chk=chk, out=out, rate=10_000, last=ROWS - 1, pad=200))
    code, err = finish(run(tmp_path / "home", script))
    assert code == 1 and "no space left on device (the disk is full)" in err, err
    assert "Traceback" not in err and "[ERROR]" in err
    written = committed(out)
    assert len(written) < ROWS and len(set(written)) == len(written)  # what it committed: no duplicates
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)  # space freed
    code, err = finish(run(tmp_path / "home", script, "--restore", str(chk)))
    assert code == 0, err
    assert committed(out) == list(range(ROWS))


@pytest.mark.slow
def test_a_checkpoint_directory_that_fills_up_fails_the_job_cleanly_and_a_restore_after_freeing_space_is_exactly_once(
        small_disk: Path, tmp_path: Path) -> None:
    out, chk = tmp_path / "out", small_disk / "chk"
    script = tmp_path / "job.sql"
    script.write_text(JOB.format(chk=chk, out=out, rate=2_000, last=ROWS - 1, pad=8))
    proc = run(tmp_path / "home", script)
    try:
        wait_for("a few checkpoints", lambda: (chk / "chk-3").exists() or proc.poll() is not None, timeout=60)
        filler = fill(small_disk)  # the disk fills up under the running job
    finally:
        code, err = finish(proc)
    assert code == 1 and "no space left on device (the disk is full)" in err, err
    assert "Traceback" not in err
    assert len(committed(out)) < ROWS
    filler.unlink()
    code, err = finish(run(tmp_path / "home", script, "--restore", str(chk)))
    assert code == 0, err
    assert committed(out) == list(range(ROWS))
