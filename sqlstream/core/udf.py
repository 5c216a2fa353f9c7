"""User-defined functions in the style of PyFlink.

Scalar functions::

    @udf(result_type="BIGINT")
    def plus_one(x):            # called per row with Python values
        return None if x is None else x + 1

    @udf(result_type="DOUBLE", vectorized=True)
    def half(x):                # called per batch with pyarrow arrays
        return pyarrow.compute.divide(x, 2.0)

Aggregate functions subclass :class:`AggregateFunction`.  Register them with
``CREATE TEMPORARY FUNCTION name AS 'module.attribute' LANGUAGE PYTHON`` or
``TableEnvironment.create_temporary_function``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RESULT_TYPE = "_sqlstream_result_type"
VECTORIZED = "_sqlstream_vectorized"


def udf(result_type: str, vectorized: bool = False) -> Callable[[Callable], Callable]:
    """Declare a Python function a scalar UDF returning SQL type ``result_type``."""

    def mark(fn: Callable) -> Callable:
        setattr(fn, RESULT_TYPE, result_type)
        setattr(fn, VECTORIZED, vectorized)
        return fn

    return mark


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
