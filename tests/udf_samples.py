"""Python UDFs the tests register with CREATE FUNCTION ... AS 'tests.udf_samples.<name>'."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.udf import AggregateFunction, TableFunction, udf, udtf


@udf(result_type="BIGINT")
def plus_one(x: int | None) -> int | None:
    return None if x is None else x + 1


@udf(result_type="STRING")
def shout(s: str | None, times: int) -> str | None:
    return None if s is None else s.upper() + "!" * times


@udf(result_type="DOUBLE", vectorized=True)
def half(x: pa.Array) -> pa.Array:
    return pc.divide(x.cast(pa.float64()), 2.0)


class SumOfSquares(AggregateFunction):
    result_type = "BIGINT"

    def create_accumulator(self) -> list[int]:
        return [0]

    def accumulate(self, acc: list[int], x: int | None) -> None:
        if x is not None:
            acc[0] += x * x

    def merge(self, acc: list[int], other: list[int]) -> None:
        acc[0] += other[0]

    def get_value(self, acc: list[int]) -> int:
        return acc[0]


class SumOfSquaresWithRetract(SumOfSquares):
    """SumOfSquares that can also take rows back: it aggregates an updating input."""

    def retract(self, acc: list[int], x: int | None) -> None:
        if x is not None:
            acc[0] -= x * x


def not_a_udf(x: int) -> int:
    return x


@udf(result_type="BIGINT")
def slow_plus_one(x: int | None) -> int | None:
    """A deliberately slow function (5 ms a row): the operator that calls it holds back its upstream."""
    time.sleep(0.005)
    return None if x is None else x + 1


@udtf(result_types=["STRING", "INT"])
def split_words(s: str | None) -> Iterator[tuple[str, int]]:
    """A table function: one (word, length) row per word."""
    for word in (s or "").split():
        yield word, len(word)


class Countdown(TableFunction):
    """A table function as a class: n, n-1, ..., 1 (none for NULL or n < 1)."""

    result_types = ["BIGINT"]

    def eval(self, n: int | None) -> Iterator[int]:
        yield from range(n or 0, 0, -1)


@udtf(result_types=["STRING", "INT"])
def wrong_arity(s: str | None) -> Iterator[tuple[str]]:
    """Declares two columns, yields rows of one."""
    yield (s,)


class WeightedAverage(AggregateFunction):
    """avg(value, weight): two arguments per row; retractable and mergeable (for every input and
    window kind)."""

    result_type = "DOUBLE"

    def create_accumulator(self) -> list[float]:
        return [0.0, 0.0]  # weighted sum, total weight

    def accumulate(self, acc: list[float], value: float | None, weight: int | None) -> None:
        if value is not None and weight is not None:
            acc[0] += value * weight
            acc[1] += weight

    def retract(self, acc: list[float], value: float | None, weight: int | None) -> None:
        if value is not None and weight is not None:
            acc[0] -= value * weight
            acc[1] -= weight

    def merge(self, acc: list[float], other: list[float]) -> None:
        acc[0] += other[0]
        acc[1] += other[1]

    def get_value(self, acc: list[float]) -> float | None:
        return acc[0] / acc[1] if acc[1] else None


class LastPair(AggregateFunction):
    """The last (a, b) pair as 'a/b': no merge, no retract."""

    result_type = "STRING"

    def create_accumulator(self) -> list[str | None]:
        return [None]

    def accumulate(self, acc: list[str | None], a: object, b: object) -> None:
        acc[0] = f"{a}/{b}"

    def get_value(self, acc: list[str | None]) -> str | None:
        return acc[0]
