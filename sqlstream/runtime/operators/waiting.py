"""Rows that wait in keyed state until the watermark passes them: what event-time operators that
process rows in time order (OVER aggregates, MATCH_RECOGNIZE) share.

The rows wait per key group, not per key, so that a batch costs one state write per key group it
touches; a timer per key group fires at its earliest waiting row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sqlstream.runtime.operators.base import OperatorContext
from sqlstream.runtime.operators.keyed import key_group_column
from sqlstream.runtime.operators.rank import KeyTimers, on_time
from sqlstream.runtime.operators.window_agg import event_times
from sqlstream.runtime.state.base import KeyedState


def wait_for_watermark(ctx: OperatorContext, waiting: KeyedState, timers: KeyTimers, batch: pa.RecordBatch,
                       keys: list[int], time_index: int, watermark: int) -> None:
    """Store the rows of ``batch`` that are not late in ``waiting`` (key group -> its batches, in
    arrival order), with a timer at each key group's earliest row."""
    batch, ts = on_time(ctx, batch, time_index, watermark)
    if batch.num_rows == 0:
        return
    kg = key_group_column(batch, keys, ctx.max_parallelism).to_numpy()
    order = np.argsort(kg, kind="stable")
    groups = kg[order]
    bounds = np.flatnonzero(np.diff(groups, prepend=-1, append=-1))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        group, idx = int(groups[a]), order[a:b]
        stored = waiting.get(group, ())
        waiting.put(group, (), (stored or ()) + (batch.take(pa.array(idx)),))
        timers.register(group, (), int(ts[idx].min()))


def take_due(waiting: KeyedState, timers: KeyTimers, time_index: int, timestamp: int) -> pa.RecordBatch | None:
    """The waiting rows the watermark ``timestamp`` has passed, taken out of ``waiting`` (None if
    none); every due key group's other rows stay, its timer moved to the earliest of them. One pass
    over all due key groups' rows."""
    visited = [(kg, waiting.get(kg, ())) for kg, _ in timers.pop_due(timestamp)]
    visited = [(kg, w) for kg, w in visited if w]
    if not visited:
        return None
    pieces = [b for _, w in visited for b in w]
    rows = pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)
    owner = np.repeat(np.arange(len(visited)), [sum(b.num_rows for b in w) for _, w in visited])
    ts = event_times(rows, time_index).to_numpy(zero_copy_only=False)
    due = ts <= timestamp
    waits = np.flatnonzero(~due)
    bounds = np.searchsorted(owner[waits], np.arange(len(visited) + 1))
    for i, (kg, _) in enumerate(visited):
        keep = waits[bounds[i]:bounds[i + 1]]
        if len(keep):
            waiting.put(kg, (), (rows.take(pa.array(keep)),))
            timers.register(kg, (), int(ts[keep].min()))
        else:
            waiting.delete(kg, ())
    return rows.filter(pa.array(due)) if due.any() else None
