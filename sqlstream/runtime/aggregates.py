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
from collections import Counter
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.aggregates import (
    COLLECT,
    JSON_AGGREGATES,
    PERCENTILE,
    SEQUENCES,
    STATISTICS,
    AggCall,
    wrap_integer,
)
from sqlstream.core.casts import cast_to_float
from sqlstream.core.errors import DataError
from sqlstream.core.functions.json import object_text, split_entry
from sqlstream.core.functions.udfs import USER_AGGREGATES
from sqlstream.core.udf import implements_retract

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


def _signed_lists(x: pa.Array, sign: pa.Array) -> list[Partial]:
    """Per group the values that rows add and those that -U/-D rows take back (NULLs included,
    dropped by _count_values): only each value's net count matters to the functions using it."""
    added = pc.greater(sign, 0)
    nothing = pa.nulls(len(x), x.type)
    return [(pc.if_else(added, x, nothing), "list", None), (pc.if_else(added, nothing, x), "list", None)]


def _count_values(counts: dict[Any, int], added: list[Any] | None, removed: list[Any] | None) -> bool:
    """Apply a group's added and removed values to ``counts`` (value -> occurrences, no zero
    entries), a C-level Counter per list and Python per distinct value; whether a value left."""
    left = False
    for values, step in ((added, 1), (removed, -1)):
        if not values:
            continue
        for value, n in Counter(values).items():
            if value is None:
                continue
            total = counts.get(value, 0) + step * n
            if total == 0:
                del counts[value]
                left = True
            else:
                counts[value] = total
    return left


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
    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        self.fn = "min" if call.function == "MIN" else "max"
        self.pick = min if call.function == "MIN" else max

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        return [(self.arg(batch), self.fn, None)]

    def create(self) -> list[Any]:
        return [None]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        v = values[0]
        if v is not None:
            acc[0] = v if acc[0] is None else self.pick(acc[0], v)

    def result(self, acc: list[Any]) -> Any:
        return acc[0]


class MinMaxWithRetract(AggFunction):
    """MIN/MAX over an updating input, as Flink's Min/MaxWithRetractAggFunction: a count per value
    (value -> occurrences) and the current extreme, looked for again among the values left when a
    retraction takes its last occurrence away.  The accumulator is [extreme or None, counts]."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        self.pick = min if call.function == "MIN" else max

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        assert sign is not None
        return _signed_lists(self.arg(batch), sign)

    def create(self) -> list[Any]:
        return [None, {}]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        counts = acc[1]
        left = _count_values(counts, values[0], values[1])
        if not counts:
            acc[0] = None
        elif acc[0] is None or (left and acc[0] not in counts):
            acc[0] = self.pick(counts)
        else:
            # values added and taken back again within the batch are not among the counts
            added = [v for v in set(values[0] or ()) if v is not None and v in counts]
            if added:
                acc[0] = self.pick(acc[0], self.pick(added))

    def copy(self, acc: list[Any]) -> list[Any]:
        return [acc[0], dict(acc[1])]

    def result(self, acc: list[Any]) -> Any:
        return acc[0]


class CountDistinct(AggFunction):
    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        if pa.types.is_floating(x.type):
            # -0.0 + 0.0 is 0.0: Arrow's distinct keeps -0.0 and 0.0 apart, but they are one value
            # (in the set here and in the columnar form, which takes the partial as it is)
            x = pc.add(x, pa.scalar(0.0, x.type))
        return [(x, "distinct", pc.CountOptions(mode="only_valid"))]

    def create(self) -> list[Any]:
        return [set()]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        if values[0]:
            acc[0].update(values[0])

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        acc[0] |= other[0]

    def copy(self, acc: list[Any]) -> list[Any]:
        return [set(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        return len(acc[0])


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


def _hashable(value: Any) -> Any:
    """A value as a dict key: an ARRAY's or ROW's list/dict made a tuple, recursively."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


class Sequence(AggFunction):
    """LISTAGG, FIRST_VALUE and LAST_VALUE: the argument's non-NULL values in arrival order (all
    values, NULLs too, for ARRAY_AGG unless IGNORE NULLS, whose result is their ARRAY).  Over an
    updating input the accumulator keeps them all, and a retraction removes the value's first
    occurrence (Flink's ...WithRetract functions); over an append-only one FIRST_VALUE and
    LAST_VALUE keep just the one value.  ARRAY_AGG(DISTINCT x) is Flink's distinct aggregate
    around ARRAY_AGG: a count per value, the value added when its count rises from 0 and removed
    when it falls back to 0 (the accumulator's second element)."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        columns = [self.arg(batch), *(batch.column(c) for c in self.call.extra_args)]
        if sign is not None:
            columns.append(sign)
        return [(c, "list", None) for c in columns]

    def create(self) -> list[Any]:
        return [[], {}] if self.call.distinct else [[]]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        items = values[0] or []
        filtered = bool(self.call.extra_args)  # ARRAY_AGG ... FILTER (WHERE c): c's values come next
        conditions = values[1] if filtered else [True] * len(items)
        signs = values[1 + filtered] if len(values) > 1 + filtered else [1] * len(items)
        kept: list[Any] = acc[0]
        keep_nulls = self.call.function == "ARRAY_AGG" and not self.call.ignore_nulls
        counts: dict[Any, int] | None = acc[1] if self.call.distinct else None
        for value, condition, s in zip(items, conditions, signs, strict=True):
            if (value is None and not keep_nulls) or condition is not True:
                continue
            if counts is not None:
                key = _hashable(value)
                before = counts.get(key, 0)
                after = before + (1 if s > 0 else -1)
                if after > 0:
                    counts[key] = after
                else:
                    counts.pop(key, None)
                if (before > 0) == (after > 0):
                    continue  # the distinct values did not change
            if s > 0:
                kept.append(value)
            elif value in kept:
                kept.remove(value)
        if not self.retracting and self.call.function in ("FIRST_VALUE", "LAST_VALUE") and len(kept) > 1:
            acc[0] = [kept[0]] if self.call.function == "FIRST_VALUE" else [kept[-1]]

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        if not self.call.distinct:
            acc[0] = acc[0] + other[0]
            return
        counts = acc[1]
        for value in other[0]:
            key = _hashable(value)
            if key not in counts:
                acc[0].append(value)
            counts[key] = counts.get(key, 0) + other[1][key]

    def copy(self, acc: list[Any]) -> list[Any]:
        return [list(acc[0]), dict(acc[1])] if self.call.distinct else [list(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        kept = acc[0]
        if not kept:
            return None
        if self.call.function == "FIRST_VALUE":
            return kept[0]
        if self.call.function == "LAST_VALUE":
            return kept[-1]
        if self.call.function == "ARRAY_AGG":
            return list(kept)
        return (self.call.separator if self.call.separator is not None else ",").join(kept)


class Collect(AggFunction):
    """COLLECT as Flink's CollectAggFunction: a count per non-NULL value, a retraction taking one
    off (removing the value at 1, leaving -1 for a value never added), merging adding the counts;
    the result is the MULTISET of (value, count) entries, empty rather than NULL. COLLECT(DISTINCT
    x) is Flink's distinct aggregate around it: each value present counts once."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        return [(x, "list", None)] if sign is None else [(x, "list", None), (sign, "list", None)]

    def create(self) -> list[Any]:
        return [{}]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        items = values[0] or []
        signs = values[1] if len(values) > 1 else [1] * len(items)
        counts: dict[Any, list[Any]] = acc[0]  # hashable value -> [value, count]
        for value, s in zip(items, signs, strict=True):
            if value is None:
                continue
            key = _hashable(value)
            entry = counts.get(key)
            if s > 0:
                if entry is None:
                    counts[key] = [value, 1]
                else:
                    entry[1] += 1
            elif entry is None:
                counts[key] = [value, -1]
            elif entry[1] == 1:
                del counts[key]
            else:
                entry[1] -= 1

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        counts = acc[0]
        for key, (value, n) in other[0].items():
            if key in counts:
                counts[key][1] += n
            else:
                counts[key] = [value, n]

    def copy(self, acc: list[Any]) -> list[Any]:
        return [{k: list(v) for k, v in acc[0].items()}]

    def result(self, acc: list[Any]) -> Any:
        entries = acc[0].values()
        if self.call.distinct:
            return [(value, 1) for value, n in entries if n > 0]
        return [(value, n) for value, n in entries]


class Percentile(AggFunction):
    """PERCENTILE as Flink's PercentileAggFunction: a count per value (as a DOUBLE), a row adding
    its frequency (1 without one; a NULL or non-positive frequency, or a NULL value, adds nothing)
    and a retraction taking it away; the percentile at position p * (n - 1) + 1 of the sorted
    values, interpolated linearly between its neighbours."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        # as Java's Number.doubleValue: a BIGINT beyond 2^53 rounds to the nearest double
        x = cast_to_float(x, pa.float64()) if pa.types.is_decimal(x.type) else pc.cast(x, pa.float64(), safe=False)
        columns = [x]
        if self.call.extra_args:
            columns.append(pc.cast(batch.column(self.call.extra_args[0]), pa.int64()))
        if sign is not None:
            columns.append(sign)
        return [(c, "list", None) for c in columns]

    def create(self) -> list[Any]:
        return [{}]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        items = values[0] or []
        frequencies = values[1] if self.call.extra_args else [1] * len(items)
        signs = values[-1] if len(values) > 1 + bool(self.call.extra_args) else [1] * len(items)
        counts: dict[float, int] = acc[0]
        for value, frequency, s in zip(items, frequencies, signs, strict=True):
            if value is None or frequency is None or frequency <= 0:
                continue
            count = counts.get(value, 0) + (frequency if s > 0 else -frequency)
            if count:
                counts[value] = count
            else:
                del counts[value]

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        counts: dict[float, int] = acc[0]
        for value, n in other[0].items():
            count = counts.get(value, 0) + n
            if count:
                counts[value] = count
            else:
                del counts[value]

    def copy(self, acc: list[Any]) -> list[Any]:
        return [dict(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        entries = sorted(acc[0].items())
        total = sum(c for _, c in entries)
        if total <= 0:
            return None
        found: list[float] = [0.0] * len(self.call.percentages)
        positions = sorted((p * (total - 1) + 1, i) for i, p in enumerate(self.call.percentages))
        j, seen = 0, entries[0][1]
        for position, i in positions:
            lower, higher = math.floor(position), math.ceil(position)
            while seen < lower:
                j += 1
                seen += entries[j][1]
            value = entries[j][0]
            found[i] = value if seen >= higher else (higher - position) * value + (position - lower) * entries[j + 1][0]
        return found if pa.types.is_list(self.call.type) else found[0]


class JsonArrayAgg(AggFunction):
    """JSON_ARRAYAGG as Flink's JsonArrayAggFunction: the values' JSON texts in arrival order (a
    NULL as null under NULL ON NULL, left out under ABSENT ON NULL); a retraction removes the
    value's first occurrence. An empty group gives '[]'."""

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        return [(x, "list", None)] if sign is None else [(x, "list", None), (sign, "list", None)]

    def create(self) -> list[Any]:
        return [[]]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        items = values[0] or []
        signs = values[1] if len(values) > 1 else [1] * len(items)
        keep_nulls = self.call.function.endswith("_NULL_ON_NULL")
        kept: list[str] = acc[0]
        for value, s in zip(items, signs, strict=True):
            if value is None:
                if not keep_nulls:
                    continue
                value = "null"
            if s > 0:
                kept.append(value)
            elif value in kept:
                kept.remove(value)

    def copy(self, acc: list[Any]) -> list[Any]:
        return [list(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        return "[" + ",".join(acc[0]) + "]"


class JsonObjectAgg(AggFunction):
    """JSON_OBJECTAGG as Flink's JsonObjectAggFunction: key -> JSON text ('' marks a NULL value
    kept under NULL ON NULL); a key arriving while present fails the job; a retraction removes the
    key when its value matches (a NULL its mark: Flink re-accumulates such a key after its
    retraction, reference case json.objectagg_retracting_a_null_value) and is remembered otherwise,
    a remembered retraction cancelling a matching entry when accumulators merge. Keys are written
    sorted."""

    _DUPLICATE = "Key '{}' is already present. Duplicate keys are not allowed in JSON_OBJECTAGG. Please ensure that keys are unique."

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        x = self.arg(batch)
        return [(x, "list", None)] if sign is None else [(x, "list", None), (sign, "list", None)]

    def create(self) -> list[Any]:
        return [{}, {}]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        entries = values[0] or []
        signs = values[1] if len(values) > 1 else [1] * len(entries)
        skip_nulls = self.call.function.endswith("_ABSENT_ON_NULL")
        members, retracted = acc
        for entry, s in zip(entries, signs, strict=True):
            key, text = split_entry(entry)
            value = None if text == "null" else text
            if s > 0:
                if key in members:
                    raise DataError(self._DUPLICATE.format(key))
                if value is not None or not skip_nulls:
                    members[key] = "" if value is None else value
            elif key in members and members[key] == ("" if value is None else value):
                del members[key]
            else:
                retracted[key] = value

    def merge_acc(self, acc: list[Any], other: list[Any]) -> None:
        members, retracted = acc
        for key, value in other[1].items():
            if key in members and members[key] == value:
                del members[key]
            else:
                retracted[key] = value
        for key, value in other[0].items():
            if key in retracted and retracted[key] == value:
                del retracted[key]
                continue
            if key in members:
                raise DataError(self._DUPLICATE.format(key))
            members[key] = value

    def copy(self, acc: list[Any]) -> list[Any]:
        return [dict(acc[0]), dict(acc[1])]

    def result(self, acc: list[Any]) -> Any:
        return object_text({k: v or "null" for k, v in acc[0].items()})


class DistinctSum(CountDistinct):
    """SUM(DISTINCT x) and AVG(DISTINCT x): the set of distinct values, summed (and averaged) as
    SUM and AVG would sum them (over an append-only input, like COUNT(DISTINCT))."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        # the plain SUM/AVG over the same column types and wraps the distinct values' total
        self.plain = (Avg if call.function == "AVG" else Sum)(replace(call, distinct=False), retracting)

    def result(self, acc: list[Any]) -> Any:
        values = acc[0]
        return self.plain.result([sum(values), len(values)]) if values else None


class DistinctWithRetract(AggFunction):
    """COUNT/SUM/AVG(DISTINCT x) over an updating input, as Flink's distinct map view: each value's
    number of occurrences, the value counted while that is above zero.  The accumulator is
    [counts]."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        plain = replace(call, distinct=False)
        self.plain = None if call.function == "COUNT" else (Avg if call.function == "AVG" else Sum)(plain, retracting)

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        assert sign is not None
        x = self.arg(batch)
        if pa.types.is_floating(x.type):
            x = pc.add(x, pa.scalar(0.0, x.type))  # -0.0 is 0.0 (see CountDistinct)
        return _signed_lists(x, sign)

    def create(self) -> list[Any]:
        return [{}]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        _count_values(acc[0], values[0], values[1])

    def copy(self, acc: list[Any]) -> list[Any]:
        return [dict(acc[0])]

    def result(self, acc: list[Any]) -> Any:
        values = acc[0]
        if self.plain is None:
            return len(values)
        return self.plain.result([sum(values), len(values)]) if values else None


class UserAggregateFunction(AggFunction):
    """An AggregateFunction UDF: Arrow collects each group's values (a list per argument column),
    the UDF folds them a row at a time, ``accumulate(acc, a, b, ...)`` taking the row's arguments
    in call order."""

    def __init__(self, call: AggCall, retracting: bool) -> None:
        super().__init__(call, retracting)
        self.impl = USER_AGGREGATES[call.function].implementation
        self.width = 0 if call.arg is None else 1 + len(call.extra_args)

    def partials(self, batch: pa.RecordBatch, sign: pa.Array | None) -> list[Partial]:
        if self.call.arg is None:
            columns = [pa.nulls(batch.num_rows, pa.int8())]  # one list per group, for its row count
        else:
            columns = [batch.column(i) for i in (self.call.arg, *self.call.extra_args)]
        if sign is not None:
            columns.append(sign)
        return [(c, "list", None) for c in columns]

    def create(self) -> list[Any]:
        return [self.impl.create_accumulator()]

    def merge(self, acc: list[Any], values: list[Any]) -> None:
        """Each row in arrival order: accumulate, or (a -U/-D of an updating input) retract."""
        width = max(self.width, 1)
        items = [v or () for v in values[:width]]
        signs = values[width] if len(values) > width else None
        rows = zip(*items, strict=True) if self.width else (() for _ in items[0])
        for i, row in enumerate(rows):
            step = self.impl.accumulate if signs is None or signs[i] > 0 else self.impl.retract
            out = step(acc[0], *row)
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
    """The function computing ``call``; over an updating input (``retracting``) its retractable form."""
    if call.function in STATISTICS:
        return Statistic(call, retracting)
    if call.function == COLLECT:
        return Collect(call, retracting)
    if call.function == PERCENTILE:
        return Percentile(call, retracting)
    if call.function in SEQUENCES:
        return Sequence(call, retracting)
    if call.function in JSON_AGGREGATES:
        return JsonArrayAgg(call, retracting) if call.function.startswith("JSON_ARRAYAGG") else JsonObjectAgg(call, retracting)
    if call.function not in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
        if retracting and not implements_retract(USER_AGGREGATES[call.function].implementation):
            raise ValueError(f"aggregate function {call.function} does not implement retract")
        return UserAggregateFunction(call, retracting)
    if retracting and call.function in ("MIN", "MAX"):
        return MinMaxWithRetract(call, retracting)
    if retracting and call.distinct:
        return DistinctWithRetract(call, retracting)
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
