"""Flink SQL's built-in date and time functions, registered into sqlstream.core.functions.

TIMESTAMP_LTZ values are instants (Arrow timestamps with tz='UTC'); the kernels
that turn them into wall-clock time or back (DATE_FORMAT, FROM_UNIXTIME,
UNIX_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE, CURRENT_TIME) are registered
``zoned`` and take the session zone ('table.local-time-zone') from the plan.  Time units (EXTRACT(HOUR FROM ...), TIMESTAMPDIFF(SECOND, ...)) arrive
as string constants from planner.function_calls.

Date patterns are Java's (yyyy-MM-dd HH:mm:ss.SSS).  They are compiled, not
handed to strftime/strptime: formatting joins vectorized field extractions, and
parsing matches one RE2 regex with a named group per field and computes the
epoch arithmetically, so both accept exactly the letters listed in _PATTERN_LETTERS.
Calendar arithmetic (months, TIMESTAMPDIFF) reproduces Calcite's DateTimeUtils,
which Flink uses.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.functions import ArgumentTypeError, Infer, Kernel, Value, register
from sqlstream.core.functions.strings import (
    INTEGER,
    NUMERIC,
    STRING,
    ArgKind,
    check_args,
    constant,
    lookup,
    returns,
    strict,
)
from sqlstream.core.types import (
    instant,
    is_ltz,
    is_month_interval,
    is_string,
    is_temporal,
    wall_clock,
)

_MS_PER_DAY = 86_400_000
_MS_PER_UNIT = {
    "MILLISECOND": 1,
    "SECOND": 1000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": _MS_PER_DAY,
    "WEEK": 7 * _MS_PER_DAY,
}
_MONTHS_PER_UNIT = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}
_SUB_DAY_UNITS = ("MILLISECOND", "SECOND", "MINUTE", "HOUR")
_DAY_OR_LONGER_UNITS = ("DAY", "WEEK", "MONTH", "QUARTER", "YEAR")
_TICKS_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}

TIMESTAMP_3 = pa.timestamp("ms")
TIMESTAMP_LTZ_3 = pa.timestamp("ms", tz="UTC")

DATETIME: ArgKind = (lambda t: pa.types.is_date(t) or pa.types.is_timestamp(t), "DATE/TIMESTAMP")
TIME_OF_DAY: ArgKind = (lambda t: pa.types.is_timestamp(t) or pa.types.is_time(t), "TIME/TIMESTAMP")
DATETIME_OR_STRING: ArgKind = (lambda t: DATETIME[0](t) or is_string(t), "DATE/TIMESTAMP/STRING")
ANY_TEMPORAL: ArgKind = (is_temporal, "DATE/TIME/TIMESTAMP")


def _unit(value: Value, function: str, allowed: tuple[str, ...]) -> str:
    """The time unit named by a string constant, upper case, SQL_TSI_ prefix dropped."""
    raw = constant(value, function, "the time unit")
    unit = str(raw).upper().removeprefix("SQL_TSI_")
    if unit not in allowed:
        raise ArgumentTypeError(
            f"{function} does not support the unit {raw}; use one of {', '.join(allowed)}"
        )
    return unit


# ---------------------------------------------------------------- integer and calendar arithmetic


def _floor_div(x: Value, divisor: int) -> Value:
    """x // divisor rounding down (Arrow's integer divide truncates toward zero)."""
    quotient = pc.divide(x, divisor)
    remainder = pc.subtract(x, pc.multiply(quotient, divisor))
    return pc.subtract(quotient, pc.cast(pc.less(remainder, 0), pa.int64()))


def _int64(value: Value) -> Value:
    return value if value.type == pa.int64() else pc.cast(value, pa.int64())


def _ticks(value: Value) -> tuple[Value, int]:
    """(int64 ticks since the epoch, ticks per day): days for DATE, the unit for TIMESTAMP."""
    t = value.type
    if pa.types.is_date32(t):
        return _int64(pc.cast(value, pa.int32())), 1
    if pa.types.is_date64(t):
        return pc.cast(value, pa.int64()), _MS_PER_DAY
    return pc.cast(value, pa.int64()), 86_400 * _TICKS_PER_SECOND[t.unit]


def _from_ticks(ticks: Value, t: pa.DataType) -> Value:
    if pa.types.is_date32(t):
        return pc.cast(pc.cast(ticks, pa.int32()), t)
    return pc.cast(ticks, t)


def _epoch_millis(value: Value) -> Value:
    """Milliseconds since 1970-01-01 00:00 UTC, floored from finer units."""
    ticks, per_day = _ticks(value)
    if per_day <= _MS_PER_DAY:
        return pc.multiply_checked(ticks, _MS_PER_DAY // per_day)
    return _floor_div(ticks, per_day // _MS_PER_DAY)


def _days_from_civil(year: Value, month: Value, day: Value) -> Value:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year = pc.subtract(year, pc.cast(pc.less_equal(month, 2), pa.int64()))
    era = _floor_div(year, 400)
    year_of_era = pc.subtract(year, pc.multiply(era, 400))
    month_from_march = pc.if_else(pc.greater(month, 2), pc.subtract(month, 3), pc.add(month, 9))
    day_of_year = pc.add(
        pc.divide(pc.add(pc.multiply(month_from_march, 153), 2), 5), pc.subtract(day, 1)
    )
    day_of_era = pc.add(
        pc.subtract(
            pc.add(pc.multiply(year_of_era, 365), pc.divide(year_of_era, 4)),
            pc.divide(year_of_era, 100),
        ),
        day_of_year,
    )
    return pc.add(pc.multiply(era, 146_097), pc.subtract(day_of_era, 719_468))


def _month_start(year: Value, month: Value) -> Value:
    return _days_from_civil(year, month, pa.scalar(1, pa.int64()))


def _days_in_month(year: Value, month: Value) -> Value:
    december = pc.equal(month, 12)
    next_year = pc.add(year, pc.cast(december, pa.int64()))
    next_month = pc.if_else(december, 1, pc.add(month, 1))
    return pc.subtract(_month_start(next_year, next_month), _month_start(year, month))


def _civil(days: Value) -> tuple[Value, Value, Value]:
    date = pc.cast(pc.cast(days, pa.int32()), pa.date32())
    return _int64(pc.year(date)), _int64(pc.month(date)), _int64(pc.day(date))


def _add_months(days: Value, months: Value) -> Value:
    """Calcite's addMonths: same day of month, clamped to the target month's last day."""
    year, month, day = _civil(days)
    total = pc.add(pc.add(pc.multiply(year, 12), pc.subtract(month, 1)), months)
    new_year = _floor_div(total, 12)
    new_month = pc.add(pc.subtract(total, pc.multiply(new_year, 12)), 1)
    clamped = pc.min_element_wise(day, _days_in_month(new_year, new_month))
    return pc.add(_month_start(new_year, new_month), pc.subtract(clamped, 1))


def months_of_interval(interval: Value) -> Value:
    """The int64 months of an INTERVAL MONTH value (Arrow month_day_nano, only months set)."""
    if isinstance(interval, pa.Scalar):
        return pa.scalar(interval.value.months if interval.is_valid else None, pa.int64())
    array = interval.combine_chunks() if isinstance(interval, pa.ChunkedArray) else interval
    # each value is (int32 months, int32 days, int64 nanoseconds); view the months column
    fields = np.frombuffer(
        array.buffers()[1], dtype=np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]),
        count=len(array), offset=16 * array.offset,
    )
    return pa.array(fields["months"].astype(np.int64), mask=array.is_null().to_numpy(zero_copy_only=False))


def shift_by_interval(op: str, a: Value, b: Value) -> Value:
    """DATE/TIMESTAMP ``+``/``-`` an interval (either operand order for ``+``), as Flink.

    An INTERVAL MONTH moves by calendar months with the day of month clamped to the
    target month's last day (2024-01-31 + 1 month = 2024-02-29, Calcite's addMonths);
    a DATE plus a day-time interval stays a DATE, moved by the interval's whole days
    (truncated toward zero, as Flink's generated code divides).
    """
    if op == "+" and (pa.types.is_duration(a.type) or is_month_interval(a.type)):
        a, b = b, a
    if is_month_interval(b.type):
        months = months_of_interval(b)
        if op == "-":
            months = pc.negate_checked(months)
        ticks, per_day = _ticks(a)
        days = _floor_div(ticks, per_day)
        time_of_day = pc.subtract(ticks, pc.multiply(days, per_day))
        moved = _add_months(days, months)
        return _from_ticks(pc.add_checked(pc.multiply_checked(moved, per_day), time_of_day), a.type)
    if pa.types.is_date(a.type):
        days = pc.divide(pc.cast(b, pa.int64()), _MS_PER_DAY)
        ticks, _ = _ticks(a)
        moved = pc.add_checked(ticks, days) if op == "+" else pc.subtract_checked(ticks, days)
        return _from_ticks(moved, a.type)
    return pc.add_checked(a, b) if op == "+" else pc.subtract_checked(a, b)


def _whole_months(later: Value, earlier: Value) -> Value:
    """The largest m with addMonths(earlier, m) <= later, for day numbers later >= earlier."""
    year1, month1, _ = _civil(later)
    year0, month0, _ = _civil(earlier)
    months = pc.subtract(
        pc.add(pc.multiply(year1, 12), month1), pc.add(pc.multiply(year0, 12), month0)
    )
    overshoot = pc.greater(_add_months(earlier, months), later)
    return pc.subtract(months, pc.cast(overshoot, pa.int64()))


def _subtract_months(t0: Value, t1: Value) -> Value:
    """Calcite's DateTimeUtils.subtractMonths(t0, t1) on epoch milliseconds (t0 - t1)."""
    d0, d1 = _floor_div(t0, _MS_PER_DAY), _floor_div(t1, _MS_PER_DAY)
    millis0 = pc.subtract(t0, pc.multiply(d0, _MS_PER_DAY))
    millis1 = pc.subtract(t1, pc.multiply(d1, _MS_PER_DAY))
    forward = pc.greater_equal(d0, d1)
    later, earlier = pc.if_else(forward, d0, d1), pc.if_else(forward, d1, d0)
    months = _whole_months(later, earlier)
    months = pc.if_else(forward, months, pc.negate(months))
    # a time of day short of a whole month takes one off (in both directions, as Calcite)
    short = pc.and_(pc.equal(_add_months(d1, months), d0), pc.less(millis0, millis1))
    return pc.subtract(months, pc.cast(short, pa.int64()))


# ---------------------------------------------------------------- EXTRACT and friends


def _day_of_week(v: Value) -> Value:
    return pc.day_of_week(v, count_from_zero=False, week_start=7)  # Flink: 1 = Sunday


_EXTRACTORS: dict[str, Callable[[Value], Value]] = {
    "YEAR": pc.year,
    "QUARTER": pc.quarter,
    "MONTH": pc.month,
    "WEEK": pc.iso_week,  # ISO-8601 week, as Calcite
    "DAY": pc.day,
    "DOY": pc.day_of_year,
    "DOW": _day_of_week,
    "HOUR": pc.hour,
    "MINUTE": pc.minute,
    "SECOND": pc.second,
    "MILLISECOND": pc.millisecond,  # within the second, 0..999
}
_TIME_FIELDS = ("HOUR", "MINUTE", "SECOND", "MILLISECOND")


def _extract_field(unit: str, v: Value, function: str, zone: str) -> Value:
    if is_ltz(v.type):
        v = wall_clock(v, zone)  # Flink reads a TIMESTAMP_LTZ's fields in the session zone
    if pa.types.is_time(v.type) and unit not in _TIME_FIELDS:
        raise ArgumentTypeError(f"{function}: cannot extract {unit} from a TIME")
    if pa.types.is_date(v.type) and unit in _TIME_FIELDS:
        v = pc.cast(v, TIMESTAMP_3)
    return _int64(_EXTRACTORS[unit](v))


@strict(pa.int64())
def _extract(unit: Value, v: Value, *, zone: str) -> Value:
    return _extract_field(_unit(unit, "EXTRACT", tuple(_EXTRACTORS)), v, "EXTRACT", zone)


def _field_function(name: str, unit: str) -> Kernel:
    @strict(pa.int64())
    def kernel(v: Value, *, zone: str) -> Value:
        return _extract_field(unit, v, name, zone)

    return kernel


# ---------------------------------------------------------------- TIMESTAMPADD, TIMESTAMPDIFF, FLOOR/CEIL TO


def _timestampadd_infer(name: str, date_result: pa.DataType | None) -> Infer:
    """DATE + a sub-day unit is a TIMESTAMP(3); with a day-or-longer unit it stays a DATE."""

    def infer(types: list[pa.DataType]) -> pa.DataType:
        check_args(name, types, (STRING, INTEGER, DATETIME))
        t = types[2]
        return (date_result or t) if pa.types.is_date(t) else t

    return infer


def _timestampadd(units: tuple[str, ...]) -> Kernel:
    @strict(pa.null())
    def kernel(unit: Value, amount: Value, v: Value) -> Value:
        name = _unit(unit, "TIMESTAMPADD", units)
        if pa.types.is_date(v.type) and name in _SUB_DAY_UNITS:
            v = pc.cast(v, TIMESTAMP_3)
        ticks, per_day = _ticks(v)
        count = _int64(amount)
        if name in _MONTHS_PER_UNIT:
            days = _floor_div(ticks, per_day)
            time_of_day = pc.subtract(ticks, pc.multiply(days, per_day))
            moved = _add_months(days, pc.multiply_checked(count, _MONTHS_PER_UNIT[name]))
            return _from_ticks(
                pc.add_checked(pc.multiply_checked(moved, per_day), time_of_day), v.type
            )
        step, remainder = divmod(per_day * _MS_PER_UNIT[name], _MS_PER_DAY)
        if step == 0 or remainder:
            raise ArgumentTypeError(f"TIMESTAMPADD: {name} is finer than the timestamp's precision")
        return _from_ticks(pc.add_checked(ticks, pc.multiply_checked(count, step)), v.type)

    return kernel


_DIFF_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


@strict(pa.int32())
def _timestampdiff(unit: Value, start: Value, end: Value) -> Value:
    """Whole units from ``start`` to ``end`` (end - start), truncated toward zero."""
    name = _unit(unit, "TIMESTAMPDIFF", _DIFF_UNITS)
    t0, t1 = _epoch_millis(end), _epoch_millis(start)
    if name in _MONTHS_PER_UNIT:
        # Java's integer division truncates toward zero, and so does Arrow's
        difference = pc.divide(_subtract_months(t0, t1), _MONTHS_PER_UNIT[name])
    else:
        difference = pc.divide(pc.subtract_checked(t0, t1), _MS_PER_UNIT[name])
    return pc.cast(difference, pa.int32())  # overflowing INT raises


_ROUNDING_UNITS = (
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
)


def _round_to(name: str, arrow_fn: Callable[..., Value]) -> Kernel:
    @strict(pa.null())
    def kernel(v: Value, unit: Value, *, zone: str) -> Value:
        """Round down/up to a whole unit; weeks start on Sunday as in Calcite. A TIMESTAMP_LTZ is
        rounded on its wall-clock time in the session zone (its day starts at local midnight)."""
        u = _unit(unit, name, _ROUNDING_UNITS)
        if is_ltz(v.type):
            rounded = arrow_fn(wall_clock(v, zone), unit=u.lower(), week_starts_monday=False)
            return pc.cast(instant(rounded, zone), v.type)
        return arrow_fn(v, unit=u.lower(), week_starts_monday=False)

    return kernel


# ---------------------------------------------------------------- Java date patterns

_PATTERN_LETTERS = "yMdHhmsSaED"
_NUMERIC_LETTERS = "yMdHhmsSD"
_REGEX_SPECIALS = set("\\.^$|?*+()[]{}")
Token = tuple[str, int]  # (pattern letter, count), or (literal text, 0)


@functools.lru_cache(maxsize=256)
def _tokenize(pattern: str) -> tuple[Token, ...]:
    """Split a Java date pattern into fields and literal text ('quoted' or not a letter)."""
    tokens: list[Token] = []
    literal = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end == -1:
                raise ArgumentTypeError(f"unterminated quote in date pattern '{pattern}'")
            literal += "'" if end == i + 1 else pattern[i + 1 : end]
            i = end + 1
        elif c.isascii() and c.isalpha():
            if c not in _PATTERN_LETTERS:
                raise ArgumentTypeError(
                    f"date pattern letter '{c}' is not supported (in '{pattern}')"
                )
            count = 1
            while i + count < len(pattern) and pattern[i + count] == c:
                count += 1
            if literal:
                tokens.append((literal, 0))
                literal = ""
            tokens.append((c, count))
            i += count
        else:
            literal += c
            i += 1
    if literal:
        tokens.append((literal, 0))
    return tuple(tokens)


_MONTH_NAMES = pa.array(
    [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
)
_DAY_NAMES = pa.array(
    ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
)


def _padded(number: Value, width: int) -> Value:
    return pc.utf8_lpad(pc.cast(number, pa.string()), width=width, padding="0")


# Seconds over which a pattern letter's field cannot change (on the wall clock: a naive timestamp
# is its wall-clock time as if in UTC, so days start at multiples of 86400 s); 'S' has none.
_LETTER_SPAN_S = {"y": 86400, "M": 86400, "d": 86400, "D": 86400, "E": 86400, "a": 3600, "H": 3600,
                  "h": 3600, "m": 60, "s": 1}
_UNITS_PER_S = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _format(ts: Value, pattern: str) -> Value:
    """Format a timestamp column with a Java pattern.

    A column's timestamps usually fall into few spans of the pattern's finest field (a day for
    'yyyy-MM-dd', a minute for 'HH:mm'), so the distinct spans are formatted once each and
    their texts taken for the rows: two integer passes, a hash and a take instead of every
    field's kernels over every row."""
    tokens = _tokenize(pattern)
    letters = [text for text, count in tokens if count]
    if isinstance(ts, pa.Array) and len(ts) >= 64 and pa.types.is_timestamp(ts.type) and ts.type.tz is None \
            and letters and all(letter in _LETTER_SPAN_S for letter in letters):
        span = min(_LETTER_SPAN_S[letter] for letter in letters) * _UNITS_PER_S[ts.type.unit]
        raw = ts.cast(pa.int64())
        lowest = pc.min(raw).as_py()
        # the spans' starts must be int64s too (TIMESTAMP(9) reaches down to 1677-09-21)
        safe = lowest is not None and lowest >= -(2**63) + span
        encoded = pc.dictionary_encode(pc.multiply(_floor_div(raw, span), span)) if safe else None
        if encoded is not None and len(encoded.dictionary) * 8 <= len(ts):
            return _format_tokens(encoded.dictionary.cast(ts.type), tokens).take(encoded.indices)
    return _format_tokens(ts, tokens)


def _format_tokens(ts: Value, tokens: tuple[Token, ...]) -> Value:
    """Format timestamps with a tokenized Java pattern, field by field."""

    def field(letter: str, count: int) -> Value:
        if letter == "y":
            year = pc.year(ts)
            return (
                _padded(pc.subtract(year, pc.multiply(_floor_div(year, 100), 100)), 2)
                if count == 2
                else _padded(year, count)
            )
        if letter == "M":
            if count >= 3:
                names = lookup(_MONTH_NAMES, pc.subtract(pc.month(ts), 1))
                return names if count >= 4 else pc.utf8_slice_codeunits(names, 0, 3)
            return _padded(pc.month(ts), count)
        if letter == "E":
            names = lookup(_DAY_NAMES, pc.day_of_week(ts))
            return names if count >= 4 else pc.utf8_slice_codeunits(names, 0, 3)
        if letter == "a":
            return pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM")
        if letter == "h":
            return _padded(pc.add(_hour_of_half_day(pc.hour(ts)), 1), count)
        if letter == "S":
            nanos = pc.add(
                pc.add(
                    pc.multiply(_int64(pc.millisecond(ts)), 1_000_000),
                    pc.multiply(_int64(pc.microsecond(ts)), 1000),
                ),
                _int64(pc.nanosecond(ts)),
            )
            # a fraction of the second with ``count`` digits (java.time, which Flink uses)
            return pc.utf8_slice_codeunits(_padded(nanos, 9), 0, count)
        simple = {"d": pc.day, "H": pc.hour, "m": pc.minute, "s": pc.second, "D": pc.day_of_year}
        return _padded(simple[letter](ts), count)

    pieces = [text if count == 0 else field(text, count) for text, count in tokens]
    if not pieces:
        return pc.if_else(pc.is_valid(ts), "", pa.scalar(None, pa.string()))
    return pc.binary_join_element_wise(*pieces, "")


def _hour_of_half_day(hour: Value) -> Value:
    """(hour + 11) mod 12: the 12-hour clock's hour minus one, so that 0:00 shows as 12."""
    return pc.subtract(pc.add(hour, 11), pc.multiply(pc.divide(pc.add(hour, 11), 12), 12))


_GROUP = {
    "y": "year",
    "M": "month",
    "d": "day",
    "H": "hour",
    "h": "hour12",
    "m": "minute",
    "s": "second",
    "S": "fraction",
}


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIALS else c for c in text)


@functools.lru_cache(maxsize=256)
def _parser_regex(pattern: str) -> str:
    """An anchored RE2 regex with one named group per field of a Java date pattern.

    A numeric field directly followed by another takes exactly its letter count of
    digits (yyyyMMdd); otherwise it takes one or more, as Java's lenient parser does.
    """
    tokens = _tokenize(pattern)
    parts: list[str] = []
    seen: set[str] = set()
    for i, (text, count) in enumerate(tokens):
        if count == 0:
            parts.append(_escape(text))
            continue
        if text in "ED":
            raise ArgumentTypeError(
                f"date pattern letter '{text}' cannot be parsed (in '{pattern}')"
            )
        name = "ampm" if text == "a" else "year2" if text == "y" and count == 2 else _GROUP[text]
        if name in seen:
            raise ArgumentTypeError(f"date pattern '{pattern}' repeats the field '{text}'")
        seen.add(name)
        if text == "a":
            parts.append("(?P<ampm>[AaPp][Mm])")
            continue
        adjacent = (
            i + 1 < len(tokens) and tokens[i + 1][1] > 0 and tokens[i + 1][0] in _NUMERIC_LETTERS
        )
        if text == "y" and count == 2:
            digits = "2"
        elif adjacent:
            digits = str(count)
        else:
            digits = "1,9" if text == "S" else "1,4" if text == "y" else "1,2"
        parts.append(f"(?P<{name}>\\d{{{digits}}})")
    return "^(?P<whole>" + "".join(parts) + ")$"


# Flink's TO_TIMESTAMP(string) also takes a 'T', a missing time and any fraction
_DEFAULT_TIMESTAMP = (
    r"^(?P<whole>(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[ T](?P<hour>\d{1,2}):(?P<minute>\d{1,2}):(?P<second>\d{1,2})(?:\.(?P<fraction>\d{1,9}))?)?)$"
)
_DEFAULT_DATE = r"^(?P<whole>(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2}))$"


def _parse_millis(s: Value, regex: str) -> Value:
    """Epoch milliseconds (UTC) of each string matching ``regex``; NULL if it does not
    match or names an impossible date or time (month 13, February 30, 25:00)."""
    groups = pc.extract_regex(pc.utf8_trim_whitespace(s), pattern=regex)
    names = {f.name for f in groups.type}

    def number(name: str, default: int) -> Value:
        if name not in names:
            return pa.scalar(default, pa.int64())
        text = pc.struct_field(groups, name)
        # an optional group that did not take part in the match extracts as ''
        given = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        return pc.coalesce(pc.cast(given, pa.int64()), default)

    # yy means 20yy, as in java.time
    year = pc.add(number("year2", 0), 2000) if "year2" in names else number("year", 1970)
    month, day = number("month", 1), number("day", 1)
    minute, second = number("minute", 0), number("second", 0)
    if "hour12" in names:
        hour12 = number("hour12", 12)
        valid_hour = pc.and_(pc.greater_equal(hour12, 1), pc.less_equal(hour12, 12))
        hour = pc.subtract(hour12, pc.multiply(pc.divide(hour12, 12), 12))  # 12 AM is 0
        if "ampm" in names:
            pm = pc.equal(pc.utf8_upper(pc.struct_field(groups, "ampm")), "PM")
            hour = pc.add(hour, pc.multiply(pc.cast(pm, pa.int64()), 12))
    else:
        hour = number("hour", 0)
        valid_hour = pc.less_equal(hour, 23)
    millis_of_second: Value = pa.scalar(0, pa.int64())
    if "fraction" in names:
        fraction = pc.struct_field(groups, "fraction")
        millis_text = pc.utf8_slice_codeunits(pc.utf8_rpad(fraction, width=3, padding="0"), 0, 3)
        millis_of_second = pc.coalesce(pc.cast(millis_text, pa.int64()), 0)
    valid = functools.reduce(
        pc.and_,
        [
            pc.is_valid(groups),
            pc.greater_equal(month, 1),
            pc.less_equal(month, 12),
            pc.greater_equal(day, 1),
            valid_hour,
            pc.less_equal(minute, 59),
            pc.less_equal(second, 59),
        ],
    )
    # out-of-range months must not reach the day count of the month
    safe_month = pc.if_else(valid, month, 1)
    valid = pc.and_(valid, pc.less_equal(day, _days_in_month(year, safe_month)))
    days = _days_from_civil(year, safe_month, day)
    seconds = pc.add(pc.add(pc.multiply(hour, 3600), pc.multiply(minute, 60)), second)
    millis = pc.add(
        pc.add(pc.multiply(days, _MS_PER_DAY), pc.multiply(seconds, 1000)), millis_of_second
    )
    return pc.if_else(pc.fill_null(valid, False), millis, pa.scalar(None, pa.int64()))


def _regex_for(function: str, pattern: Value | None, default: str) -> str:
    if pattern is None:
        return default
    return _parser_regex(constant(pattern, function, "the date pattern"))


@strict(TIMESTAMP_3)
def _to_timestamp(s: Value, pattern: Value | None = None) -> Value:
    return pc.cast(
        _parse_millis(s, _regex_for("TO_TIMESTAMP", pattern, _DEFAULT_TIMESTAMP)), TIMESTAMP_3
    )


@strict(pa.date32())
def _to_date(s: Value, pattern: Value | None = None) -> Value:
    millis = _parse_millis(s, _regex_for("TO_DATE", pattern, _DEFAULT_DATE))
    return pc.cast(pc.cast(_floor_div(millis, _MS_PER_DAY), pa.int32()), pa.date32())


_UNPARSEABLE = -(2**63)  # Flink's UNIX_TIMESTAMP returns Long.MIN_VALUE for a bad string


@strict(pa.int64())
def _unix_timestamp(s: Value, pattern: Value | None = None, *, zone: str) -> Value:
    """The string's wall-clock time read in the session zone, as epoch seconds."""
    wall = pc.cast(_parse_millis(s, _regex_for("UNIX_TIMESTAMP", pattern, _DEFAULT_TIMESTAMP)), TIMESTAMP_3)
    millis = pc.cast(pc.cast(instant(wall, zone), TIMESTAMP_LTZ_3), pa.int64())
    seconds = _floor_div(millis, 1000)
    return pc.if_else(
        pc.is_valid(s), pc.coalesce(seconds, _UNPARSEABLE), pa.scalar(None, pa.int64())
    )


_DEFAULT_FORMAT = "yyyy-MM-dd HH:mm:ss"


@strict(pa.string())
def _date_format(v: Value, pattern: Value, *, zone: str) -> Value:
    """A TIMESTAMP_LTZ is formatted as its wall-clock time in the session zone."""
    text = constant(pattern, "DATE_FORMAT", "the date pattern")
    if is_ltz(v.type):
        v = wall_clock(v, zone)
    elif is_string(v.type):
        v = pc.cast(_parse_millis(v, _DEFAULT_TIMESTAMP), TIMESTAMP_3)
    elif pa.types.is_date(v.type):
        v = pc.cast(v, TIMESTAMP_3)
    return _format(v, text)


@strict(pa.string())
def _from_unixtime(seconds: Value, pattern: Value | None = None, *, zone: str) -> Value:
    """The instant's wall-clock time in the session zone, formatted."""
    text = (
        _DEFAULT_FORMAT
        if pattern is None
        else constant(pattern, "FROM_UNIXTIME", "the date pattern")
    )
    whole = (
        seconds if pa.types.is_integer(seconds.type) else pc.trunc(pc.cast(seconds, pa.float64()))
    )
    millis = pc.multiply_checked(_int64(whole), 1000)
    return _format(wall_clock(pc.cast(millis, TIMESTAMP_LTZ_3), zone), text)


# java.time's ZoneId.SHORT_IDS, which Flink's CONVERT_TZ accepts beside region ids and GMT offsets
_SHORT_ZONE_IDS = {
    "EST": "-05:00", "MST": "-07:00", "HST": "-10:00", "ACT": "Australia/Darwin", "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires", "ART": "Africa/Cairo", "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka", "CAT": "Africa/Harare", "CNT": "America/St_Johns",
    "CST": "America/Chicago", "CTT": "Asia/Shanghai", "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan", "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}


def _zone_id(value: Value, name: str, what: str) -> str:
    """A zone argument as Arrow names it: a region id, a java.time short id, or GMT/UTC+hh:mm."""
    text = constant(value, name, what)
    offset = re.fullmatch(r"(?:GMT|UTC|UT)?([+-])(\d{1,2})(?::?(\d{2}))?", text)
    if text.upper() in ("UTC", "GMT", "UT", "Z"):
        return "UTC"
    if offset:
        return f"{offset[1]}{int(offset[2]):02d}:{offset[3] or '00'}"
    if text.upper() in _SHORT_ZONE_IDS:
        return _SHORT_ZONE_IDS[text.upper()]
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ArgumentTypeError(f"{name}: unknown time zone '{text}' (a region such as 'America/Los_Angeles', "
                                "an abbreviation such as 'PST', or an offset such as 'GMT-08:00')") from None
    return text


@strict(pa.string())
def _convert_tz(s: Value, source: Value, target: Value) -> Value:
    """Flink's CONVERT_TZ: the 'yyyy-MM-dd HH:mm:ss' wall-clock time of zone ``source`` as the
    wall-clock time of zone ``target``, as text."""
    wall = pc.cast(_parse_millis(s, _DEFAULT_TIMESTAMP), TIMESTAMP_3)
    zone = _zone_id(source, "CONVERT_TZ", "the source zone")
    moment = instant(wall, zone)
    if zone != "UTC" and zone[0] not in "+-":
        # Flink parses with java.util's calendar: a time that occurs twice is the later instant
        earliest = pc.assume_timezone(wall, timezone=zone, ambiguous="earliest", nonexistent="earliest")
        latest = pc.assume_timezone(wall, timezone=zone, ambiguous="latest", nonexistent="earliest")
        moment = pc.if_else(pc.equal(earliest, latest), moment, pc.cast(latest, moment.type))
    return _format(wall_clock(moment, _zone_id(target, "CONVERT_TZ", "the target zone")), _DEFAULT_FORMAT)


@strict(TIMESTAMP_LTZ_3)
def _to_timestamp_ltz(epoch: Value, precision: Value | None = None) -> Value:
    """Epoch seconds (precision 0) or milliseconds (precision 3) as a TIMESTAMP_LTZ(3)."""
    p = 3 if precision is None else constant(precision, "TO_TIMESTAMP_LTZ", "the precision")
    if p not in (0, 3):
        raise ArgumentTypeError(
            f"TO_TIMESTAMP_LTZ: precision must be 0 (seconds) or 3 (milliseconds), got {p}"
        )
    factor = 1000 if p == 0 else 1
    if pa.types.is_integer(epoch.type):
        millis = pc.multiply_checked(_int64(epoch), factor)
    else:
        # Flink: (long) (value * 1000), i.e. truncated toward zero
        millis = pc.cast(
            pc.trunc(pc.multiply(pc.cast(epoch, pa.float64()), float(factor))), pa.int64()
        )
    return pc.cast(millis, TIMESTAMP_LTZ_3)


# ---------------------------------------------------------------- current time, per batch


def _now_millis() -> int:
    return time.time_ns() // 1_000_000


def _current_timestamp() -> Value:
    return pa.scalar(_now_millis(), TIMESTAMP_LTZ_3)


def _local_millis(zone: str) -> int:
    """The session zone's wall clock now, as milliseconds since 1970-01-01 00:00."""
    return wall_clock(_current_timestamp(), zone).value


def _localtimestamp(*, zone: str) -> Value:
    return pa.scalar(_local_millis(zone), TIMESTAMP_3)


def _current_date(*, zone: str) -> Value:
    return pa.scalar(_local_millis(zone) // _MS_PER_DAY, pa.date32())


def _current_time(*, zone: str) -> Value:
    # TIME(0): whole seconds of the day
    return pa.scalar(_local_millis(zone) % _MS_PER_DAY // 1000 * 1000, pa.time32("ms"))


# ---------------------------------------------------------------- CURRENT_WATERMARK

# the event time (epoch ms) of the operator evaluating an expression; an operator that evaluates
# CURRENT_WATERMARK sets it around each batch (runtime.operators.calc), None before any watermark
OPERATOR_WATERMARK: ContextVar[int | None] = ContextVar("operator_watermark", default=None)


def _current_watermark_type(types: list[pa.DataType]) -> pa.DataType:
    check_args("CURRENT_WATERMARK", types, ((pa.types.is_timestamp, "TIMESTAMP/TIMESTAMP_LTZ"),))
    return pa.timestamp("ms", types[0].tz)


def _current_watermark(rowtime: Value) -> Value:
    """The watermark of the evaluating operator, in the rowtime attribute's type; NULL while the
    operator has none (Flink: no common watermark of the upstream operations yet)."""
    t = pa.timestamp("ms", rowtime.type.tz)
    return pa.scalar(OPERATOR_WATERMARK.get(), t)


# ---------------------------------------------------------------- registration

register("CURRENT_WATERMARK", _current_watermark_type, _current_watermark, 1)

register("EXTRACT", returns("EXTRACT", pa.int64(), STRING, ANY_TEMPORAL), _extract, 2, zoned=True)
for _name, _unit_name, _kind in (
    ("YEAR", "YEAR", DATETIME),
    ("QUARTER", "QUARTER", DATETIME),
    ("MONTH", "MONTH", DATETIME),
    ("WEEK", "WEEK", DATETIME),
    ("DAYOFYEAR", "DOY", DATETIME),
    ("DAYOFMONTH", "DAY", DATETIME),
    ("DAYOFWEEK", "DOW", DATETIME),
    ("HOUR", "HOUR", TIME_OF_DAY),
    ("MINUTE", "MINUTE", TIME_OF_DAY),
    ("SECOND", "SECOND", TIME_OF_DAY),
):
    register(_name, returns(_name, pa.int64(), _kind), _field_function(_name, _unit_name), 1, zoned=True)

register(
    "TIMESTAMPADD",
    _timestampadd_infer("TIMESTAMPADD", None),
    _timestampadd(_DAY_OR_LONGER_UNITS),
    3,
)
# planner.function_calls picks this one for sub-day units, which turn a DATE into a TIMESTAMP
register(
    "TIMESTAMPADD_TIME",
    _timestampadd_infer("TIMESTAMPADD", TIMESTAMP_3),
    _timestampadd(_SUB_DAY_UNITS),
    3,
)
register(
    "TIMESTAMPDIFF",
    returns("TIMESTAMPDIFF", pa.int32(), STRING, DATETIME, DATETIME),
    _timestampdiff,
    3,
)


def _same_temporal(name: str) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        check_args(name, types, (DATETIME, STRING))
        return types[0]

    return infer


register("FLOOR_TO", _same_temporal("FLOOR"), _round_to("FLOOR", pc.floor_temporal), 2, zoned=True)
register("CEIL_TO", _same_temporal("CEIL"), _round_to("CEIL", pc.ceil_temporal), 2, zoned=True)

register(
    "DATE_FORMAT", returns("DATE_FORMAT", pa.string(), DATETIME_OR_STRING, STRING), _date_format, 2, zoned=True
)
register("TO_TIMESTAMP", returns("TO_TIMESTAMP", TIMESTAMP_3, STRING, STRING), _to_timestamp, 1, 2)
register("TO_DATE", returns("TO_DATE", pa.date32(), STRING, STRING), _to_date, 1, 2)
register(
    "TO_TIMESTAMP_LTZ",
    returns("TO_TIMESTAMP_LTZ", TIMESTAMP_LTZ_3, NUMERIC, INTEGER),
    _to_timestamp_ltz,
    1,
    2,
)
register("CONVERT_TZ", returns("CONVERT_TZ", pa.string(), STRING, STRING, STRING), _convert_tz, 3)
register(
    "UNIX_TIMESTAMP", returns("UNIX_TIMESTAMP", pa.int64(), STRING, STRING), _unix_timestamp, 1, 2, zoned=True
)
register(
    "FROM_UNIXTIME",
    returns("FROM_UNIXTIME", pa.string(), NUMERIC, STRING),
    _from_unixtime,
    1,
    2,
    zoned=True,
)
register(
    "CURRENT_TIMESTAMP",
    returns("CURRENT_TIMESTAMP", TIMESTAMP_LTZ_3),
    _current_timestamp,
    0,
    aliases=("NOW",),
)
# its own name, so that planner.proctime can tell a processing-time attribute from CURRENT_TIMESTAMP
register("PROCTIME", returns("PROCTIME", TIMESTAMP_LTZ_3), _current_timestamp, 0)
register("LOCALTIMESTAMP", returns("LOCALTIMESTAMP", TIMESTAMP_3), _localtimestamp, 0, zoned=True)
register("CURRENT_DATE", returns("CURRENT_DATE", pa.date32()), _current_date, 0, zoned=True)
register(
    "CURRENT_TIME",
    returns("CURRENT_TIME", pa.time32("ms")),
    _current_time,
    0,
    aliases=("LOCALTIME",),
    zoned=True,
)
