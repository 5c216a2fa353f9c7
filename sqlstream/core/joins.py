"""What a join operator is told about time: the bounds of an interval join, and when a
regular join's stored rows can no longer match (horizons)."""

from __future__ import annotations

from dataclasses import dataclass


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
