"""Scalar functions and operators: their SQL typing and their vectorized kernel.

A function is registered once with the rule that types its arguments (and
rejects bad ones with a message) and an Arrow kernel that evaluates a whole
column at a time.  The binder looks functions up by name; the runtime calls
the kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.types import (
    is_month_interval,
    is_numeric,
    is_string,
    is_temporal,
    sql_type_name,
)

Value = pa.Array | pa.ChunkedArray | pa.Scalar
Kernel = Callable[..., Value]
Infer = Callable[[list[pa.DataType]], pa.DataType]


class ArgumentTypeError(Exception):
    """Raised by a typing rule; the binder adds the SQL position."""


@dataclass(frozen=True)
class ScalarFunction:
    name: str
    infer: Infer
    kernel: Kernel
    min_args: int
    max_args: int | None  # None: variadic
    # cast every argument to the inferred common type before calling the kernel
    coerce_args: bool = False
    # the typing rule also takes the arguments' constant values (None where not constant):
    # ROUND(d, 2)'s DECIMAL scale depends on the 2
    sees_constants: bool = False
    # the kernel reads or writes wall-clock time: it takes the session zone as ``zone=``
    zoned: bool = False
    # ``kernel`` makes one kernel per call site, which keeps state from batch to batch (a seeded
    # RAND's generator) and takes the batch's row count as ``rows=`` (a value per row, no argument)
    per_site: bool = False


REGISTRY: dict[str, ScalarFunction] = {}


def register(
    name: str,
    infer: Infer,
    kernel: Kernel,
    min_args: int,
    max_args: int | None = -1,
    coerce_args: bool = False,
    aliases: tuple[str, ...] = (),
    sees_constants: bool = False,
    zoned: bool = False,
    per_site: bool = False,
) -> None:
    fn = ScalarFunction(
        name, infer, kernel, min_args, min_args if max_args == -1 else max_args, coerce_args, sees_constants,
        zoned, per_site,
    )
    for n in (name, *aliases):
        REGISTRY[n.upper()] = fn


def lookup(name: str) -> ScalarFunction | None:
    return REGISTRY.get(name.upper())


_BITMAP = "the BITMAP type (Flink's RoaringBitmap) is not supported"
_INTERNAL_JSON = ("Flink's internal name of JSON_ARRAYAGG/JSON_OBJECTAGG, which takes the value unwrapped "
                  "(strings come out unquoted); write JSON_ARRAYAGG(...) / JSON_OBJECTAGG(...)")
# Functions of Flink 2.3's SHOW FUNCTIONS that SQL can call but sqlstream does not run, with why;
# the binder names the reason instead of calling them unknown (the README lists them too)
NOT_SUPPORTED: dict[str, str] = {
    "TYPEOF": "sqlstream's types carry neither NOT NULL nor CHAR/VARCHAR lengths, which TYPEOF prints "
              "(TYPEOF('a') is 'CHAR(1) NOT NULL' in Flink)",
    "PARSE_JSON": "the VARIANT type is not supported",
    "TRY_PARSE_JSON": "the VARIANT type is not supported",
    "OBJECT_OF": "structured types (STRUCTURED<'class', ...>) are not supported",
    "OBJECT_UPDATE": "structured types (STRUCTURED<'class', ...>) are not supported",
    "ML_PREDICT": "models (CREATE MODEL) are not supported",
    "FROM_CHANGELOG": "process table functions are not supported",
    "TO_CHANGELOG": "process table functions are not supported",
    "SOURCE_WATERMARK": "no sqlstream source emits watermarks of its own; declare WATERMARK FOR ts AS <expression>",
    **{name: _INTERNAL_JSON for name in ("JSON_ARRAYAGG_ABSENT_ON_NULL", "JSON_ARRAYAGG_NULL_ON_NULL",
                                         "JSON_OBJECTAGG_ABSENT_ON_NULL", "JSON_OBJECTAGG_NULL_ON_NULL")},
    **{f"BITMAP_{name}": _BITMAP for name in (
        "AND", "ANDNOT", "BUILD", "CARDINALITY", "FROM_BYTES", "OR", "TO_ARRAY", "TO_BYTES", "TO_STRING", "XOR",
        "AND_AGG", "AND_CARDINALITY_AGG", "BUILD_AGG", "BUILD_CARDINALITY_AGG", "OR_AGG", "OR_CARDINALITY_AGG",
        "XOR_AGG", "XOR_CARDINALITY_AGG")},
}


# ---------------------------------------------------------------- type rules

_INT_RANK = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]


_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both sides are cast to for comparison/arithmetic/COALESCE; None if incompatible."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if is_numeric(a) and is_numeric(b):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        if pa.types.is_decimal(a) or pa.types.is_decimal(b):
            # an integer type as the DECIMAL that holds it (Flink: TINYINT 3, SMALLINT 5, INT 10, BIGINT 19 digits)
            da = a if pa.types.is_decimal(a) else pa.decimal128(_INT_DIGITS[a.bit_width], 0)
            db = b if pa.types.is_decimal(b) else pa.decimal128(_INT_DIGITS[b.bit_width], 0)
            scale = max(da.scale, db.scale)
            integral = max(da.precision - da.scale, db.precision - db.scale)
            return pa.decimal128(min(integral + scale, 38), scale)
        return _INT_RANK[max(_INT_RANK.index(a), _INT_RANK.index(b))]
    if is_string(a) and is_string(b):
        return pa.string()
    # a string literal compared with a temporal value is read as that type
    if is_string(a) and is_temporal(b):
        return b
    if is_temporal(a) and is_string(b):
        return a
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return a if ["s", "ms", "us", "ns"].index(a.unit) >= ["s", "ms", "us", "ns"].index(b.unit) else b
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    return _common_nested(a, b)


def _common_nested(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """ARRAY, MAP and ROW types combine element by element; ROWs field by field by position, under
    the first one's names (ROW(...) has fields EXPR$0, ...)."""
    if pa.types.is_list(a) and pa.types.is_list(b):
        element = common_type(a.value_type, b.value_type)
        return None if element is None else pa.list_(element)
    if pa.types.is_map(a) and pa.types.is_map(b):
        key, item = common_type(a.key_type, b.key_type), common_type(a.item_type, b.item_type)
        return None if key is None or item is None else pa.map_(key, item)
    if pa.types.is_struct(a) and pa.types.is_struct(b) and a.num_fields == b.num_fields:
        fields = [common_type(f.type, g.type) for f, g in zip(a, b, strict=True)]
        if any(f is None for f in fields):
            return None
        return pa.struct([pa.field(f.name, t) for f, t in zip(a, fields, strict=True)])
    return None


def _names(types: list[pa.DataType]) -> str:
    return ", ".join(sql_type_name(t) for t in types)


def _common_of(types: list[pa.DataType], what: str) -> pa.DataType:
    out = types[0]
    for t in types[1:]:
        c = common_type(out, t)
        if c is None:
            raise ArgumentTypeError(f"{what} cannot combine {_names(types)}")
        out = c
    return out


def _numeric_result(op: str) -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        a, b = types
        # DATE/TIMESTAMP +/- an interval keeps the DATE/TIMESTAMP type, as in Flink
        if op == "+" and _is_interval(a) and _is_datetime(b):
            a, b = b, a
        if _is_datetime(a) and _is_interval(b):
            return a
        if is_month_interval(a) or is_month_interval(b):
            raise ArgumentTypeError(f"cannot apply '{op}' to {_names(types)}")
        return arithmetic.result_type(op, a, b)

    return infer


def _boolean(types: list[pa.DataType]) -> pa.DataType:
    for t in types:
        if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
            raise ArgumentTypeError(f"expected BOOLEAN operands, got {_names(types)}")
    return pa.bool_()


def _is_nested(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t)


def _equality(types: list[pa.DataType]) -> pa.DataType:
    """= and <>: nested values of one type compare by value (collections.nested_equal)."""
    if any(_is_nested(t) for t in types):
        _common_of(types, "comparison")
        return pa.bool_()
    return _comparison(types)


def _comparison(types: list[pa.DataType]) -> pa.DataType:
    if any(_is_nested(t) for t in types):
        # no order is defined on them; refused rather than failing per batch
        raise ArgumentTypeError(f"ARRAY, MAP and ROW values only compare with = and <>: {_names(types)}")
    if any(is_month_interval(t) for t in types):
        # Arrow has no ordering of month_day_nano values; refused rather than failing per batch
        raise ArgumentTypeError(f"comparing INTERVAL MONTH values is not supported: {_names(types)}")
    _common_of(types, "comparison")
    return pa.bool_()


def _returns(t: pa.DataType, check: Callable[[pa.DataType], bool] | None = None, what: str = "") -> Infer:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        if check is not None:
            for a in types:
                if not (check(a) or pa.types.is_null(a)):
                    raise ArgumentTypeError(f"expected {what} arguments, got {_names(types)}")
        return t

    return infer


def _same_as_first(types: list[pa.DataType]) -> pa.DataType:
    return types[0]


def _common(types: list[pa.DataType]) -> pa.DataType:
    return _common_of(types, "arguments")


def _is_interval(t: pa.DataType) -> bool:
    return pa.types.is_duration(t) or is_month_interval(t)


def _is_datetime(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def _temporal(a: Value, b: Value) -> bool:
    return _is_interval(a.type) or _is_interval(b.type)


def _add(a: Value, b: Value) -> Value:
    if not _temporal(a, b):
        return arithmetic.evaluate("+", a, b)
    if pa.types.is_duration(a.type) and pa.types.is_duration(b.type):
        return pc.add_checked(a, b)
    return temporal.shift_by_interval("+", a, b)


def _subtract(a: Value, b: Value) -> Value:
    if not _temporal(a, b):
        return arithmetic.evaluate("-", a, b)
    if pa.types.is_duration(a.type) and pa.types.is_duration(b.type):
        return pc.subtract_checked(a, b)
    return temporal.shift_by_interval("-", a, b)


def _arithmetic(op: str) -> Kernel:
    def kernel(a: Value, b: Value) -> Value:
        return arithmetic.evaluate(op, a, b)

    return kernel


def _concat(*args: Value) -> Value:
    return pc.binary_join_element_wise(*[pc.cast(a, pa.string()) for a in args], "")


def _escape_char(escape: Value | None, what: str) -> str | None:
    if escape is None:
        return None
    if not isinstance(escape, pa.Scalar):
        raise ArgumentTypeError(f"{what} ESCAPE must be a constant")
    char = escape.as_py()
    if char is None or len(char) != 1:
        raise ArgumentTypeError(f"{what} ESCAPE must be one character, got {char!r}")
    return char


def _like_pattern(pattern: str, escape: str | None) -> str:
    """A Flink LIKE pattern in Arrow's spelling, where backslash escapes: Flink has no escape
    character unless ESCAPE names one, so a backslash of the pattern is a literal character."""
    out: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if escape is not None and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise ArgumentTypeError(f"LIKE pattern '{pattern}' ends with its escape character")
            out.append("\\" + nxt)
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(c)
    return "".join(out)


def _like(s: Value, pattern: Value, escape: Value | None = None) -> Value:
    if not isinstance(pattern, pa.Scalar):
        raise ArgumentTypeError("LIKE pattern must be a constant")
    if not pattern.is_valid:
        return pa.scalar(None, pa.bool_())
    return pc.match_like(s, _like_pattern(pattern.as_py(), _escape_char(escape, "LIKE")))


def _similar_regex(pattern: str, escape: str | None) -> str:
    """SIMILAR TO's pattern as a regular expression, as Calcite translates it for Flink: '%' and
    '_' are '.*' and '.', the escape character quotes the next one, the rest is regex syntax."""
    out: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if escape is not None and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise ArgumentTypeError(f"SIMILAR TO pattern '{pattern}' ends with its escape character")
            out.append(re.escape(nxt))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(c)
    return "^(?:" + "".join(out) + ")$"


def _similar(s: Value, pattern: Value, escape: Value | None = None) -> Value:
    if not isinstance(pattern, pa.Scalar):
        raise ArgumentTypeError("SIMILAR TO pattern must be a constant")
    if not pattern.is_valid:
        return pa.scalar(None, pa.bool_())
    regex = _similar_regex(pattern.as_py(), _escape_char(escape, "SIMILAR TO"))
    return pc.match_substring_regex(s, regex)


def _substring(s: Value, start: Value, length: Value | None = None) -> Value:
    """SUBSTRING as Flink's BinaryStringDataUtil.substringSQL: a start > 0 counts from 1, a start
    < 0 from the end (-3 is the third last character), 0 is the first character; a start before
    the beginning or past the end gives '', a negative length gives NULL."""
    if any(isinstance(a, pa.Scalar) and not a.is_valid for a in (s, start, length) if a is not None):
        return pa.scalar(None, pa.string())
    if isinstance(start, pa.Scalar) and (length is None or isinstance(length, pa.Scalar)):
        return _substring_constant(s, start.as_py(), None if length is None else length.as_py())
    return _substring_rows(s, start, length)


def _substring_constant(s: Value, pos: int, length: int | None) -> Value:
    if length is not None and length < 0:
        return pa.scalar(None, pa.string()) if isinstance(s, pa.Scalar) else pa.nulls(len(s), pa.string())
    if pos >= 0:
        begin = max(pos - 1, 0)
        return pc.utf8_slice_codeunits(s, begin, _NO_END if length is None else begin + length)
    # from the end: Arrow clamps a start before the beginning to 0, where Flink returns ''
    stop = _NO_END if length is None or pos + length >= 0 else pos + length
    sliced = pc.utf8_slice_codeunits(s, pos, stop)
    before_start = pc.less(pc.add(pc.utf8_length(s), pos), 0)
    return pc.if_else(before_start, "", sliced)


_NO_END = 2**62  # Arrow's slice needs a stop; past every string's end


def _substring_rows(s: Value, start: Value, length: Value | None) -> Value:
    """SUBSTRING whose start or length varies per row (Arrow's slice takes constants only): the
    characters' byte positions from the UTF-8 bytes with numpy, then one gather of the bytes."""
    rows = len(start) if not isinstance(start, pa.Scalar) else len(length)  # type: ignore[arg-type]
    if rows == 0:
        return pa.array([], pa.string())
    strs = _rows(s, rows, pa.string())
    if not pa.types.is_string(strs.type):
        strs = strs.cast(pa.string())
    pos, pos_valid = _int_rows(start, rows)
    valid = np.logical_and(strs.is_valid().to_numpy(zero_copy_only=False), pos_valid)
    offsets = np.frombuffer(strs.buffers()[1], np.int32)[strs.offset : strs.offset + rows + 1].astype(np.int64)
    data_buf = strs.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lo, hi = int(offsets[0]), int(offsets[-1])
    char_at: np.ndarray | None = None  # None: one byte a character (ASCII)
    first_char = offsets
    if pc.all(pc.string_is_ascii(strs)).as_py() is False:
        # byte position of every character of the rows, then the end as a last "character"
        char_at = np.flatnonzero(np.append((data[lo:hi] & 0xC0) != 0x80, True)) + lo
        first_char = np.searchsorted(char_at, offsets)  # per row boundary: index of its first character
    chars = first_char[1:] - first_char[:-1]
    begin = np.where(pos > 0, pos - 1, np.where(pos < 0, chars + pos, 0))
    empty = (begin < 0) | (begin >= chars)
    begin = np.where(empty, 0, begin)
    end = chars
    if length is not None:
        n, n_valid = _int_rows(length, rows)
        valid &= n_valid & (n >= 0)
        end = np.minimum(begin + np.maximum(n, 0), chars)
    end = np.where(empty, 0, end)
    byte_begin, byte_end = first_char[:-1] + begin, first_char[:-1] + end
    if char_at is not None:
        byte_begin, byte_end = char_at[byte_begin], char_at[byte_end]
    sizes = np.where(valid, byte_end - byte_begin, 0)
    new_offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    gather = np.repeat(byte_begin - new_offsets[:-1], sizes) + np.arange(new_offsets[-1])
    out = pa.Array.from_buffers(
        pa.large_string(), rows, [None, pa.py_buffer(new_offsets), pa.py_buffer(data[gather])]
    ).cast(pa.string())
    return pc.if_else(pa.array(valid), out, pa.scalar(None, pa.string()))


def _rows(value: Value, rows: int, type_: pa.DataType) -> pa.Array:
    """An argument as one array of ``rows`` values (a constant repeated)."""
    if isinstance(value, pa.Scalar):
        return pa.repeat(value if value.is_valid else pa.scalar(None, type_), rows)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value


def _int_rows(value: Value, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """An integer argument as int64 values (0 where NULL) and its validity, both numpy."""
    arr = _rows(value, rows, pa.int64()).cast(pa.int64())
    return pc.fill_null(arr, 0).to_numpy(), arr.is_valid().to_numpy(zero_copy_only=False)


def _coalesce(*args: Value) -> Value:
    return pc.coalesce(*args)


def _is_in(value: Value, *options: Value) -> Value:
    if not all(isinstance(o, pa.Scalar) for o in options):
        # non-constant IN list: OR of equalities
        out = pc.equal(value, options[0])
        for o in options[1:]:
            out = pc.or_kleene(out, pc.equal(value, o))
        return out
    values = pa.array([o.as_py() for o in options], value.type)
    result = pc.is_in(value, value_set=values, skip_nulls=True)
    # SQL: x IN (...) is NULL when x is NULL, and when x matches nothing but the list holds a NULL
    # (so x NOT IN (1, NULL) is never TRUE)
    unknown = pc.is_null(value)
    if values.null_count:
        unknown = pc.or_(unknown, pc.invert(result))
    return pc.if_else(unknown, pa.scalar(None, pa.bool_()), result)


register("+", _numeric_result("+"), _add, 2, coerce_args=False)
register("-", _numeric_result("-"), _subtract, 2)
register("*", _numeric_result("*"), _arithmetic("*"), 2)
register("/", _numeric_result("/"), _arithmetic("/"), 2)
register("%", _numeric_result("%"), _arithmetic("%"), 2, aliases=("MOD",))
register("NEGATE", _same_as_first, pc.negate, 1)  # wraps as Java: -MIN_VALUE is MIN_VALUE
def _equal(a: Value, b: Value) -> Value:
    if _is_nested(a.type):
        return collections.nested_equal(a, b)
    return pc.equal(a, b)


def _not_equal(a: Value, b: Value) -> Value:
    if _is_nested(a.type):
        return pc.invert(collections.nested_equal(a, b))
    return pc.not_equal(a, b)


register("=", _equality, _equal, 2, coerce_args=True)
register("<>", _equality, _not_equal, 2, coerce_args=True)
register("<", _comparison, pc.less, 2, coerce_args=True)
register("<=", _comparison, pc.less_equal, 2, coerce_args=True)
register(">", _comparison, pc.greater, 2, coerce_args=True)
register(">=", _comparison, pc.greater_equal, 2, coerce_args=True)
register("AND", _boolean, pc.and_kleene, 2)
register("OR", _boolean, pc.or_kleene, 2)
register("NOT", _boolean, pc.invert, 1)
register("IS_NULL", _returns(pa.bool_()), pc.is_null, 1)
register("IS_NOT_NULL", _returns(pa.bool_()), pc.is_valid, 1)
register("IN", _comparison, _is_in, 2, None, coerce_args=True)
register("LIKE", _returns(pa.bool_(), is_string, "STRING"), _like, 2, 3)
register("SIMILAR", _returns(pa.bool_(), is_string, "STRING"), _similar, 2, 3)
register("CONCAT", _returns(pa.string()), _concat, 1, None, aliases=("||",))
def _upper(s: Value) -> Value:
    """Java's toUpperCase: Arrow maps characters one to one, Java turns 'ß' into 'SS'."""
    return pc.utf8_upper(pc.replace_substring(s, pattern="ß", replacement="SS"))


register("UPPER", _returns(pa.string(), is_string, "STRING"), _upper, 1)
register("LOWER", _returns(pa.string(), is_string, "STRING"), pc.utf8_lower, 1)
register("SUBSTRING", _returns(pa.string()), _substring, 2, 3, aliases=("SUBSTR",))
register("CHAR_LENGTH", _returns(pa.int32(), is_string, "STRING"), lambda s: pc.cast(pc.utf8_length(s), pa.int32()), 1, aliases=("CHARACTER_LENGTH",))
register("COALESCE", _common, _coalesce, 1, None, coerce_args=True)

# The Flink built-in function library registers itself into REGISTRY; imported
# last because those modules import the helpers above.
from sqlstream.core.functions import (  # noqa: E402, F401
    arithmetic,
    collections,
    encodings,
    formatting,
    json,
    numeric,
    randomness,
    strings,
    temporal,
    text,
)
