"""CURRENT_WATERMARK(rowtime): the evaluating operator's watermark, NULL before the first one, as
Flink's; the usual use is dropping late rows with a WHERE on it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa

from sqlstream.core.expressions import Call, ColumnRef
from sqlstream.runtime.operators.calc import CalcOperator
from tests.conftest import run_sql
from tests.harness import OperatorHarness

TS = pa.timestamp("ms")


def _batch(*millis: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(list(millis), pa.int64()).cast(TS)], names=["ts"])


def test_calc_reads_its_own_watermark_and_null_before_any() -> None:
    wm = Call("CURRENT_WATERMARK", (ColumnRef(0, "ts", TS),), TS)
    op = OperatorHarness(CalcOperator(None, [ColumnRef(0, "ts", TS), wm], ["ts", "wm"]), "hashmap")
    op.process_batch(_batch(5_000))
    op.watermark(4_000)
    op.process_batch(_batch(6_000, 3_000))
    rows = [tuple(r) for _, *r in op.take()]
    start = dt.datetime(1970, 1, 1)
    assert rows == [(start + dt.timedelta(seconds=5), None),
                    (start + dt.timedelta(seconds=6), start + dt.timedelta(seconds=4)),
                    (start + dt.timedelta(seconds=3), start + dt.timedelta(seconds=4))]


def test_a_where_on_current_watermark_drops_late_rows(tmp_path: Path) -> None:
    # rows arrive in order except one 30 s late; with a 1 s watermark delay it is behind the watermark
    seconds = [*range(0, 40, 2), 5, 41]
    (tmp_path / "t.csv").write_text("".join(f"{i},2024-03-01 10:00:{s:02d}\n" for i, s in enumerate(seconds)))
    result = run_sql(f"""
        SET 'table.exec.batch-size' = '1';
        CREATE TABLE t (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "t.csv"}', 'format' = 'csv');
        SELECT id FROM t WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts);""")
    assert sorted(result.column("id").to_pylist()) == [i for i in range(len(seconds)) if seconds[i] != 5]
