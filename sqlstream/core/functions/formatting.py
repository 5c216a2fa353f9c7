"""PRINTF(format, args...): Flink's java.util.Formatter (Locale.US) over Flink's internal values.

Flink hands the formatter its internal objects, so what a conversion accepts is decided by the
argument's SQL type: TINYINT..BIGINT are Byte/Short/Integer/Long (``%d %o %x %c %s``), FLOAT and
DOUBLE Float/Double (``%f %e %g %s``), a DECIMAL is a DecimalData (``%s`` only: its plain digits),
a STRING is a StringData (``%s`` only), a DATE or TIME its int (days, milliseconds), a TIMESTAMP a
TimestampData printing as LocalDateTime does ('2024-01-02T03:04:05.123'). Whatever the formatter
rejects (a missing argument, a conversion the value does not take, a flag the conversion does not
take, an unknown conversion) makes the result NULL, as Flink catches the exception; a NULL argument
prints 'null' ('false' for ``%b``), a NULL format gives NULL.

Refused at plan time, since no engine but a JVM can print them: ``%h`` (the object's hashCode),
``%t`` (date/time conversions), ``%a`` (hexadecimal floats), and arguments of the types Flink
prints as an object identity (BYTES: '[B@40813cd5'; ARRAY, MAP, ROW) or that it types otherwise
(INTERVAL).  The format is parsed once per distinct format value; each row's arguments are
formatted in Python, as java.util.Formatter has no Arrow counterpart.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# the module, not the name: casts imports functions.arithmetic, whose package imports this module
from sqlstream.core import casts
from sqlstream.core.functions import ArgumentTypeError, Value, register
from sqlstream.core.types import is_month_interval, is_string, sql_type_name

# java.util.Formatter's format specifier
_SPEC = re.compile(r"%(\d+\$)?([-#+ 0,(<]*)?(\d+)?(\.\d+)?([tT])?([a-zA-Z%])")
_UNSUPPORTED = {"h": "%h (a Java object's hashCode)", "H": "%H (a Java object's hashCode)",
                "a": "%a (hexadecimal floating point)", "A": "%A (hexadecimal floating point)"}


class _Fails(Exception):
    """What java.util.Formatter throws: the row's result is NULL."""


@dataclass(frozen=True)
class _Spec:
    index: int | None  # the argument (0-based); None for %% and %n
    flags: str
    width: int | None
    precision: int | None
    conversion: str


def _check_flags(flags: str, allowed: str) -> None:
    if any(f not in allowed for f in flags) or len(set(flags)) != len(flags):
        raise _Fails


@lru_cache(maxsize=256)
def _parse(fmt: str) -> tuple[tuple[str | _Spec, ...], str | None]:
    """(literal texts and specifiers in order, None) or ((), why it fails) — Formatter.parse and
    the flag checks it does before formatting anything. Raises ArgumentTypeError for what
    sqlstream does not support."""
    parts: list[str | _Spec] = []
    pos, ordinary, last = 0, 0, None
    try:
        for m in _SPEC.finditer(fmt):
            literal = fmt[pos:m.start()]
            if "%" in literal:
                raise _Fails  # a '%' that starts no specifier: UnknownFormatConversionException
            parts.append(literal)
            pos = m.end()
            explicit, flags, width, precision, time, conversion = m.groups()
            flags = flags or ""
            if time:
                raise ArgumentTypeError(f"PRINTF: the date/time conversion %{time}{conversion} is not supported")
            if conversion in _UNSUPPORTED:
                raise ArgumentTypeError(f"PRINTF: {_UNSUPPORTED[conversion]} is not supported")
            w = int(width) if width else None
            p = int(precision[1:]) if precision else None
            if conversion not in "bBsScCdoxXeEfgG%n":
                raise _Fails
            if ("-" in flags or "0" in flags) and w is None:
                raise _Fails  # MissingFormatWidthException
            if ("-" in flags and "0" in flags) or ("+" in flags and " " in flags):
                raise _Fails  # IllegalFormatFlagsException
            if conversion in "%n":
                if conversion == "n" and (flags or w is not None or p is not None):
                    raise _Fails
                if conversion == "%":
                    _check_flags(flags, "-")
                    if p is not None:
                        raise _Fails
                parts.append(_Spec(None, flags, w, p, conversion))
                continue
            if conversion in "bBsS":
                _check_flags(flags, "-<")
            elif conversion in "cC":
                _check_flags(flags, "-<")
                if p is not None:
                    raise _Fails
            elif conversion == "d":
                _check_flags(flags, "-+ 0,(<")
                if p is not None:
                    raise _Fails
            elif conversion in "oxX":
                _check_flags(flags, "-#0<")  # + ' ' , ( do not fit an Integer's octal/hex
                if p is not None:
                    raise _Fails
            elif conversion in "eE":
                _check_flags(flags, "-#+ 0(<")
            elif conversion == "f":
                _check_flags(flags, "-#+ 0,(<")
            else:  # g G
                _check_flags(flags, "-+ 0,(<")
            if "<" in flags:
                if last is None:
                    raise _Fails  # MissingFormatArgumentException
                index = last
            elif explicit:
                index = int(explicit[:-1]) - 1
                if index < 0:
                    raise _Fails
            else:
                index, ordinary = ordinary, ordinary + 1
            last = index
            parts.append(_Spec(index, flags.replace("<", ""), w, p, conversion))
        if "%" in fmt[pos:]:
            raise _Fails
    except _Fails:
        return (), "fails"
    parts.append(fmt[pos:])
    return tuple(parts), None


def _justify(text: str, spec: _Spec) -> str:
    if spec.width is None or len(text) >= spec.width:
        return text
    return text.ljust(spec.width) if "-" in spec.flags else text.rjust(spec.width)


def _group(digits: str) -> str:
    head = len(digits) % 3 or 3
    return ",".join([digits[:head], *(digits[i:i + 3] for i in range(head, len(digits), 3))])


def _signed(magnitude: str, negative: bool, spec: _Spec) -> str:
    """Sign flags and zero padding around a number's digits, as Formatter adds them."""
    lead = "(" if negative and "(" in spec.flags else "-" if negative else "+" if "+" in spec.flags \
        else " " if " " in spec.flags else ""
    trail = ")" if negative and "(" in spec.flags else ""
    if "0" in spec.flags and spec.width is not None:
        magnitude = magnitude.rjust(spec.width - len(lead) - len(trail), "0")
    return _justify(lead + magnitude + trail, spec)


def _round(value: Decimal, places: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 330 + max(places, 0)  # every digit of a double's integral part (up to 309) and the places
        return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _fixed(value: Decimal, places: int, spec: _Spec) -> str:
    text = f"{_round(value, places):f}"
    whole, _, fraction = text.partition(".")
    if "," in spec.flags:
        whole = _group(whole)
    if fraction or "#" in spec.flags:
        return f"{whole}.{fraction}"
    return whole


def _scientific(value: Decimal, places: int, conversion: str) -> str:
    if value == 0:
        mantissa, exponent = _round(Decimal(0), places), 0
    else:
        exponent = value.adjusted()
        mantissa = _round(value.scaleb(-exponent), places)
        if mantissa >= 10:  # 9.99... rounded up
            exponent += 1
            mantissa = _round(value.scaleb(-exponent), places)
    text = f"{mantissa:f}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return text.upper() if conversion.isupper() else text


def _float(value: float, java_digits: str, spec: _Spec) -> str:
    """%e %f %g of a Float or Double: Java rounds the shortest decimal digits that read back as the
    value (Double.toString's), half up, where C would round the binary value."""
    c = spec.conversion
    if value != value:
        return _justify("NAN" if c.isupper() else "NaN", spec)
    negative = value < 0 or (value == 0 and str(value).startswith("-"))
    if value in (float("inf"), float("-inf")):
        text = "INFINITY" if c.isupper() else "Infinity"
        lead = "(" if negative and "(" in spec.flags else "-" if negative else "+" if "+" in spec.flags \
            else " " if " " in spec.flags else ""
        return _justify(lead + text + (")" if negative and "(" in spec.flags else ""), spec)
    magnitude = abs(Decimal(java_digits))
    precision = 6 if spec.precision is None else spec.precision
    if c == "f":
        body = _fixed(magnitude, precision, spec)
    elif c in "eE":
        body = _scientific(magnitude, precision, c)
        if "#" in spec.flags and precision == 0:
            body = body.replace("e", ".e").replace("E", ".E")
    else:  # g G: scientific unless 10^-4 <= the rounded value < 10^precision
        precision = precision or 1
        if magnitude == 0:
            body = _fixed(magnitude, precision - 1, spec)
        else:
            exponent = magnitude.adjusted()
            rounded = _round(magnitude.scaleb(-exponent), precision - 1).scaleb(exponent)
            if Decimal("0.0001") <= rounded < Decimal(10) ** precision:
                body = _fixed(magnitude, precision - 1 - rounded.adjusted(), spec)
            else:
                body = _scientific(magnitude, precision - 1, c)
        body = body.upper() if c == "G" else body
    return _signed(body, negative, spec)


def _integer(value: int, bits: int, spec: _Spec) -> str:
    c = spec.conversion
    if c == "d":
        digits = str(abs(value))
        return _signed(_group(digits) if "," in spec.flags else digits, value < 0, spec)
    unsigned = value + (1 << bits) if value < 0 else value
    digits = format(unsigned, "o" if c == "o" else "x")
    prefix = ("0" if c == "o" else "0x") if "#" in spec.flags else ""
    if "0" in spec.flags and spec.width is not None:
        digits = digits.rjust(spec.width - len(prefix), "0")
    text = _justify(prefix + digits, spec)
    return text.upper() if c == "X" else text


@dataclass
class _Argument:
    """One argument column as the formatter sees it: its Java kind and its values."""

    kind: str  # int | float | decimal | string | boolean | timestamp | null
    bits: int  # an integer's width (Byte 8 ... Long 64)
    values: list[Any]
    java_text: list[str | None]  # String.valueOf of each value (%s)


def _local_date_time(value: dt.datetime) -> str:
    """LocalDateTime.toString: seconds only when not zero, then milli/micro/nano digits as needed."""
    text = value.strftime("%Y-%m-%dT%H:%M")
    micros = value.microsecond
    if value.second or micros:
        text += f":{value.second:02d}"
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text


def _argument(value: Value, rows: int) -> _Argument:
    t = value.type
    arr = pa.repeat(value, rows) if isinstance(value, pa.Scalar) else value
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_null(t):
        return _Argument("null", 0, [None] * rows, [None] * rows)
    if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t):
        if pa.types.is_date(t):
            arr, bits = pc.cast(pc.cast(arr, pa.date32()), pa.int32()), 32
        elif pa.types.is_time(t):
            arr, bits = pc.cast(pc.cast(arr, pa.time32("ms")), pa.int32()), 32
        else:
            bits = t.bit_width
        values = arr.to_pylist()
        return _Argument("int", bits, values, [None if v is None else str(v) for v in values])
    if pa.types.is_floating(t):
        text = casts.to_string(arr)
        assert text is not None
        java = text.to_pylist()
        digits = pc.cast(arr, pa.string()).to_pylist()  # the shortest digits that read back
        pairs = [None if v is None else (float(v), d) for v, d in zip(arr.to_pylist(), digits, strict=True)]
        return _Argument("float", t.bit_width, pairs, java)
    if pa.types.is_decimal(t):
        text = casts.to_string(arr)
        java = (text if text is not None else pc.cast(arr, pa.string())).to_pylist()
        return _Argument("decimal", 0, arr.to_pylist(), java)
    if pa.types.is_boolean(t):
        values = arr.to_pylist()
        return _Argument("boolean", 0, values, [None if v is None else str(v).lower() for v in values])
    if is_string(t):
        values = arr.to_pylist()
        return _Argument("string", 0, values, values)
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            arr = pc.cast(arr, pa.timestamp(t.unit))  # TIMESTAMP_LTZ: TimestampData of the UTC instant
        values = pc.cast(arr, pa.timestamp("us")).to_pylist()
        return _Argument("timestamp", 0, values, [None if v is None else _local_date_time(v) for v in values])
    raise ArgumentTypeError(f"PRINTF cannot format a {sql_type_name(t)}")


def _format_one(spec: _Spec, arg: _Argument, row: int) -> str:
    c = spec.conversion
    value = arg.values[row]
    if c in "bB":
        text = "false" if value is None else str(value).lower() if arg.kind == "boolean" else "true"
    elif value is None:
        text = "null"
    elif c in "sS":
        text = arg.java_text[row]
        assert text is not None
    elif c in "cC":
        if arg.kind != "int" or not 0 <= value <= 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise _Fails
        text = chr(value)
    elif c in "doxX":
        if arg.kind != "int":
            raise _Fails
        return _integer(value, arg.bits, spec)
    else:
        if arg.kind != "float":
            raise _Fails
        number, digits = value
        return _float(number, digits, spec)
    if spec.precision is not None:
        text = text[:spec.precision]
    text = _justify(text, spec)
    return text.upper() if c.isupper() else text


def _java_text(arr: pa.Array) -> pa.Array | None:
    """String.valueOf of each value as Flink hands it to the formatter, computed on the column
    ('null' for a NULL); None for a type formatted a value at a time."""
    t = arr.type
    if pa.types.is_null(t):
        text = pa.nulls(len(arr), pa.string())
    elif is_string(t):
        text = arr
    elif pa.types.is_integer(t):
        text = pc.cast(arr, pa.string())
    elif pa.types.is_boolean(t):
        text = pc.if_else(arr, "true", "false")
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        text = casts.to_string(arr)
        text = pc.cast(arr, pa.string()) if text is None else text
    elif pa.types.is_date(t):
        text = pc.cast(pc.cast(pc.cast(arr, pa.date32()), pa.int32()), pa.string())
    elif pa.types.is_time(t):
        text = pc.cast(pc.cast(pc.cast(arr, pa.time32("ms")), pa.int32()), pa.string())
    else:
        return None
    return pc.fill_null(text, "null")


def _vectorized(parts: tuple[str | _Spec, ...], args: list[pa.Array]) -> pa.Array | None:
    """A constant format whose specifiers are all %s, %d (of integers) and %b, with width,
    precision and the '-' flag only, applied to whole columns with Arrow's string kernels; None
    where a specifier needs the formatter a value at a time."""
    n = len(args[0]) if args else 0
    pieces: list[pa.Array | pa.Scalar] = []
    for part in parts:
        if isinstance(part, str):
            pieces.append(pa.scalar(part))
            continue
        c = part.conversion
        if c in "%n":
            pieces.append(pa.scalar(_justify("%", part) if c == "%" else "\n"))
            continue
        if part.index is None or part.index >= len(args) or part.flags not in ("", "-") or c not in "sbBd":
            return None
        arr = args[part.index]
        if c == "d":
            if not pa.types.is_integer(arr.type) or part.precision is not None:
                return None
            text = pc.fill_null(pc.cast(arr, pa.string()), "null")
        elif c == "s":
            found = _java_text(arr)
            if found is None:
                return None
            text = found
        else:  # %b: a Boolean's value, 'false' for NULL, 'true' for any other value
            truth = pc.fill_null(arr, False) if pa.types.is_boolean(arr.type) else arr.is_valid()
            text = pc.if_else(truth, "TRUE" if c == "B" else "true", "FALSE" if c == "B" else "false")
        if part.precision is not None:
            text = pc.utf8_slice_codeunits(text, 0, part.precision)
        if part.width is not None:
            text = (pc.utf8_rpad if "-" in part.flags else pc.utf8_lpad)(text, part.width, " ")
        pieces.append(text)
    if not any(isinstance(p, pa.Array) for p in pieces):
        return pa.array(["".join(p.as_py() for p in pieces)] * n, pa.string())
    return pc.binary_join_element_wise(*pieces, "")


def _printf(fmt: Value, *args: Value) -> Value:
    """Formats each row: a constant format on whole columns where its specifiers allow
    (_vectorized), else a row at a time, each distinct format parsed once."""
    columns = [len(a) for a in (fmt, *args) if not isinstance(a, pa.Scalar)]
    if not columns:  # constants only: one value
        return _printf(pa.array([fmt.as_py()], fmt.type), *args)[0]
    n = columns[0]
    if isinstance(fmt, pa.Scalar) and fmt.is_valid:
        parts, fails = _parse(fmt.as_py())
        if fails:
            return pa.nulls(n, pa.string())
        whole = [pa.repeat(a, n) if isinstance(a, pa.Scalar) else
                 a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in args]
        fast = _vectorized(parts, whole)
        if fast is not None:
            return fast
    formats = [fmt.as_py()] * n if isinstance(fmt, pa.Scalar) else fmt.to_pylist()
    arguments = [_argument(a, n) for a in args]
    out: list[str | None] = []
    for row, f in enumerate(formats):
        if f is None:
            out.append(None)
            continue
        parts, fails = _parse(f)
        if fails:
            out.append(None)
            continue
        pieces = []
        try:
            for part in parts:
                if isinstance(part, str):
                    pieces.append(part)
                elif part.conversion == "%":
                    pieces.append(_justify("%", part))
                elif part.conversion == "n":
                    pieces.append("\n")
                else:
                    assert part.index is not None
                    if part.index >= len(arguments):
                        raise _Fails  # MissingFormatArgumentException
                    pieces.append(_format_one(part, arguments[part.index], row))
        except _Fails:
            out.append(None)
            continue
        out.append("".join(pieces))
    return pa.array(out, pa.string())


def _printf_type(types: list[pa.DataType], constants: list[Any]) -> pa.DataType:
    if not (is_string(types[0]) or pa.types.is_null(types[0])):
        raise ArgumentTypeError(f"PRINTF's format must be a STRING, got {sql_type_name(types[0])}")
    for t in types[1:]:
        if not (pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                or pa.types.is_boolean(t) or is_string(t) or pa.types.is_date(t) or pa.types.is_time(t)
                or pa.types.is_timestamp(t)) or is_month_interval(t):
            raise ArgumentTypeError(
                f"PRINTF cannot format a {sql_type_name(t)} argument: Flink prints the Java object's identity "
                "or its internal form there")
    if isinstance(constants[0], str):
        _parse(constants[0])  # raises for the conversions sqlstream does not support
    return pa.string()


register("PRINTF", _printf_type, _printf, 1, None, sees_constants=True)
