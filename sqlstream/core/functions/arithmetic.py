"""Arithmetic operators (+, -, *, /, %) with Flink's result types and Java's integer semantics.

Flink types exact arithmetic with LogicalTypeMerging: integers keep the wider operand type and
wrap around on overflow as Java ints and longs do; DECIMAL results get a derived precision and
scale, capped at 38 digits by giving up fraction digits (keeping at least 6), and a value that
does not fit the result type becomes NULL (DecimalData.fromBigDecimal).  Division rounds HALF_UP
at the result scale.  Integer and DECIMAL division by zero fail the job; DOUBLE division gives
Infinity or NaN.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import DataError
from sqlstream.core.functions import ArgumentTypeError, Value, common_type
from sqlstream.core.types import is_numeric, sql_type_name

MAX_PRECISION = 38
_MIN_ADJUSTED_SCALE = 6
_HALF_UP = "half_towards_infinity"
_WIDE = 76  # decimal256 holds the exact result of any operation on two DECIMAL(38)s but *

# the DECIMAL(p, 0) an integer operand takes part in decimal arithmetic as
INTEGER_DIGITS = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 19}


def as_decimal(t: pa.DataType) -> pa.Decimal128Type:
    return t if pa.types.is_decimal(t) else pa.decimal128(INTEGER_DIGITS[t], 0)


def adjust(precision: int, scale: int) -> pa.Decimal128Type:
    """LogicalTypeMerging.adjustPrecisionScale: over 38 digits keep the integral digits and
    drop fraction digits down to min(scale, 6)."""
    if precision <= MAX_PRECISION:
        return pa.decimal128(precision, scale)
    integral = precision - scale
    kept = max(MAX_PRECISION - integral, min(scale, _MIN_ADJUSTED_SCALE))
    return pa.decimal128(MAX_PRECISION, kept)


def decimal_result(op: str, a: pa.Decimal128Type, b: pa.Decimal128Type) -> pa.Decimal128Type:
    """LogicalTypeMerging.find{Addition,Multiplication,Division,Modulo}DecimalType."""
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if op == "*":
        return adjust(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(_MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + scale, scale)
    scale = max(s1, s2)  # %
    return adjust(min(p1 - s1, p2 - s2) + scale, scale)


def avg_type(t: pa.DataType) -> pa.DataType:
    """LogicalTypeMerging.findAvgAggType: DECIMAL(38, max(6, s)), else the argument type."""
    return decimal_result("/", pa.decimal128(MAX_PRECISION, t.scale), pa.decimal128(20, 0)) if pa.types.is_decimal(t) else t


def sum_type(t: pa.DataType) -> pa.DataType:
    """LogicalTypeMerging.findSumAggType: DECIMAL(38, s), else the argument type (INT stays INT)."""
    return pa.decimal128(MAX_PRECISION, t.scale) if pa.types.is_decimal(t) else t


def result_type(op: str, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_null(a) and pa.types.is_null(b):
        return pa.int32()
    if pa.types.is_null(a) or pa.types.is_null(b):
        known = b if pa.types.is_null(a) else a
        return result_type(op, known, known)
    if not (is_numeric(a) and is_numeric(b)):
        raise ArgumentTypeError(f"operator '{op}' needs numeric operands, got {sql_type_name(a)}, {sql_type_name(b)}")
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        # PyFlink 2.3: FLOAT with an integer or even a DOUBLE stays FLOAT, with a DECIMAL it is DOUBLE
        if pa.float32() in (a, b) and not (pa.types.is_decimal(a) or pa.types.is_decimal(b)):
            return pa.float32()
        return pa.float64()
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        return decimal_result(op, as_decimal(a), as_decimal(b))
    if op == "%":
        return b  # Calcite's NULLABLE_MOD: the divisor's type (MOD(BIGINT, INT) is an INT; it fits)
    out = common_type(a, b)
    assert out is not None
    return out


def fit_decimal(value: Value, target: pa.Decimal128Type) -> Value:
    """An exact decimal rounded HALF_UP to the target scale; NULL where it overflows the precision."""
    vt = value.type
    if vt.scale > target.scale:
        # one more digit first: rounding can carry (9.5 to 10)
        value = pc.round(pc.cast(value, pa.decimal256(min(vt.precision + 1, _WIDE), vt.scale)), target.scale, round_mode=_HALF_UP)
        vt = value.type
    # room for the value and for 10**(p - s), the first number that no longer fits
    digits = max(vt.precision - vt.scale, target.precision - target.scale + 1) + target.scale
    wide = pc.cast(value, pa.decimal256(min(digits, _WIDE), target.scale))
    limit = pa.scalar(Decimal(10) ** (target.precision - target.scale), wide.type)
    fits = pc.less(pc.abs(wide), limit)
    return pc.cast(pc.if_else(fits, wide, pa.scalar(None, wide.type)), target)


def _wide(value: Value) -> Value:
    t = as_decimal(value.type)
    return pc.cast(value, pa.decimal256(t.precision, t.scale))


_EXACT = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "/": lambda x, y: x / y,
    "%": lambda x, y: x % y,  # Python's Decimal remainder takes the dividend's sign, as Java's
}


def _python_decimal(op: str, a: Value, b: Value, target: pa.Decimal128Type) -> Value:
    """Operands so wide (DECIMAL(38) by DECIMAL(38)) that Arrow's decimal256 result type would
    exceed 76 digits: Python's decimal computes them exactly, row by row."""
    xs = a.to_pylist() if isinstance(a, pa.Array) else None
    ys = b.to_pylist() if isinstance(b, pa.Array) else None
    rows = len(xs) if xs is not None else len(ys) if ys is not None else 1
    xs = xs if xs is not None else [a.as_py()] * rows
    ys = ys if ys is not None else [b.as_py()] * rows
    quantum = Decimal(1).scaleb(-target.scale)
    bound = Decimal(10) ** (target.precision - target.scale)
    out: list[Decimal | None] = []
    with localcontext() as ctx:
        ctx.prec = 200
        for x, y in zip(xs, ys, strict=True):
            if x is None or y is None:
                out.append(None)
                continue
            exact = _EXACT[op](Decimal(x), Decimal(y))
            rounded = exact.quantize(quantum, rounding=ROUND_HALF_UP)
            out.append(rounded if abs(rounded) < bound else None)
    arr = pa.array(out, target)
    return arr if isinstance(a, pa.Array) or isinstance(b, pa.Array) else arr[0]


def _zero_divisor(a: Value, b: Value) -> bool:
    """Whether a row divides a value by zero; NULL / 0 is NULL in Flink (its generated code tests
    the operands for NULL before it divides), so only a non-NULL dividend counts."""
    zero = pc.equal(b, pa.scalar(0, b.type) if not pa.types.is_decimal(b.type) else pa.scalar(Decimal(0), b.type))
    zero = pc.and_(zero, pc.is_valid(a))
    return bool(pc.any(zero).as_py()) if isinstance(zero, pa.Array) else bool(zero.as_py())


def _decimal_op(op: str, a: Value, b: Value, target: pa.Decimal128Type) -> Value:
    if op in ("/", "%") and _zero_divisor(a, b):
        raise DataError("Division by zero")
    x, y = _wide(a), _wide(b)
    try:
        return fit_decimal(_exact(op, x, y, target), target)
    except pa.ArrowInvalid:
        return _python_decimal(op, a, b, target)


def _exact(op: str, x: Value, y: Value, target: pa.Decimal128Type) -> Value:
    """``x op y`` in decimal256, exact (division: one digit past the target scale, truncated)."""
    if op == "+":
        return pc.add(x, y)
    if op == "-":
        return pc.subtract(x, y)
    if op == "*":
        return pc.multiply(x, y)
    # Arrow divides truncating at scale max(4, s1 + p2 - s2 + 1); with the dividend's scale
    # raised past the target's that keeps at least one digit more, so HALF_UP is then exact
    xt = x.type
    raise_by = max(target.scale + 1 - xt.scale, 0)
    if raise_by:
        x = pc.cast(x, pa.decimal256(xt.precision + raise_by, xt.scale + raise_by))
    quotient = pc.divide(x, y)
    if op == "/":
        return quotient
    # Java's remainder: x - trunc(x / y) * y, with the dividend's sign
    whole = pc.round(quotient, 0, round_mode="towards_zero")
    integral = quotient.type.precision - quotient.type.scale
    return pc.subtract(x, pc.multiply(pc.cast(whole, pa.decimal256(integral, 0)), y))


def _integer_op(op: str, a: Value, b: Value) -> Value:
    if op == "+":
        return pc.add(a, b)
    if op == "-":
        return pc.subtract(a, b)
    if op == "*":
        return pc.multiply(a, b)
    if _zero_divisor(a, b):
        raise DataError("/ by zero")
    # Arrow's divide truncates toward zero, as Java's; MIN_VALUE / -1 is MIN_VALUE in Java (Arrow
    # gives 0), and x / -1 is -x wrapped
    quotient = pc.if_else(pc.equal(b, pa.scalar(-1, b.type)), pc.negate(a), pc.divide(a, b))
    if op == "/":
        return quotient
    # Java's remainder takes the dividend's sign
    return pc.subtract(a, pc.multiply(quotient, b))


def _float_op(op: str, a: Value, b: Value) -> Value:
    if op == "+":
        return pc.add(a, b)
    if op == "-":
        return pc.subtract(a, b)
    if op == "*":
        return pc.multiply(a, b)
    if op == "/":
        return pc.divide(a, b)  # x / 0.0 is Infinity or NaN, as in Java
    quotient = pc.trunc(pc.divide(a, b))
    return pc.subtract(a, pc.multiply(quotient, b))


def evaluate(op: str, a: Value, b: Value) -> Value:
    """``a op b`` typed as result_type: the kernel behind the arithmetic operators."""
    target = result_type(op, a.type, b.type)
    if pa.types.is_null(a.type) or pa.types.is_null(b.type):
        return pa.scalar(None, target)
    if pa.types.is_decimal(target):
        return _decimal_op(op, a, b, target)
    if pa.types.is_floating(target):
        # a DECIMAL operand is read as BigDecimal.doubleValue() does, correctly rounded
        a, b = (pc.cast(pc.cast(v, pa.string()), target) if pa.types.is_decimal(v.type) else pc.cast(v, target, safe=False) for v in (a, b))
        return _float_op(op, a, b)
    if op == "%":
        # computed in the wider type, then typed as the divisor: the remainder is smaller than it
        wide = common_type(a.type, b.type)
        return pc.cast(_integer_op(op, pc.cast(a, wide), pc.cast(b, wide)), target)
    a, b = pc.cast(a, target), pc.cast(b, target)
    return _integer_op(op, a, b)
