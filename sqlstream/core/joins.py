"""What a join operator is told about time: the bounds of an interval join, and when a
regular join's stored rows can no longer match (horizons)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from sqlstream.core.aggregates import row_encodable


@dataclass(frozen=True)
class IntervalBounds:
    """lower <= left.time - right.time <= upper (milliseconds, inclusive)."""

    left_time: int
    right_time: int  # index within the right input
    lower: int
    upper: int


@dataclass(frozen=True)
class Horizon:
    """Stored rows of one side are dead once ``column < watermark + offset`` (ms)."""

    column: int  # within that side's input
    offset: int

    def describe(self, side: str) -> str:
        sign = "+" if self.offset >= 0 else "-"
        return f"{side} rows expire when ${self.column} < watermark {sign} {abs(self.offset)}ms"


def join_columnar_rows(schemas: tuple[pa.Schema, pa.Schema], keys: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether the vectorized INNER join can keep its rows in RocksDB (runtime.operators.join_rocksdb):
    every column of both inputs of a type the row encoding has, and each pair of join keys of one
    type (a probe looks the other side's rows up by the bytes of its own key)."""
    left, right = schemas
    return (all(row_encodable(t) for s in schemas for t in s.types)
            and all(left.field(a).type == right.field(b).type for a, b in zip(*keys, strict=True)))
