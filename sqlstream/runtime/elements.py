"""What flows on a dataflow edge: data chunks, watermarks, barriers, end of input.

A chunk is an Arrow record batch plus, for updating streams, one row kind per
row (Flink's RowKind).  Append-only streams carry ``kinds=None``, so the hot
path of insert-only pipelines never materializes a kinds column.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class RowKind(IntEnum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    @property
    def short(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


KIND_TYPE = pa.int8()
MAX_WATERMARK = 2**63 - 1  # emitted when a bounded input ends: every timer fires
MIN_WATERMARK = -(2**63)


@dataclass
class Chunk:
    batch: pa.RecordBatch
    kinds: pa.Array | None = None  # int8 RowKind per row; None means all +I
    split: str | None = None  # the source split it was read from (per-split watermarks)

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows

    @property
    def is_append_only(self) -> bool:
        return self.kinds is None

    def kinds_or_inserts(self) -> pa.Array:
        if self.kinds is not None:
            return self.kinds
        return pa.array(np.zeros(self.num_rows, dtype=np.int8))

    def filter(self, mask: pa.Array) -> Chunk:
        kinds = None if self.kinds is None else pc.filter(self.kinds, mask)
        return Chunk(self.batch.filter(mask), kinds, self.split)


@dataclass(frozen=True)
class Watermark:
    """Event time has progressed to ``timestamp`` (epoch milliseconds) on this edge."""

    timestamp: int


@dataclass(frozen=True)
class Barrier:
    """Checkpoint barrier ``checkpoint_id`` (Chandy-Lamport style, aligned per operator)."""

    checkpoint_id: int
    is_savepoint: bool = False


@dataclass(frozen=True)
class EndOfInput:
    """The upstream is bounded and has delivered everything."""


Element = Chunk | Watermark | Barrier | EndOfInput
