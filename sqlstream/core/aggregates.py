"""Aggregate calls as the plan carries them: which function, over which input column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from sqlstream.core.functions.udfs import USER_AGGREGATES
from sqlstream.core.udf import implements_retract


@dataclass(frozen=True)
class AggCall:
    function: str  # COUNT | SUM | MIN | MAX | AVG | STDDEV_POP | ... | LISTAGG | FIRST_VALUE | LAST_VALUE | ARRAY_AGG
    arg: int | None  # input column; None for COUNT(*)
    distinct: bool
    type: pa.DataType
    name: str
    separator: str | None = None  # LISTAGG's, a constant
    offset: int | None = None  # LAG's: how many rows back, a constant
    default: object = None  # LAG's: the value when there is no row that far back, a constant of ``type``
    ignore_nulls: bool = False  # ARRAY_AGG(x IGNORE NULLS): NULLs left out (RESPECT NULLS keeps them)
    # input columns after ``arg``: an aggregate UDF's further arguments, PERCENTILE's frequency,
    # the FILTER condition of ARRAY_AGG (which keeps NULLs, so the CASE form of FILTER does not do)
    extra_args: tuple[int, ...] = ()
    # PERCENTILE's percentages, constants in [0, 1] (one, or an ARRAY's when ``type`` is an ARRAY)
    percentages: tuple[float, ...] = ()

    def remapped(self, mapping: dict[int, int]) -> AggCall:
        """The same call over an input whose columns moved (old index -> new)."""
        return replace(self, arg=None if self.arg is None else mapping[self.arg],
                       extra_args=tuple(mapping[a] for a in self.extra_args))

    @property
    def columns(self) -> set[int]:
        """The input columns the call reads."""
        return ({self.arg} if self.arg is not None else set()) | set(self.extra_args)

    def describe(self) -> str:
        inner = "*" if self.arg is None else f"{'DISTINCT ' if self.distinct else ''}${self.arg}"
        if self.percentages:
            p = ", ".join(map(str, self.percentages))
            inner += f", ARRAY[{p}]" if pa.types.is_list(self.type) else f", {p}"
        inner += "".join(f", ${a}" for a in self.extra_args)
        if self.separator is not None:
            inner += f", '{self.separator}'"
        if self.ignore_nulls:
            inner += " IGNORE NULLS"
        if self.offset is not None:
            d = self.default
            inner += f", {self.offset}, {'NULL' if d is None else repr(d) if isinstance(d, str) else d}"
        return f"{self.function}({inner})"


# the built-in aggregates beyond COUNT/SUM/MIN/MAX/AVG: GROUP BY and windows run them per key
# (no columnar form, no OVER)
STATISTICS = ("STDDEV_POP", "STDDEV_SAMP", "VAR_POP", "VAR_SAMP")
SEQUENCES = ("LISTAGG", "FIRST_VALUE", "LAST_VALUE", "ARRAY_AGG")
# PERCENTILE(x, p | ARRAY[p, ...] [, frequency]): a count per value (GROUP BY and windows, not OVER)
PERCENTILE = "PERCENTILE"
# COLLECT([DISTINCT] x): the MULTISET of the non-NULL values (GROUP BY and windows, not OVER)
COLLECT = "COLLECT"
# Flink's names of JSON_ARRAYAGG / JSON_OBJECTAGG with their ON NULL clause: their argument is the
# value's JSON text (JSON_OBJECTAGG's '"key":value'), see planner.binder._json_aggregate_call
JSON_AGGREGATES = ("JSON_ARRAYAGG_ABSENT_ON_NULL", "JSON_ARRAYAGG_NULL_ON_NULL", "JSON_OBJECTAGG_NULL_ON_NULL",
                   "JSON_OBJECTAGG_ABSENT_ON_NULL")


def wrap_integer(total: int, t: pa.DataType) -> int:
    """An exact integer sum as Java's int/long arithmetic leaves it: wrapped into ``t``'s width
    (Flink's SUM(INT) is INT and overflows silently)."""
    bits = t.bit_width
    wrapped = total & ((1 << bits) - 1)
    return wrapped - (1 << bits) if wrapped >= 1 << (bits - 1) else wrapped


BUILT_INS = ("COUNT", "SUM", "AVG", "MIN", "MAX", *STATISTICS, *SEQUENCES, *JSON_AGGREGATES, PERCENTILE, COLLECT)


def retraction_refusal(call: AggCall) -> str | None:
    """Why ``call`` cannot consume -U/-D rows, or None if it can.  Every built-in can, as Flink's
    retractable forms (MIN/MAX and DISTINCT keep a count per value, STDDEV/VAR sums of x and x^2,
    LISTAGG/FIRST_VALUE/LAST_VALUE and the JSON aggregates their values in arrival order); an aggregate UDF only if it
    implements ``retract``."""
    if call.function in BUILT_INS:
        return None
    udaf = USER_AGGREGATES.get(call.function)
    if udaf is not None and not implements_retract(udaf.implementation):
        return (f"aggregate function {call.function} ({type(udaf.implementation).__name__}) does not "
                "implement retract(accumulator, *args), which an updating input needs")
    return None


def row_encodable(t: pa.DataType) -> bool:
    """Types whose MIN/MAX the columnar GROUP BY keeps in numpy columns (fixed-width values and
    strings/binaries; runtime.operators.group_agg_columnar maps each to its storage), which are
    also the types runtime.state.row_codec encodes for rows kept in RocksDB."""
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or (pa.types.is_floating(t) and t != pa.float16())
            or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t))


def rank_columnar_rows(types: Sequence[pa.DataType]) -> bool:
    """Whether the vectorized Top-N of an append-only input can keep its rows in RocksDB
    (runtime.operators.rank_rocksdb): every input column of a type the row encoding has."""
    return all(row_encodable(t) for t in types)


def group_agg_columnar(aggs: list[AggCall], retracting: bool) -> bool:
    """Whether a non-windowed GROUP BY has an exact columnar form: every aggregate a built-in
    over values the numpy columns hold, DISTINCT only in COUNT of an append-only input, MIN/MAX
    only over an append-only input (retracting them needs every value)."""
    for a in aggs:
        if a.function not in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
            return False
        if a.distinct and (a.function != "COUNT" or retracting):
            return False
        if a.function in ("SUM", "AVG") and not (pa.types.is_integer(a.type) or a.type in (pa.float32(), pa.float64())):
            return False
        if a.function in ("MIN", "MAX") and (retracting or not row_encodable(a.type)):
            return False
    return True


def group_agg_columnar_rows(aggs: list[AggCall], retracting: bool, key_types: list[pa.DataType],
                            input_types: Sequence[pa.DataType] | None) -> bool:
    """Whether a non-windowed GROUP BY can keep its columnar state as encoded rows in RocksDB
    (runtime.operators.group_agg_rocksdb): the columnar form, with keys and COUNT(DISTINCT)
    values (``input_types``: the input's columns; None: not known, the operator checks the values'
    type when they come) of the types the row encoding has (those of MIN/MAX); each distinct value
    is an entry of its own there."""
    return (group_agg_columnar(aggs, retracting) and all(row_encodable(t) for t in key_types)
            and (input_types is None
                 or all(row_encodable(input_types[a.arg]) for a in aggs if a.distinct and a.arg is not None)))


def window_agg_columnar(aggs: list[AggCall]) -> bool:
    """Whether a window aggregation has a columnar form (built-ins over non-decimal values)."""
    for a in aggs:
        if a.function not in ("COUNT", "SUM", "MIN", "MAX", "AVG"):
            return False
        if pa.types.is_decimal(a.type) or pa.types.is_list(a.type) or pa.types.is_struct(a.type):
            return False
        if a.distinct and a.function != "COUNT":
            return False
    return True


def window_agg_columnar_rows(aggs: list[AggCall], key_types: list[pa.DataType]) -> bool:
    """Whether a window aggregation can keep its columnar partials as encoded rows in RocksDB
    (runtime.operators.window_agg_rocksdb): the columnar form without COUNT(DISTINCT) (its values
    stay per key there), SUM/AVG of numbers, MIN/MAX and keys of the types the row encoding has."""
    if not window_agg_columnar(aggs) or any(a.distinct for a in aggs):
        return False
    for a in aggs:
        if a.function in ("SUM", "AVG") and not (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)):
            return False
        if a.function in ("MIN", "MAX") and not row_encodable(a.type):
            return False
    return all(row_encodable(t) for t in key_types)
