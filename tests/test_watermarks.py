"""Watermarks: running max per split, minimum over splits, idle splits left out."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from sqlstream.core.expressions import Call, ColumnRef, Literal
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.elements import Chunk, Watermark
from sqlstream.runtime.operators.watermark import WatermarkAssigner
from tests.harness import OperatorHarness

TS = pa.timestamp("ms")
BASE = dt.datetime(2024, 1, 1)


def assigner(idle_ms: int | None = None, clock: ManualClock | None = None, **kwargs) -> OperatorHarness:
    expr = Call("-", (ColumnRef(0, "ts", TS), Literal(1000, pa.duration("ms"))), TS)
    return OperatorHarness(WatermarkAssigner(expr, idle_ms), None, clock, **kwargs)


def chunk(seconds: list[int], split: str) -> Chunk:
    ts = pa.array([BASE + dt.timedelta(seconds=s) for s in seconds], TS)
    return Chunk(pa.record_batch([ts], names=["ts"]), split=split)


def emitted(out: list) -> list[int]:
    base = int(BASE.replace(tzinfo=dt.UTC).timestamp() * 1000)
    return [(e.timestamp - base) // 1000 for e in out if isinstance(e, Watermark)]


def test_watermark_is_the_minimum_over_splits() -> None:
    op = assigner()
    assert emitted(op.process_chunk(chunk([10], "p0"))) == [9]
    # a second partition behind the first holds the watermark back: no regression, no advance
    assert emitted(op.process_chunk(chunk([3], "p1"))) == []
    assert emitted(op.process_chunk(chunk([30], "p0"))) == []
    assert emitted(op.process_chunk(chunk([20], "p1"))) == [19]


def test_an_idle_split_stops_holding_the_watermark_back() -> None:
    clock = ManualClock()
    op = assigner(idle_ms=50, clock=clock)
    op.process_chunk(chunk([5], "quiet"))
    assert emitted(op.process_chunk(chunk([40], "busy"))) == []
    clock.advance(50)
    assert emitted(op.process_chunk(chunk([41], "busy"))) == []  # quiet for 50 ms: not idle yet
    clock.advance(1)
    assert emitted(op.process_chunk(chunk([42], "busy"))) == [41]


def test_watermark_state_survives_restore() -> None:
    op = assigner()
    op.process_chunk(chunk([10], "p0"))
    op.process_chunk(chunk([12], "p1"))
    restored = assigner(restore=op.snapshot())
    assert emitted(restored.process_chunk(chunk([11], "p1"))) == []
    assert emitted(restored.process_chunk(chunk([15], "p0"))) == [11]


def test_assigned_splits_hold_the_watermark_back_before_they_deliver() -> None:
    op = assigner()
    assert op.splits(("p0", "p1", "p2")) == []
    # p1 and p2 have not delivered: Flink's watermark is the minimum over all assigned splits
    assert emitted(op.process_chunk(chunk([10], "p0"))) == []
    assert emitted(op.process_chunk(chunk([12], "p1"))) == []
    assert emitted(op.process_chunk(chunk([11], "p2"))) == [9]


def test_a_split_read_to_its_end_stops_holding_the_watermark_back() -> None:
    op = assigner()
    op.splits(("p0", "p1"))
    op.process_chunk(chunk([5], "p0"))
    assert emitted(op.process_chunk(chunk([20], "p1"))) == [4]
    assert emitted(op.splits(("p0", "p1"), frozenset({"p0"}))) == [19]


def test_an_assigned_split_that_never_delivers_goes_idle() -> None:
    clock = ManualClock()
    op = assigner(idle_ms=50, clock=clock)
    op.splits(("busy", "silent"))
    assert emitted(op.process_chunk(chunk([40], "busy"))) == []
    clock.advance(51)  # the idle timeout counts from the assignment
    assert emitted(op.process_chunk(chunk([41], "busy"))) == [40]
