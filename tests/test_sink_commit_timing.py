"""A sink records each commit (the checkpoint whose completion it followed, when it ended, how long
the writer took), so that the commit latency per checkpoint can be measured against the time the
coordinator recorded the checkpoint as complete (benchmarks/sinks.py does)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from sqlstream.frontend.session import Session

ROWS = 1200

JOB = """
SET 'execution.checkpointing.interval' = '100 ms';
SET 'state.checkpoints.dir' = '{chk}';
SET 'table.exec.batch-size' = '50';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '2000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}');
CREATE TABLE out (seq BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'parquet');
INSERT INTO out SELECT seq FROM gen;
"""


def test_every_commit_is_timed_after_the_completion_of_the_checkpoint_it_follows(tmp_path: Path) -> None:
    job = Session().execute_script(JOB.format(chk=tmp_path / "chk", out=tmp_path / "out", last=ROWS - 1))[-1].job
    assert job is not None
    assert pq.read_table(tmp_path / "out").num_rows == ROWS
    completed = {c.checkpoint_id: c.completed_ms for c in job.checkpoints}
    assert len(completed) >= 2, "the job runs ~0.6 s with a checkpoint every 100 ms"
    commits = [c for label, m in job.metrics.items() if label.endswith("Sink") for c in m.commits]
    periodic = [c for c in commits if c.checkpoint_id in completed]
    assert periodic, "files rolled at a completed checkpoint are committed on its notification"
    for c in periodic:
        assert completed[c.checkpoint_id] <= c.end_ms  # a commit follows its checkpoint's completion
        assert 0 <= c.duration_ms <= c.end_ms - completed[c.checkpoint_id] + 1
    # the end of the input is committed too, by the final checkpoint, which is not a periodic one
    assert [c.checkpoint_id for c in commits] == sorted(c.checkpoint_id for c in commits)
    assert max(c.checkpoint_id for c in commits) not in completed
