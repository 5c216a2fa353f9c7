"""CAST between numbers and to STRING with the results of Flink's generated Java code.

Arrow's casts differ from Java's in the places that show in results: Arrow refuses to narrow an
integer or to drop a decimal's digits, where Java wraps around and Flink rounds HALF_UP (NULL
on overflow); Arrow prints 1.2345678e+07, true and 0E-10 where Java prints 1.2345678E7, TRUE
and 0.0000000000.  Everything here is vectorized over whole columns.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.functions.arithmetic import as_decimal, fit_decimal
from sqlstream.core.functions.temporal import months_of_interval
from sqlstream.core.types import is_month_interval

Value = pa.Array | pa.Scalar

_JAVA_INT = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


def cast_number(value: Value, target: pa.DataType) -> Value:
    """A number to an integer or DECIMAL type: an integer narrows by wrapping around, a DECIMAL
    or DOUBLE becomes an integer by truncation (a DOUBLE saturating at the int/long range, NaN
    giving 0), a DECIMAL target rounds HALF_UP and is NULL where the value does not fit."""
    source = value.type
    if pa.types.is_decimal(target):
        if pa.types.is_floating(source):
            rounded = pc.round(pc.cast(value, pa.float64()), target.scale, round_mode="half_towards_infinity")
            bound = 10.0 ** (target.precision - target.scale)
            fits = pc.and_(pc.is_finite(rounded), pc.less(pc.abs(rounded), bound))
            return pc.cast(pc.if_else(fits, rounded, pa.scalar(None, pa.float64())), target, safe=False)
        wide = as_decimal(source)
        return fit_decimal(pc.cast(value, pa.decimal256(wide.precision, wide.scale)), target)
    if pa.types.is_floating(source):
        # Java's (int)/(long) of a double; bytes and shorts go through int and then wrap
        through = target if target in _JAVA_INT else pa.int32()
        low, high = _JAVA_INT[through]
        wide = pc.cast(value, pa.float64())
        clipped = pc.min_element_wise(
            pc.max_element_wise(wide, float(low), skip_nulls=False), float(high), skip_nulls=False
        )
        clipped = pc.if_else(pc.is_nan(clipped), 0.0, clipped)
        if through == pa.int64():
            # Long.MAX_VALUE is no double: the bound rounds up to 2^63, which would wrap to MIN_VALUE
            too_big = pc.greater_equal(clipped, 2.0 ** 63)
            in_range = pc.cast(pc.if_else(too_big, 0.0, clipped), through, safe=False)
            value = pc.if_else(too_big, pa.scalar(high, pa.int64()), in_range)
        else:
            value = pc.cast(clipped, through, safe=False)
    elif pa.types.is_decimal(source):
        value = pc.cast(value, pa.int64(), safe=False)  # truncates toward zero
    return pc.cast(value, target, safe=False)


def cast_to_float(value: Value, target: pa.DataType) -> Value:
    """A DECIMAL to FLOAT/DOUBLE correctly rounded, as BigDecimal.doubleValue(): Arrow divides the
    unscaled value by a power of ten in binary (0.000123 came out as 1.2299999999999998E-4),
    while reading the decimal's digits is exact."""
    return pc.cast(pc.cast(value, pa.string()), target)


def string_to_time(value: Value) -> Value:
    """'HH:mm:ss[.fff]' as TIME: Arrow has no string-to-time cast, but one to timestamp."""
    return pc.cast(pc.cast(pc.binary_join_element_wise("1970-01-01 ", value, ""), pa.timestamp("ms")), pa.time32("ms"))


def to_string(value: Value) -> Value | None:
    """``value`` as Flink's CAST(... AS STRING) prints it, or None where Arrow's cast already does."""
    t = value.type
    if pa.types.is_boolean(t):
        return pc.if_else(value, "TRUE", "FALSE")
    if pa.types.is_floating(t):
        return _java_double_string(value)
    if pa.types.is_decimal(t) and t.scale > 0:
        return _plain_decimal_string(value)
    if pa.types.is_time(t):
        return _time_string(value)
    if is_month_interval(t):
        return _month_interval_string(value)
    if pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        if isinstance(value, pa.Scalar):
            return _nested_string(pa.array([value.as_py()], t))[0]
        return _nested_string(value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value)
    return None


def _text(arr: pa.Array) -> pa.Array:
    """Each value's CAST text, 'NULL' for a NULL (as Flink prints a nested value's parts)."""
    text = to_string(arr)
    return pc.fill_null(pc.cast(arr, pa.string()) if text is None else text, "NULL")


def _nested_string(arr: pa.Array) -> pa.Array:
    """Flink's text of ARRAY, MAP and ROW values: [a, NULL], {k=v, k2=v2}, (f1, (g1, g2))."""
    t = arr.type
    if pa.types.is_struct(t):
        parts = [_text(pc.struct_field(arr, [i])) for i in range(t.num_fields)]
        body = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ", ")
        whole = pc.binary_join_element_wise("(", body, ")", "")
        return pc.if_else(arr.is_valid(), whole, pa.scalar(None, pa.string()))
    if pa.types.is_map(t):
        items = pc.binary_join_element_wise(_text(arr.keys), _text(arr.items), "=")
        opening, closing = "{", "}"
    else:
        items, opening, closing = _text(arr.values), "[", "]"
    offsets = pa.array(arr.offsets.to_numpy())  # fresh: Arrow takes no mask with sliced offsets
    lists = pa.ListArray.from_arrays(offsets, items, mask=arr.is_null() if arr.null_count else None)
    return pc.binary_join_element_wise(opening, pc.binary_join(lists, ", "), closing, "")


def _month_interval_string(value: Value) -> Value:
    """Flink's INTERVAL MONTH text: sign, years, '-', two-digit months ('+1-02', '-1-01')."""
    months = months_of_interval(value)
    magnitude = pc.abs(months)
    years = pc.cast(pc.divide(magnitude, 12), pa.string())
    rest = pc.utf8_lpad(pc.cast(pc.subtract(magnitude, pc.multiply(pc.divide(magnitude, 12), 12)), pa.string()), 2, "0")
    sign = pc.if_else(pc.less(months, 0), "-", "+")
    return pc.binary_join_element_wise(sign, years, "-", rest, "")


def _java_double_string(x: Value) -> Value:
    """Java's Double.toString / Float.toString: plain digits (at least one after the point) for
    10^-3 <= |x| < 10^7, else d.dddE<n>; Arrow supplies the shortest digits that read back."""
    magnitude = pc.abs(x)
    shortest = pc.cast(magnitude, pa.string())  # '1234567', '0.001', '1e+20', '1.5e-05'
    plain = pc.if_else(pc.match_substring(shortest, "."), shortest, pc.binary_join_element_wise(shortest, ".0", ""))
    mantissa = pc.replace_substring_regex(shortest, r"e.*$", "")
    shift = pc.cast(
        pc.replace_substring_regex(pc.replace_substring_regex(shortest, r"^[^e]*e?\+?", ""), r"^$", "0"), pa.int32()
    )
    whole = pc.replace_substring_regex(mantissa, r"\..*$", "")
    digits = pc.replace_substring(mantissa, ".", "")
    significant = pc.utf8_ltrim(digits, "0")
    leading = pc.subtract(pc.utf8_length(digits), pc.utf8_length(significant))
    exponent = pc.add(pc.subtract(pc.subtract(pc.utf8_length(whole), 1), leading), shift)
    significant = pc.utf8_rtrim(significant, "0")
    fraction = pc.utf8_slice_codeunits(significant, 1)
    fraction = pc.if_else(pc.equal(pc.utf8_length(fraction), 0), "0", fraction)
    scientific = pc.binary_join_element_wise(
        pc.utf8_slice_codeunits(significant, 0, 1), ".", fraction, "E", pc.cast(exponent, pa.string()), ""
    )
    in_plain_range = pc.or_(
        pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)), pc.equal(magnitude, 0.0)
    )
    text = pc.if_else(in_plain_range, plain, scientific)
    # the sign, -0.0 included (1 / -0.0 is -Infinity)
    negative = pc.or_(pc.less(x, 0.0), pc.and_(pc.equal(x, 0.0), pc.less(pc.divide(1.0, pc.cast(x, pa.float64())), 0.0)))
    text = pc.if_else(negative, pc.binary_join_element_wise("-", text, ""), text)
    text = pc.if_else(pc.is_inf(x), pc.if_else(pc.less(x, 0.0), "-Infinity", "Infinity"), text)
    return pc.if_else(pc.is_nan(x), "NaN", text)


def _plain_decimal_string(x: Value) -> Value:
    """BigDecimal.toPlainString: every fraction digit of the scale, never an exponent."""
    t = x.type
    wide = pc.cast(x, pa.decimal256(t.precision, t.scale))
    magnitude = pc.abs(wide)
    whole = pc.round(magnitude, 0, round_mode="towards_zero")
    integral = pc.cast(pc.cast(whole, pa.decimal256(t.precision, 0)), pa.string())
    scaled = pc.multiply(pc.subtract(magnitude, whole), pa.scalar(10**t.scale, pa.decimal256(t.scale + 1, 0)))
    fraction = pc.cast(pc.cast(scaled, pa.decimal256(scaled.type.precision - scaled.type.scale, 0)), pa.string())
    text = pc.binary_join_element_wise(integral, ".", pc.utf8_lpad(fraction, t.scale, "0"), "")
    negative = pc.less(wide, pa.scalar(Decimal(0), pa.decimal256(1, 0)))
    return pc.if_else(negative, pc.binary_join_element_wise("-", text, ""), text)


def _time_string(x: Value) -> Value:
    """TIME as HH:mm:ss, with the milliseconds only where there are any ('10:00:01.5')."""
    text = pc.cast(pc.cast(x, pa.time32("ms")), pa.string())  # '10:00:01.500'
    return pc.replace_substring_regex(pc.replace_substring_regex(text, r"(\.\d*?)0+$", r"\1"), r"\.$", "")
