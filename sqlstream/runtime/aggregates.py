"""Aggregate functions as (vectorized partial, Python merge, final result) triples.

A batch is first pre-aggregated per group with Arrow's hash aggregation
(one pass in C++), then each group's partial is merged into its accumulator,
so Python work is per group and batch, never per row.  Accumulators are
small lists of plain values so they snapshot and merge (session windows)
cheaply.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import SEQUENCES, STATISTICS, AggCall, wrap_integer
from sqlstream.core.functions.udfs import USER_AGGREGATES

Partial = tuple[pa.Array, str, pc.FunctionOptions | None]
_COUNT_ALL = pc.CountOptions(mode="all")
_COUNT_VALID = pc.CountOptions(mode="only_valid")
_SUM_OPTS = pc.ScalarAggregateOptions(min_count=0)


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class AggFunction:
    """One aggregate call.  ``retracting`` means the input carries -U/-D rows (sign = -1)."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        self.call = call
        self.retracting = retracting

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        raise NotImplementedError

    def create(self) -> list[Any]:
        raise NotImplementedError

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        """Fold one group's partial values (one per partial) into ``acc``."""
        raise NotImplementedError

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        """Fold another accumulator into ``acc`` (merging session windows)."""
        self.merge(acc, other)

    def result(self, acc: list[Any]) -> Any:
        raise NotImplementedError

    def copy(self, acc: list[Any]) -> list[Any]:
        """A copy to change: state values are immutable once stored."""
        return list(acc)

    def arg(self, batch: pa.RecordBatch) -> pa.Array:
        assert self.call.arg is not None
        return batch.column(self.call.arg)


class Count(AggFunction):
    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        if sign is None:
            if self.call.arg is None:
                return [(pa.nulls(batch.num_rows, pa.int8()), "count", _COUNT_ALL)]
            return [(self.arg(batch), "count", _COUNT_VALID)]
        if self.call.arg is None:
            return [(sign, "sum", _SUM_OPTS)]
        return [(pc.if_else(pc.is_valid(self.arg(batch)), sign, 0), "sum", _SUM_OPTS)]

    def create(self) -> list[Any]:
        return [0]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        acc[0] += values[0] or 0

    def result(self, acc: list[Any]) -> Any:
        return acc[0]


class Sum(AggFunction):
    """SUM keeps a count of non-null inputs so that an emptied group yields NULL.

    The total takes every partial sum, even one whose count nets to zero: a -U 3 and a +U 5 of
    one group in one batch count 0 but move the total by 2.
    """

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        if pa.types.is_integer(x.type):
            x = x.cast(pa.int64())
        if sign is None:
            return [(x, "sum", _SUM_OPTS), (x, "count", _COUNT_VALID)]
        signed = pc.multiply(x, sign.cast(x.type) if not pa.types.is_decimal(x.type) else sign)
        return [(signed, "sum", _SUM_OPTS), (pc.if_else(pc.is_valid(x), sign, 0), "sum", _SUM_OPTS)]

    def create(self) -> list[Any]:
        return [None, 0]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        acc[0] = _add(acc[0], values[0])
        acc[1] += values[1] or 0
        if isinstance(acc[0], int) and pa.types.is_integer(self.call.type):
            acc[0] = wrap_integer(acc[0], pa.int64())  # kept in a BIGINT column of the state

    def result(self, acc: list[Any]) -> Any:
        if not acc[1]:
            return None
        if pa.types.is_integer(self.call.type):
            return wrap_integer(acc[0], self.call.type)
        return acc[0]


class Avg(Sum):
    """AVG = SUM / COUNT: integers in the argument's type (the sum wrapped, the quotient truncated
    toward zero), a DECIMAL rounded HALF_UP at DECIMAL(38, max(6, s)), as Flink."""

    def result(self, acc: list[Any]) -> Any:
        total, count = acc
        if not count or total is None:
            return None
        t = self.call.type
        if pa.types.is_integer(t):
            total = wrap_integer(total, t)
            q = abs(total) // count
            return q if total >= 0 else -q
        if pa.types.is_decimal(t):
            with localcontext() as ctx:
                ctx.prec = 80
                return (Decimal(total) / count).quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)
        return total / count


class MinMax(AggFunction):
    """MIN/MAX.  Over an append-only input the accumulator is the extreme so far; over an
    updating one (a changelog source) it is every value with its net count, as Flink's
    Min/MaxWithRetractAggFunction keeps them, so retracting the extreme falls back to the next."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        self.fn = "min" if call.function == "MIN" else "max"
        self.pick = min if call.function == "MIN" else max

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        if sign is None:
            return [(self.arg(batch), self.fn, None)]
        return [(self.arg(batch), "list", None), (sign, "list", None)]

    def create(self) -> list[Any]:
        return [None]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        if len(values) == 2:
            counts = dict(acc[0] or ())
            for v, s in zip(values[0] or (), values[1] or (), strict=True):
                if v is not None:
                    counts[v] = counts.get(v, 0) + s
                    if counts[v] == 0:
                        del counts[v]
            acc[0] = tuple(counts.items()) or None  # (value, net count) pairs: plain data for the state
            return
        v = values[0]
        if v is not None:
            acc[0] = v if acc[0] is None else self.pick(acc[0], v)

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        if not self.retracting:
            self.merge(acc, other)
            return
        counts = dict(acc[0] or ())
        for v, c in other[0] or ():
            counts[v] = counts.get(v, 0) + c
        acc[0] = tuple((v, c) for v, c in counts.items() if c) or None

    def result(self, acc: list[Any]) -> Any:
        if not self.retracting:
            return acc[0]
        live = [v for v, c in acc[0] or () if c > 0]
        return self.pick(live) if live else None


class CountDistinct(AggFunction):
    """COUNT(DISTINCT x).  Over an append-only input the accumulator is the set of values; over an
    updating one it is each value with its net count (Flink's distinct view counts occurrences),
    so a value leaves only when its last row is retracted."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        if pa.types.is_floating(x.type):
            # -0.0 + 0.0 is 0.0: Arrow's distinct keeps -0.0 and 0.0 apart, but they are one value
            # (in the set here and in the columnar form, which takes the partial as it is)
            x = pc.add(x, pa.scalar(0.0, x.type))
        if sign is not None:
            return [(x, "list", None), (sign, "list", None)]
        return [(x, "distinct", pc.CountOptions(mode="only_valid"))]

    def create(self) -> list[Any]:
        return [None] if self.retracting else [set()]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        if len(values) == 2:
            counts = dict(acc[0] or ())
            for v, s in zip(values[0] or (), values[1] or (), strict=True):
                if v is not None:
                    counts[v] = counts.get(v, 0) + s
                    if counts[v] == 0:
                        del counts[v]
            acc[0] = tuple(counts.items()) or None  # (value, net count) pairs: plain data for the state
            return
        if values[0]:
            acc[0].update(values[0])

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        if not self.retracting:
            acc[0] |= other[0]
            return
        counts = dict(acc[0] or ())
        for v, c in other[0] or ():
            counts[v] = counts.get(v, 0) + c
        acc[0] = tuple((v, c) for v, c in counts.items() if c) or None

    def copy(self, acc: list[Any]) -> list[Any]:
        return list(acc) if self.retracting else [set(acc[0])]

    def values(self, acc: list[Any]) -> set[Any]:
        """The distinct values the group holds now."""
        if not self.retracting:
            return acc[0]
        return {v for v, c in acc[0] or () if c > 0}

    def result(self, acc: list[Any]) -> Any:
        return len(self.values(acc))


class Statistic(AggFunction):
    """STDDEV_POP/SAMP and VAR_POP/SAMP from the count, sum and sum of squares (so a retraction
    subtracts its row), as Flink's reduction of them to SUM and COUNT: over integers and DECIMALs
    the sums are exact and the result is truncated to an integer type or rounded HALF_UP to the
    DECIMAL's scale; over DOUBLE/FLOAT they are computed in floating point."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        if pa.types.is_integer(x.type):
            x = x.cast(pa.decimal256(19, 0))  # squares of BIGINTs, and their sums, stay exact
        elif pa.types.is_decimal(x.type) and 2 * x.type.precision + 1 <= 76:
            x = x.cast(pa.decimal256(x.type.precision, x.type.scale))
        else:
            x = x.cast(pa.float64())  # DOUBLE, FLOAT, and DECIMALs too wide to square exactly
        square = pc.multiply(x, x)
        counted = pc.if_else(pc.is_valid(x), 1, 0)
        if sign is not None:
            x = pc.multiply(x, sign.cast(x.type) if pa.types.is_floating(x.type) else sign)
            square = pc.multiply(square, sign.cast(square.type) if pa.types.is_floating(square.type) else sign)
            counted = pc.multiply(counted, sign)
        return [(x, "sum", _SUM_OPTS), (square, "sum", _SUM_OPTS), (counted, "sum", _SUM_OPTS)]

    def create(self) -> list[Any]:
        return [0, 0, 0]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        for i in range(3):
            if values[i] is not None:
                acc[i] += values[i]

    def result(self, acc: list[Any]) -> Any:
        total, squares, n = acc
        sample = self.call.function.endswith("_SAMP")
        if n == 0 or (sample and n == 1):
            return None
        t = self.call.type
        if pa.types.is_floating(t):
            variance = max((squares - total * total / n) / (n - 1 if sample else n), 0.0)
            return math.sqrt(variance) if self.call.function.startswith("STDDEV") else variance
        with localcontext() as ctx:
            ctx.prec = 80
            total, squares = Decimal(total), Decimal(squares)
            variance = max((squares - total * total / n) / (n - 1 if sample else n), Decimal(0))
            value = variance.sqrt() if self.call.function.startswith("STDDEV") else variance
            if pa.types.is_integer(t):
                return int(value)  # toward zero, as Flink's cast back to the argument's type
            return value.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)


class Sequence(AggFunction):
    """LISTAGG, FIRST_VALUE and LAST_VALUE: the argument's non-NULL values in arrival order.  Over
    an updating input the accumulator keeps them all, and a retraction removes the value's first
    occurrence (Flink's ...WithRetract functions); over an append-only one FIRST_VALUE and
    LAST_VALUE keep just the one value."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        if sign is None:
            return [(x, "list", None)]
        return [(x, "list", None), (sign, "list", None)]

    def create(self) -> list[Any]:
        return [[]]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        items = values[0] or []
        signs = values[1] if len(values) > 1 else [1] * len(items)
        kept: list[Any] = acc[0]
        for value, s in zip(items, signs, strict=True):
            if value is None:
                continue
            if s > 0:
                kept.append(value)
            elif value in kept:
                kept.remove(value)
        if not self.retracting and self.call.function != "LISTAGG" and len(kept) > 1:
            acc[0] = [kept[0]] if self.call.function == "FIRST_VALUE" else [kept[-1]]

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        acc[0] = acc[0] + other[0]

    def copy(self, acc: list[Any]) -> list[Any]:
        return [list(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        kept = acc[0]
        if not kept:
            return None
        if self.call.function == "FIRST_VALUE":
            return kept[0]
        if self.call.function == "LAST_VALUE":
            return kept[-1]
        return (self.call.separator if self.call.separator is not None else ",").join(kept)


class DistinctSum(CountDistinct):
    """SUM(DISTINCT x) and AVG(DISTINCT x): the distinct values (kept as COUNT(DISTINCT) keeps them),
    summed (and averaged) as SUM and AVG would sum them."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        # the plain SUM/AVG over the same column types and wraps the distinct values' total
        self.plain = (Avg if call.function == "AVG" else Sum)(replace(call, distinct=False), retracting)

    def result(self, acc: list[Any]) -> Any:
        values = self.values(acc)
        return self.plain.result([sum(values), len(values)]) if values else None


class UserAggregateFunction(AggFunction):
    """An AggregateFunction UDF: Arrow collects each group's values, the UDF folds them."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        self.impl = USER_AGGREGATES[call.function].implementation

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        arg = self.arg(batch) if self.call.arg is not None else pa.nulls(batch.num_rows, pa.int8())
        return [(arg, "list", None)]

    def create(self) -> list[Any]:
        return [self.impl.create_accumulator()]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        for v in values[0] or ():
            out = self.impl.accumulate(acc[0], *(() if self.call.arg is None else (v,)))
            if out is not None:
                acc[0] = out

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        out = self.impl.merge(acc[0], other[0])
        if out is not None:
            acc[0] = out

    def copy(self, acc: list[Any]) -> list[Any]:
        return [copy.deepcopy(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        return self.impl.get_value(acc[0])


def make(call: AggCall, retracting: bool = False) -> AggFunction:
    if call.function in STATISTICS:
        return Statistic(call, retracting)
    if call.function in SEQUENCES:
        return Sequence(call, retracting)
    if call.function not in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
        return UserAggregateFunction(call, retracting)
    if call.function == "COUNT":
        return CountDistinct(call, retracting) if call.distinct else Count(call, retracting)
    if call.function in ("SUM", "AVG"):
        if call.distinct:
            return DistinctSum(call, retracting)
        return Sum(call, retracting) if call.function == "SUM" else Avg(call, retracting)
    if call.function in ("MIN", "MAX"):
        return MinMax(call, retracting)
    raise ValueError(call.function)


class PreAggregator:
    """Hash-aggregates a batch per group key into partials, in one Arrow group_by."""

    def __init__(self, functions: list[AggFunction]) -> None:
        self.functions = functions

    def grouped(
        self, keys: list[pa.Array], batch: pa.RecordBatch, sign: pa.Array | None
    ) -> tuple[pa.Table, list[str], list[list[str]]]:
        """(one row per group, its key column names, per function the names of its partial columns).

        Groups come in the order of their first row in the batch.  The columnar group
        aggregation takes the table as it is; ``__call__`` turns it into Python values.
        """
        columns: dict[str, pa.Array] = {f"k{i}": k for i, k in enumerate(keys)}
        specs = []
        layout: list[list[str]] = []
        for fi, fn in enumerate(self.functions):
            names = []
            for pi, (arr, agg, opts) in enumerate(fn.partials(batch, sign)):
                col = f"f{fi}p{pi}"
                columns[col] = arr
                specs.append((col, agg, opts) if opts is not None else (col, agg))
                names.append(f"{col}_{agg}")
            layout.append(names)
        if not keys:
            columns["k$"] = pa.nulls(batch.num_rows, pa.int8())
        table = pa.table(columns)
        key_names = [f"k{i}" for i in range(len(keys))] or ["k$"]
        return table.group_by(key_names, use_threads=False).aggregate(specs), key_names, layout

    def __call__(
        self, keys: list[pa.Array], batch: pa.RecordBatch, sign: pa.Array | None
    ) -> tuple[list[list[Any]], list[list[list[Any]]]]:
        """(group key columns as Python lists, per function a list of per-group partial value lists)."""
        grouped, key_names, layout = self.grouped(keys, batch, sign)
        key_lists = [grouped.column(k).to_pylist() for k in key_names] if keys else [[None] * grouped.num_rows]
        partials = [[grouped.column(n).to_pylist() for n in names] for names in layout]
        per_group = [
            [[col[g] for col in fn_cols] for g in range(grouped.num_rows)] for fn_cols in partials
        ]
        return key_lists, per_group
