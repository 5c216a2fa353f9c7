"""What keyed operators share: the key group of each row, copy-on-write accumulators, state TTL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from sqlstream.core.durations import parse_duration_ms
from sqlstream.runtime import aggregates
from sqlstream.runtime.hashing import key_groups
from sqlstream.runtime.operators.base import OperatorContext


def key_group_column(batch: pa.RecordBatch, key_indexes: list[int], max_parallelism: int) -> pa.Array:
    """Each row's key group as a column, to be grouped by with the keys (one group: 0)."""
    if not key_indexes:
        return pa.array(np.zeros(batch.num_rows, dtype=np.int64))
    return pa.array(key_groups([batch.column(k) for k in key_indexes], max_parallelism))


def fresh_or_copy(functions: list[aggregates.AggFunction], stored: list[list[Any]] | None) -> list[list[Any]]:
    """Accumulators to update: new ones, or copies of the stored ones (which stay untouched)."""
    if stored is None:
        return [fn.create() for fn in functions]
    return [fn.copy(a) for fn, a in zip(functions, stored, strict=True)]


def state_ttl(ctx: OperatorContext) -> int | None:
    """Flink's table.exec.state.ttl in ms: how long a key's state lives unwritten; None (or 0): forever."""
    ttl = ctx.config.get("table.exec.state.ttl")
    ms = parse_duration_ms(ttl) if ttl else 0
    return ms if ms > 0 else None
