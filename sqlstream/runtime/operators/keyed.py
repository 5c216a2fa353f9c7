"""What keyed operators share: the key group of each row, copy-on-write accumulators, the state form."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from sqlstream.core.errors import JobError
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


def columnar_state(ctx: OperatorContext, planned: bool) -> bool:
    """Whether to run the columnar form the plan chose; a backend without columnar state (the
    plan was made for another ``state.backend.type``) is an error, not a silent switch."""
    if planned and not ctx.keyed_state.supports_columnar:
        raise JobError(f"the plan keeps columnar state, which the '{ctx.keyed_state.name}' state backend "
                       "does not hold; plan the job with the backend it runs on")
    return planned
