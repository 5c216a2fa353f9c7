"""User-defined functions in the style of PyFlink.

Scalar functions::

    @udf(result_type="BIGINT")
    def plus_one(x):            # called per row with Python values
        return None if x is None else x + 1

    @udf(result_type="DOUBLE", vectorized=True)
    def half(x):                # called per batch with pyarrow arrays
        return pyarrow.compute.divide(x, 2.0)

Table functions yield rows, joined to each input row with ``LATERAL TABLE(f(x))``::

    @udtf(result_types=["STRING", "INT"])
    def split(s):               # called per row; yields (word, length) rows
        for word in (s or "").split():
            yield word, len(word)

or subclass :class:`TableFunction` and implement ``eval``.

Aggregate functions subclass :class:`AggregateFunction`.  Register them with
``CREATE TEMPORARY FUNCTION name AS 'module.attribute' LANGUAGE PYTHON`` or
``TableEnvironment.create_temporary_function``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

RESULT_TYPE = "_sqlstream_result_type"
RESULT_TYPES = "_sqlstream_result_types"
VECTORIZED = "_sqlstream_vectorized"


def udf(result_type: str, vectorized: bool = False) -> Callable[[Callable], Callable]:
    """Declare a Python function a scalar UDF returning SQL type ``result_type``."""

    def mark(fn: Callable) -> Callable:
        setattr(fn, RESULT_TYPE, result_type)
        setattr(fn, VECTORIZED, vectorized)
        return fn

    return mark


class TableFunction:
    """A user-defined table function: ``eval`` yields the rows one input row is joined with (a
    tuple per row, or a plain value when there is one result type), as PyFlink's TableFunction."""

    result_types: Sequence[str] = ()

    def eval(self, *args: Any) -> Iterable[Any]:
        raise NotImplementedError


def udtf(function: Callable | TableFunction | type | None = None, *,
         result_types: str | Sequence[str]) -> Any:
    """Declare a generator function (or a TableFunction) a table function yielding rows of the SQL
    types ``result_types``: ``@udtf(result_types=[...])`` or ``udtf(f, result_types=[...])``."""
    types = [result_types] if isinstance(result_types, str) else list(result_types)

    def mark(fn: Callable | TableFunction | type) -> Any:
        if isinstance(fn, type) and issubclass(fn, TableFunction):
            fn = fn()
        setattr(fn, RESULT_TYPES, types)
        return fn

    return mark if function is None else mark(function)


class AggregateFunction:
    """A user-defined aggregate: an accumulator per group, fed one row at a time.

    Subclasses set ``result_type`` (a SQL type) and implement the methods
    below; ``merge`` is needed for session windows, ``retract`` for updating
    inputs (aggregating a changelog).
    """

    result_type: str = "STRING"

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *args: Any) -> Any:
        """Fold one row in; return the new accumulator (or mutate it and return None)."""
        raise NotImplementedError

    def get_value(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, accumulator: Any, other: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement merge")

    def retract(self, accumulator: Any, *args: Any) -> Any:
        """Take one row back out (an updating input's -U/-D); return the new accumulator (or mutate
        it and return None).  A function without it cannot aggregate an updating input."""
        raise NotImplementedError(f"{type(self).__name__} does not implement retract")


def implements_retract(function: AggregateFunction) -> bool:
    """Whether an aggregate UDF overrides ``retract`` (Flink requires it over an updating input)."""
    return type(function).retract is not AggregateFunction.retract


def implements_merge(function: AggregateFunction) -> bool:
    """Whether an aggregate UDF overrides ``merge`` (a SESSION window merges accumulators)."""
    return type(function).merge is not AggregateFunction.merge
