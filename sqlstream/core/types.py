"""Mapping between Flink SQL types and Arrow types.

Arrow is the runtime's only data representation, so every SQL type a user can
declare must map to exactly one Arrow type, and back for DESCRIBE.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import ParseError

from sqlstream.core.errors import PlanError

_DT = exp.DataType.Type

_SIMPLE: dict[exp.DataType.Type, pa.DataType] = {
    _DT.BOOLEAN: pa.bool_(),
    _DT.TINYINT: pa.int8(),
    _DT.SMALLINT: pa.int16(),
    _DT.INT: pa.int32(),
    _DT.BIGINT: pa.int64(),
    _DT.FLOAT: pa.float32(),
    _DT.DOUBLE: pa.float64(),
    _DT.TEXT: pa.string(),
    _DT.VARCHAR: pa.string(),
    _DT.NVARCHAR: pa.string(),
    _DT.CHAR: pa.string(),
    _DT.NCHAR: pa.string(),
    _DT.BINARY: pa.binary(),
    _DT.VARBINARY: pa.binary(),
    _DT.DATE: pa.date32(),
    _DT.TIME: pa.time32("ms"),
}


def _unit_for_precision(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


def _int_params(dt: exp.DataType) -> list[int]:
    out: list[int] = []
    for p in dt.expressions:
        node = p.this if isinstance(p, exp.DataTypeParam) else p
        try:
            out.append(int(node.name if hasattr(node, "name") else node))
        except (TypeError, ValueError):
            continue
    return out


def arrow_type(dt: exp.DataType) -> pa.DataType:
    """The Arrow type for a parsed SQL type; raises PlanError for unsupported types."""
    kind = dt.this
    params = _int_params(dt)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind in (_DT.TIMESTAMP, _DT.DATETIME, _DT.TIMESTAMPNTZ):
        return pa.timestamp(_unit_for_precision(params[0] if params else 6))
    if kind in (_DT.TIMESTAMPLTZ, _DT.TIMESTAMPTZ):
        return pa.timestamp(_unit_for_precision(params[0] if params else 6), tz="UTC")
    if kind == _DT.DECIMAL:
        precision = params[0] if params else 10
        scale = params[1] if len(params) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise PlanError(f"DECIMAL({precision}, {scale}) is out of range: the precision must be between 1 and "
                            "38 (Flink's maximum) and the scale between 0 and the precision")
        return pa.decimal128(precision, scale)
    if kind == _DT.ARRAY and dt.expressions:
        return pa.list_(arrow_type(dt.expressions[0]))
    if kind == _DT.MAP and len(dt.expressions) == 2:
        return pa.map_(arrow_type(dt.expressions[0]), arrow_type(dt.expressions[1]))
    if kind == _DT.STRUCT and dt.expressions:
        # ROW<name type, ...>: each field a ColumnDef (its NOT NULL is not kept: Arrow's fields
        # carry no constraint sqlstream checks, as for top-level columns)
        names = [f.name for f in dt.expressions]
        if len({n.lower() for n in names}) != len(names):
            raise PlanError(f"ROW type {dt.sql()} repeats a field name")
        return pa.struct([pa.field(f.name, arrow_type(f.args["kind"])) for f in dt.expressions])
    meta = dt.meta if hasattr(dt, "meta") else {}
    raise PlanError(f"unsupported SQL type {dt.sql()}", meta.get("line"), meta.get("col"))


def parse_type(text: str) -> pa.DataType:
    """The Arrow type for a SQL type written as text in Flink's spelling (e.g. 'TIMESTAMP(3)', 'BYTES')."""
    from sqlstream.core.sql.dialect import Flink

    try:
        return arrow_type(exp.DataType.build(text, dialect=Flink))
    except (ValueError, ParseError):
        raise PlanError(f"unknown SQL type '{text}'") from None


# Flink's INTERVAL MONTH (year-month interval): a count of calendar months.  Arrow's
# month_day_nano interval marks it, so it never passes for a fixed-length day-time
# interval (a duration); only its months field is ever set.
INTERVAL_MONTH = pa.month_day_nano_interval()


def is_month_interval(t: pa.DataType) -> bool:
    return t == INTERVAL_MONTH


# Flink's MULTISET<T> (what COLLECT gives): each distinct element with its count, as Flink holds it
# (a MapData of element -> INT).  An Arrow map whose counts are uint32 marks it, so it never passes
# for a MAP<T, INT> (whose values are int32).
MULTISET_COUNT = pa.uint32()


def multiset_of(element: pa.DataType) -> pa.DataType:
    return pa.map_(element, MULTISET_COUNT)


def is_multiset(t: pa.DataType) -> bool:
    return pa.types.is_map(t) and t.item_type == MULTISET_COUNT


def sql_type_name(t: pa.DataType) -> str:
    """The Flink SQL spelling of an Arrow type, for DESCRIBE and error messages."""
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    names = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "STRING",
        pa.large_string(): "STRING",
        pa.binary(): "BYTES",
        pa.date32(): "DATE",
        pa.time32("ms"): "TIME",
        pa.null(): "NULL",
    }
    if t in names:
        return names[t]
    if pa.types.is_timestamp(t):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        return f"TIMESTAMP_LTZ({precision})" if t.tz else f"TIMESTAMP({precision})"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_list(t):
        return f"ARRAY<{sql_type_name(t.value_type)}>"
    if is_multiset(t):
        return f"MULTISET<{sql_type_name(t.key_type)}>"
    if pa.types.is_map(t):
        return f"MAP<{sql_type_name(t.key_type)}, {sql_type_name(t.item_type)}>"
    if pa.types.is_struct(t):
        return "ROW<" + ", ".join(f"`{f.name}` {sql_type_name(f.type)}" for f in t) + ">"
    if is_month_interval(t):
        return "INTERVAL MONTH"
    return str(t).upper()


def is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def is_nested(t: pa.DataType) -> bool:
    """ARRAY, MAP or ROW."""
    return pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t)


def is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t)


def is_ltz(t: pa.DataType) -> bool:
    """TIMESTAMP_LTZ: an Arrow timestamp with a zone (always UTC: the value is an instant)."""
    return pa.types.is_timestamp(t) and t.tz is not None


def wall_clock(value: pa.Array | pa.Scalar, zone: str) -> pa.Array | pa.Scalar:
    """TIMESTAMP_LTZ instants as the TIMESTAMP wall-clock time of ``zone`` (daylight saving
    time per the zone's rules)."""
    if zone == "UTC":
        return pc.cast(value, pa.timestamp(value.type.unit))
    return pc.local_timestamp(pc.cast(value, pa.timestamp(value.type.unit, zone)))


def instant(value: pa.Array | pa.Scalar, zone: str, later_at_overlap: bool = False) -> pa.Array | pa.Scalar:
    """TIMESTAMP wall-clock times read in ``zone`` as TIMESTAMP_LTZ instants. As java.time does, a
    time that occurs twice (clocks turned back) is the earlier instant (the later one with
    ``later_at_overlap``, java's withLaterOffsetAtOverlap); one skipped by clocks turned forward is
    moved later by the length of the gap (the offset before the gap applies)."""
    unit = value.type.unit
    if zone == "UTC":
        return pc.cast(value, pa.timestamp(unit, "UTC"))
    # the offset in force at the earliest (latest) instant whose wall clock is at or before the value
    ambiguous = "latest" if later_at_overlap else "earliest"
    earliest = pc.assume_timezone(value, timezone=zone, ambiguous=ambiguous, nonexistent="earliest")
    offset = pc.subtract(pc.local_timestamp(earliest), pc.cast(earliest, pa.timestamp(unit)))
    return pc.cast(pc.subtract(value, offset), pa.timestamp(unit, "UTC"))
