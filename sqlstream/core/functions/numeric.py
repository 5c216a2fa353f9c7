"""Flink SQL's built-in numeric and conditional functions, registered into sqlstream.core.functions.

Rounding follows Java's BigDecimal as Flink does: ROUND is HALF_UP (away from
zero, not banker's), and DOUBLE arguments are rounded as the shortest decimal
that reads back as the double, so ROUND(2.675e0, 2) is 2.68 although the binary
value of 2.675 is slightly below it.  ROUND/TRUNCATE of a DECIMAL take Flink's
findRoundDecimalType, and of an integer wrap around as Java does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.functions import (
    ArgumentTypeError,
    Infer,
    Kernel,
    Value,
    common_type,
    register,
)
from sqlstream.core.functions.arithmetic import fit_decimal
from sqlstream.core.functions.strings import (
    BOOLEAN,
    INTEGER,
    NUMERIC,
    ArgKind,
    check_args,
    constant,
    returns,
    strict,
    type_names,
)
from sqlstream.core.types import is_numeric, is_string, is_temporal

_HALF_UP = "half_towards_infinity"  # Java's HALF_UP rounds ties away from zero
_DOWN = "towards_zero"  # Java's RoundingMode.DOWN, i.e. truncation
_MAX_PRECISION = 38


def _cast(value: Value, target: pa.DataType) -> Value:
    return value if value.type == target else pc.cast(value, target)


def _double(value: Value) -> Value:
    return _cast(value, pa.float64())


# ---------------------------------------------------------------- typing rules


def _same_numeric(name: str, *more: ArgKind) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        check_args(name, types, (NUMERIC, *more))
        return types[0]

    return infer


def _integral_decimal(t: pa.Decimal128Type) -> pa.DataType:
    """CEIL/FLOOR of DECIMAL(p, s): DECIMAL(p, 0), as Flink types it (the argument's precision,
    which also holds the carry of CEIL(9.99))."""
    return pa.decimal128(t.precision, 0)


def _round_infer(name: str) -> Callable[[list[pa.DataType], list[Any]], pa.DataType]:
    """ROUND/TRUNCATE keep a number's type; a DECIMAL's follows the constant number of places."""

    def infer(types: list[pa.DataType], constants: list[Any] | None = None) -> pa.DataType:
        check_args(name, types, (NUMERIC, INTEGER))
        t = types[0]
        if not pa.types.is_decimal(t):
            return t
        places = 0 if len(types) == 1 else None if constants is None else constants[1]
        if places is None:
            raise ArgumentTypeError(f"{name} of a DECIMAL needs a constant number of decimal places")
        return round_decimal_type(t, places)

    return infer


def round_decimal_type(t: pa.Decimal128Type, places: int) -> pa.Decimal128Type:
    """LogicalTypeMerging.findRoundDecimalType: rounding can carry into one more integral digit."""
    p, s = t.precision, t.scale
    if places >= s:
        return t
    if places < 0:
        return pa.decimal128(min(_MAX_PRECISION, 1 + p - s), 0)
    return pa.decimal128(1 + p - s + places, places)


def _floor_ceil_infer(name: str) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        check_args(name, types, (NUMERIC,))
        t = types[0]
        return _integral_decimal(t) if pa.types.is_decimal(t) else t

    return infer


def _double_result(name: str, arity: int) -> Infer:
    return returns(name, pa.float64(), *([NUMERIC] * arity))


def _comparable(t: pa.DataType) -> bool:
    return (
        is_numeric(t)
        or is_string(t)
        or is_temporal(t)
        or pa.types.is_boolean(t)
        or pa.types.is_null(t)
    )


def _common_comparable(name: str, types: list[pa.DataType]) -> pa.DataType:
    out = types[0]
    for t in types[1:]:
        merged = common_type(out, t)
        if merged is None:
            raise ArgumentTypeError(f"{name} cannot compare {type_names(types)}")
        out = merged
    if not _comparable(out):
        raise ArgumentTypeError(f"{name} cannot compare {type_names(types)}")
    return out


# ---------------------------------------------------------------- rounding

_EXACT_UNITS = 2.0**52  # from here on a double has no fraction digit left to round
_EXACT_POWERS = 22  # 10**22 is the largest power of ten a double holds exactly


def _round_double(x: Value, places: int, half_up: bool) -> Value:
    """ROUND (``half_up``) or TRUNCATE a FLOAT/DOUBLE like BigDecimal.valueOf(x).setScale.

    Java rounds the shortest decimal that reads back as x.  Scaling x by 10**places
    in binary is off by up to one unit, so the scaled guess is corrected by comparing
    x with the exact rounding boundaries, each computed as the double nearest to it
    (division and multiplication by an exact power of ten are correctly rounded).
    """
    wide = _double(x)
    if abs(places) > _EXACT_POWERS:
        return _cast(pc.round(wide, places, round_mode=_HALF_UP if half_up else _DOWN), x.type)
    scale = float(10 ** abs(places))

    def to_units(v: Value) -> Value:
        return pc.multiply(v, scale) if places >= 0 else pc.divide(v, scale)

    def from_units(v: Value) -> Value:
        return pc.divide(v, scale) if places >= 0 else pc.multiply(v, scale)

    # the result steps up by one unit at this fraction of a unit
    step = 0.5 if half_up else 1.0
    magnitude = pc.abs(wide)
    units = to_units(magnitude)
    guess = pc.floor(pc.add(units, 1.0 - step))
    too_low = pc.greater_equal(magnitude, from_units(pc.add(guess, step)))
    guess = pc.if_else(too_low, pc.add(guess, 1.0), guess)
    too_high = pc.less(magnitude, from_units(pc.subtract(guess, 1.0 - step)))
    guess = pc.if_else(too_high, pc.subtract(guess, 1.0), guess)
    rounded = from_units(guess)
    signed = pc.if_else(pc.less(wide, 0.0), pc.negate(rounded), rounded)
    signed = pc.if_else(pc.equal(guess, 0.0), 0.0, signed)  # BigDecimal has no -0
    keep = pc.or_(pc.invert(pc.is_finite(wide)), pc.greater_equal(units, _EXACT_UNITS))
    return _cast(pc.if_else(keep, wide, signed), x.type)


def _round_kernel(name: str, half_up: bool) -> Kernel:
    mode = _HALF_UP if half_up else _DOWN

    @strict(pa.null())
    def kernel(x: Value, digits: Value | None = None) -> Value:
        places = 0 if digits is None else constant(digits, name, "the number of decimal places")
        t = x.type
        if pa.types.is_integer(t):
            if places >= 0:
                return x
            # in BIGINT, then wrapped into the argument type as Java's narrowing does
            return pc.cast(pc.round(pc.cast(x, pa.int64()), places, round_mode=mode), t, safe=False)
        if pa.types.is_decimal(t):
            target = round_decimal_type(t, places)
            if target == t:
                return x
            wide = pc.cast(x, pa.decimal256(min(t.precision + 1, 76), t.scale))
            return fit_decimal(pc.round(wide, places, round_mode=mode), target)
        return _round_double(x, places, half_up=half_up)

    return kernel


def _floor_ceil(arrow_fn: Callable[[Value], Value]) -> Kernel:
    @strict(pa.null())
    def kernel(x: Value) -> Value:
        t = x.type
        if pa.types.is_integer(t):
            return x
        if pa.types.is_decimal(t):
            # widen first: CEIL(999.99) needs a fourth integral digit
            widened = pa.decimal128(min(t.precision + 1, _MAX_PRECISION), t.scale)
            return _cast(arrow_fn(_cast(x, widened)), _integral_decimal(t))
        return arrow_fn(x)

    return kernel


# ---------------------------------------------------------------- other numeric functions


@strict(pa.null())
def _sign(x: Value) -> Value:
    # Arrow's sign gives int8/int64 for integers and decimals; Flink keeps the argument type
    if pa.types.is_decimal(x.type):
        # an int64 does not cast to a narrow DECIMAL, -1, 0 and 1 do
        one, zero = pa.scalar(Decimal(1), x.type), pa.scalar(Decimal(0), x.type)
        return pc.if_else(pc.greater(x, zero), one, pc.if_else(pc.less(x, zero), pc.negate(one), zero))
    return _cast(pc.sign(x), x.type)


def _log(base_or_x: Value, x: Value | None = None) -> Value:
    """LOG(x) is the natural logarithm, LOG(b, x) = ln(x) / ln(b) as in Flink."""
    if x is None:
        return pc.ln(_double(base_or_x))
    # sqlglot parses LOG10(x) as LOG(10, x); Flink computes LOG10 with Math.log10
    if isinstance(base_or_x, pa.Scalar) and base_or_x.as_py() == 10:
        return pc.log10(_double(x))
    return pc.divide(pc.ln(_double(x)), pc.ln(_double(base_or_x)))


def _unary_double(fn: Callable[[Value], Value]) -> Kernel:
    def kernel(x: Value) -> Value:
        return fn(_double(x))

    return kernel


# ---------------------------------------------------------------- comparison and conditionals


def _greatest_least_infer(name: str) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        return _common_comparable(name, types)

    return infer


def _element_wise(arrow_fn: Callable[..., Value]) -> Kernel:
    def kernel(*args: Value) -> Value:
        # Flink: NULL if any argument is NULL (the binder cast all to one type)
        if any(isinstance(a, pa.Scalar) and not a.is_valid for a in args):
            return pa.scalar(None, args[0].type)
        return arrow_fn(*args, skip_nulls=False)

    return kernel


def _if_infer(types: list[pa.DataType]) -> pa.DataType:
    check_args("IF", types, (BOOLEAN,))
    result = common_type(types[1], types[2])
    if result is None:
        raise ArgumentTypeError(f"IF branches cannot combine {type_names(types[1:])}")
    return result


def _if(condition: Value, when_true: Value, when_false: Value) -> Value:
    result = common_type(when_true.type, when_false.type)
    assert result is not None
    # an UNKNOWN condition selects the false branch, as in Flink
    known = pc.coalesce(_cast(condition, pa.bool_()), False)
    return pc.if_else(known, _cast(when_true, result), _cast(when_false, result))


def _nullif_infer(types: list[pa.DataType]) -> pa.DataType:
    result = _common_comparable("NULLIF", types)
    return result if pa.types.is_null(types[0]) else types[0]


def _nullif(value: Value, other: Value) -> Value:
    if pa.types.is_null(value.type) or pa.types.is_null(other.type):
        return value
    both = common_type(value.type, other.type)
    assert both is not None
    equal = pc.coalesce(pc.equal(_cast(value, both), _cast(other, both)), False)
    return pc.if_else(equal, pa.scalar(None, value.type), value)


def _distinct_infer(name: str) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        _common_comparable(name, types)
        return pa.bool_()

    return infer


def _not_distinct(a: Value, b: Value) -> Value:
    """a IS NOT DISTINCT FROM b: equality where two NULLs are equal; never NULL."""
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    if pa.types.is_null(a.type) or pa.types.is_null(b.type):
        return both_null
    equal = pc.equal(a, b)
    return pc.if_else(pc.is_null(equal), both_null, equal)


def _distinct(a: Value, b: Value) -> Value:
    return pc.invert(_not_distinct(a, b))


# ---------------------------------------------------------------- registration

register("ABS", _same_numeric("ABS"), strict(pa.null())(pc.abs), 1)  # ABS(MIN_VALUE) wraps, as Java
register("SIGN", _same_numeric("SIGN"), _sign, 1, aliases=("SIGNUM",))
register("ROUND", _round_infer("ROUND"), _round_kernel("ROUND", True), 1, 2, sees_constants=True)
register("TRUNCATE", _round_infer("TRUNCATE"), _round_kernel("TRUNCATE", False), 1, 2, sees_constants=True)
register("FLOOR", _floor_ceil_infer("FLOOR"), _floor_ceil(pc.floor), 1)
register("CEIL", _floor_ceil_infer("CEIL"), _floor_ceil(pc.ceil), 1, aliases=("CEILING",))
register(
    "POWER",
    _double_result("POWER", 2),
    lambda a, b: pc.power(_double(a), _double(b)),
    2,
    aliases=("POW",),
)
register("SQRT", _double_result("SQRT", 1), _unary_double(pc.sqrt), 1)
register("EXP", _double_result("EXP", 1), _unary_double(pc.exp), 1)
register("LN", _double_result("LN", 1), _unary_double(pc.ln), 1)
register("LOG10", _double_result("LOG10", 1), _unary_double(pc.log10), 1)
# Flink computes LOG2 as ln(x) / ln(2), which differs from log2 in the last bit
register("LOG2", _double_result("LOG2", 1), lambda x: pc.divide(pc.ln(_double(x)), math.log(2)), 1)
register("LOG", returns("LOG", pa.float64(), NUMERIC, NUMERIC), _log, 1, 2)
for _name, _fn in (
    ("SIN", pc.sin),
    ("COS", pc.cos),
    ("TAN", pc.tan),
    ("ASIN", pc.asin),
    ("ACOS", pc.acos),
    ("ATAN", pc.atan),
    ("SINH", pc.sinh),
    ("COSH", pc.cosh),
    ("TANH", pc.tanh),
):
    register(_name, _double_result(_name, 1), _unary_double(_fn), 1)
register("COT", _double_result("COT", 1), lambda x: pc.divide(1.0, pc.tan(_double(x))), 1)
register("ATAN2", _double_result("ATAN2", 2), lambda y, x: pc.atan2(_double(y), _double(x)), 2)
register(
    "DEGREES", _double_result("DEGREES", 1), lambda x: pc.multiply(_double(x), 180.0 / math.pi), 1
)
register(
    "RADIANS", _double_result("RADIANS", 1), lambda x: pc.multiply(_double(x), math.pi / 180.0), 1
)
register("PI", returns("PI", pa.float64()), lambda: pa.scalar(math.pi), 0)
register("E", returns("E", pa.float64()), lambda: pa.scalar(math.e), 0)
register(
    "GREATEST",
    _greatest_least_infer("GREATEST"),
    _element_wise(pc.max_element_wise),
    1,
    None,
    coerce_args=True,
)
register(
    "LEAST",
    _greatest_least_infer("LEAST"),
    _element_wise(pc.min_element_wise),
    1,
    None,
    coerce_args=True,
)
register("IF", _if_infer, _if, 3)
register("NULLIF", _nullif_infer, _nullif, 2)
register("IS_DISTINCT_FROM", _distinct_infer("IS DISTINCT FROM"), _distinct, 2, coerce_args=True)
register(
    "IS_NOT_DISTINCT_FROM",
    _distinct_infer("IS NOT DISTINCT FROM"),
    _not_distinct,
    2,
    coerce_args=True,
)
