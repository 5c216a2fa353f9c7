"""What keyed operators share: the key group of each row, and copy-on-write accumulators."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from runtime import aggregates
from runtime.hashing import key_groups


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
