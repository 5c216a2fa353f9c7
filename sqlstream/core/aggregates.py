"""Aggregate calls as the plan carries them: which function, over which input column."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class AggCall:
    function: str  # COUNT | SUM | MIN | MAX | AVG
    arg: int | None  # input column; None for COUNT(*)
    distinct: bool
    type: pa.DataType
    name: str

    def describe(self) -> str:
        inner = "*" if self.arg is None else f"{'DISTINCT ' if self.distinct else ''}${self.arg}"
        return f"{self.function}({inner})"


def retractable(call: AggCall) -> bool:
    """Whether the function can consume -U/-D rows (MIN/MAX/DISTINCT would need all values)."""
    return call.function in ("COUNT", "SUM", "AVG") and not call.distinct
