"""Flink's JSON functions: JSON_VALUE, JSON_QUERY, JSON_EXISTS, IS JSON, JSON_STRING, JSON_QUOTE,
JSON_UNQUOTE, JSON_OBJECT and JSON_ARRAY (with JSON(text) values), and the texts the JSON_ARRAYAGG
and JSON_OBJECTAGG aggregates (runtime.aggregates) collect, with Flink 2.3's results (pinned
against Flink by the reference group ``json``).

Flink runs them on Jackson and Jayway JsonPath (``SqlJsonUtils``); this module reproduces what
they do with the Python standard library:

* parsing is Jackson's ``ObjectReader.readValue``: the first JSON value of the text counts and
  anything after it is ignored (``'{"a":1} x'`` is JSON), except that a number or a literal at the
  top level must be followed by a separator (``'1x'`` and ``'truex'`` are not JSON); numbers with a
  fraction or an exponent are read as BigDecimals (``1.50`` stays ``1.50``, ``1e2`` is ``1E+2``);
* paths are Jayway's, in SQL/JSON's ``lax``/``strict`` mode (strict when omitted): ``$``,
  ``.name``, ``['name']``, ``.*``/``[*]``, ``[i]`` (negative from the end), ``[i, j]`` and slices
  ``[a:b]``. Deep scans (``..``), filters (``[?(...)]``), functions (``.length()``) and several
  names in one bracket are Jayway's too but are refused here, naming the construct;
* JSON text is written as Jackson writes it: object keys sorted (Flink's mapper sets
  ORDER_MAP_ENTRIES_BY_KEYS) by UTF-16 code units, no spaces, control characters as ``\\u00XX`` in
  upper case, every other character as it is.

Arrow has no JSON path kernel, so the functions run in Python once per distinct JSON text of a
batch (the column is dictionary-encoded and each distinct document parsed once), then the results
are spread back over the rows with Arrow's ``take``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import DataError
from sqlstream.core.functions import ArgumentTypeError, Value, register
from sqlstream.core.types import is_ltz, is_string, sql_type_name

# ------------------------------------------------------------------ parsing (Jackson)


class _Invalid:
    """A text that is not JSON, with Jackson's reason."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _no_constants(name: str) -> Any:
    raise ValueError(f"Non-standard token '{name}'")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constants, strict=True)
_WHITESPACE = " \t\r\n"


def parse(text: str) -> Any:
    """The JSON value of ``text`` as Jackson reads it (dicts keep their keys' order, numbers with
    a fraction or an exponent are Decimals), or an :class:`_Invalid`."""
    start = 0
    while start < len(text) and text[start] in _WHITESPACE:
        start += 1
    if start == len(text):
        return _Invalid("No content to map due to end-of-input")
    try:
        value, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as e:
        return _Invalid(str(e).split(":")[0])
    following = text[end] if end < len(text) else ""
    if following and (isinstance(value, int | Decimal) and not isinstance(value, bool)):
        if following not in _WHITESPACE:  # Jackson: a root-level number ends at a separator
            return _Invalid(f"Unexpected character ('{following}'): Expected space separating root-level values")
    elif following and (value is None or isinstance(value, bool)) and (following.isalnum() or following in "_$"):
        return _Invalid(f"Unrecognized token '{text[start:end]}{following}'")
    return value


# ------------------------------------------------------------------ writing (Jackson)

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def quote(text: str) -> str:
    """A JSON string literal as Jackson writes it."""
    return '"' + _TO_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04X}"), text) + '"'


def _utf16(key: str) -> bytes:
    """Java's String order (UTF-16 code units), which Jackson sorts keys by."""
    return key.encode("utf-16-be", "surrogatepass")


def decimal_text(d: Decimal) -> str:
    """BigDecimal.toString: scientific notation below 1E-6 or with a positive exponent, no -0."""
    return str(d.copy_abs() if d.is_zero() else d)


def dumps(value: Any) -> str:
    """JSON text of a parsed value, as Flink's mapper writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return decimal_text(value)
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(quote(k) + ":" + dumps(value[k]) for k in sorted(value, key=_utf16)) + "}"
    raise TypeError(type(value))


def _java_double(d: float, shortest: str | None = None) -> str:
    """Double.toString (Float.toString with ``shortest``, the float's own shortest digits): plain
    between 1E-3 and 1E7, else d.dddE<n>; always a fractional digit."""
    _, digits, exponent = Decimal(shortest or repr(abs(d))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    sign = "-" if d < 0 else ""
    if 1e-3 <= abs(d) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{text}"
        whole, fraction = text[:point].ljust(point, "0"), text[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{point - 1}"


def double_text(d: float) -> str:
    """A DOUBLE (or FLOAT, widened) in JSON as Flink writes it: Double.toString read as a
    BigDecimal and written back (1.0E+7, 0.00010), NaN and the infinities as strings."""
    if math.isnan(d):
        return '"NaN"'
    if math.isinf(d):
        return '"Infinity"' if d > 0 else '"-Infinity"'
    if d == 0:
        return "0.0"
    return decimal_text(Decimal(_java_double(d)))


def java_string(value: Any, t: pa.DataType) -> str:
    """String.valueOf of a SQL value as Flink holds it (a DEFAULT of JSON_VALUE ... RETURNING STRING)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return _java_double(value, str(abs(np.float32(value))) if t == pa.float32() else None)
    if isinstance(value, Decimal):
        return format(value, "f")  # DecimalData.toString is the plain form
    return str(value)


# ------------------------------------------------------------------ paths (Jayway)


class PathSyntaxError(Exception):
    """A path Jayway cannot compile; ``position`` is the offending character's offset in the path."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class PathUnsupported(PathSyntaxError):
    """A path construct Jayway has but sqlstream does not evaluate."""


@dataclass(frozen=True)
class Step:
    kind: str  # "property" | "wildcard" | "index" | "slice"
    name: str = ""
    indexes: tuple[int, ...] = ()
    start: int | None = None
    stop: int | None = None

    def text(self) -> str:
        if self.kind == "property":
            return f"['{self.name}']"
        if self.kind == "wildcard":
            return "[*]"
        if self.kind == "index":
            return "[" + ",".join(map(str, self.indexes)) + "]"
        return f"[{'' if self.start is None else self.start}:{'' if self.stop is None else self.stop}]"


@dataclass(frozen=True)
class JsonPath:
    spec: str
    lax: bool
    steps: tuple[Step, ...]
    definite: bool  # every step selects at most one value: the result is that value, not a list


_MODE = re.compile(r"^\s*(strict|lax)\s+(.+)$", re.IGNORECASE | re.DOTALL)
_NAME_END = ".[](){}'\" \t\r\n"
_INDEX = re.compile(r"^\s*-?\d+\s*$")


def compile_path(spec: str) -> JsonPath:
    """The path of a JSON function, its mode prefix read as Flink reads it; raises
    :class:`PathSyntaxError` (:class:`PathUnsupported`) with the offset into ``spec``."""
    m = _MODE.match(spec)
    lax, body, offset = False, spec, 0
    if m:
        lax, body, offset = m.group(1).lower() == "lax", m.group(2), m.start(2)
    if not body.startswith("$"):
        if body.startswith("@"):
            raise PathUnsupported("a path starting at '@' (the filter's current item)", offset)
        if body[:1].isspace() or not body:
            raise PathSyntaxError("a path starts with '$'", offset)
        body, offset = "$." + body, offset - 2  # Jayway reads 'a.b' as '$.a.b'
    steps: list[Step] = []
    i = 1
    while i < len(body):
        c = body[i]
        if c == ".":
            if body.startswith("..", i):
                raise PathUnsupported("the deep scan '..'", offset + i)
            i += 1
            if i < len(body) and body[i] == "*":
                steps.append(Step("wildcard"))
                i += 1
                continue
            j = i
            while j < len(body) and body[j] not in _NAME_END:
                j += 1
            if j == i:
                raise PathSyntaxError("a property name is missing after '.'", offset + i)
            if j < len(body) and body[j] == "(":
                raise PathUnsupported(f"the path function '{body[i:j]}()'", offset + i)
            if j < len(body) and body[j] not in ".[":
                raise PathSyntaxError(f"unexpected '{body[j]}'", offset + j)
            steps.append(Step("property", body[i:j]))
            i = j
        elif c == "[":
            close, step = _bracket(body, i, offset)
            steps.append(step)
            i = close + 1
        else:
            raise PathSyntaxError(f"unexpected '{c}' (a step starts with '.' or '[')", offset + i)
    definite = all(s.kind == "property" or (s.kind == "index" and len(s.indexes) == 1) for s in steps)
    return JsonPath(spec, lax, tuple(steps), definite)


def _bracket(body: str, i: int, offset: int) -> tuple[int, Step]:
    """The step of the bracket opening at ``i``, and the offset of its ']'."""
    j = i + 1
    if j < len(body) and body[j] in "'\"":
        q = body[j]
        end = body.find(q, j + 1)
        if end < 0:
            raise PathSyntaxError(f"the quoted property name has no closing {q}", offset + j)
        name = body[j + 1 : end]
        k = end + 1
        while k < len(body) and body[k] == " ":
            k += 1
        if k < len(body) and body[k] == ",":
            raise PathUnsupported("several property names in one bracket", offset + k)
        if k >= len(body) or body[k] != "]":
            raise PathSyntaxError("expected ']' after the quoted property name", offset + k)
        return k, Step("property", name)
    close = body.find("]", j)
    if close < 0:
        raise PathSyntaxError("'[' has no closing ']'", offset + i)
    inner = body[j:close]
    if inner.strip() == "*":
        return close, Step("wildcard")
    if inner.startswith("?"):
        raise PathUnsupported("the filter '[?(...)]'", offset + j)
    if ":" in inner:
        parts = inner.split(":")
        if len(parts) != 2 or any(p.strip() and not _INDEX.match(p) for p in parts):
            raise PathSyntaxError(f"'[{inner}]' is not a slice [from:to]", offset + j)
        start, stop = (int(p) if p.strip() else None for p in parts)
        if start is None and stop is None:
            raise PathSyntaxError("a slice needs a bound", offset + j)
        return close, Step("slice", start=start, stop=stop)
    items = inner.split(",")
    if not all(_INDEX.match(p) for p in items):
        raise PathSyntaxError(f"'[{inner}]' is not an array index", offset + j)
    return close, Step("index", indexes=tuple(int(p) for p in items))


class _PathNotFound(Exception):
    """Jayway's PathNotFoundException (strict mode only)."""


def _java_class(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "java.lang.Boolean", int: "java.lang.Integer", str: "java.lang.String", list: "java.util.ArrayList",
            dict: "java.util.LinkedHashMap", Decimal: "java.math.BigDecimal"}.get(type(value), type(value).__name__)


def java_text(value: Any) -> str:
    """Object.toString of a parsed value (Flink's error messages quote values so)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return decimal_text(value)
    return "null" if value is None else str(value)


def _slice_indexes(step: Step, length: int) -> Iterable[int]:
    """Jayway's ArraySliceToken: [a:] and [:b] count negative bounds from the end, [a:b] does not."""
    if step.stop is None:
        start = step.start if step.start is None or step.start >= 0 else length + step.start
        return range(max(0, start or 0), length) if length else ()
    if step.start is None:
        stop = step.stop if step.stop >= 0 else length + step.stop
        return range(min(length, stop)) if length else ()
    stop = min(length, step.stop)
    return range(step.start, stop) if step.start < stop and length else ()


def _where(steps: tuple[Step, ...], count: int) -> str:
    """Jayway's text of the path's first ``count`` steps (for its error messages)."""
    return "$" + "".join(s.text() for s in steps[:count])


def _not_an_object(steps: tuple[Step, ...], i: int, model: Any) -> _PathNotFound:
    return _PathNotFound(f"Expected to find an object with property ['{steps[i].name}'] in path {_where(steps, i)} but "
                         f"found '{_java_class(model)}'. This is not a json object according to the JsonProvider")


def _not_an_array(steps: tuple[Step, ...], i: int, model: Any) -> _PathNotFound:
    if model is None:
        return _PathNotFound(f"The path {_where(steps, i)} is null")
    return _PathNotFound(f"Filter: {steps[i].text()} can only be applied to arrays. Current context is: "
                         f"{java_text(model)}")


def _read_definite(steps: tuple[Step, ...], model: Any, lax: bool) -> tuple[bool, Any]:
    """(found, value) of a definite path: Jayway's rules for one value at each step, where strict
    mode raises on a step that cannot apply (an absent leaf is just not found)."""
    last = len(steps) - 1
    for i, step in enumerate(steps):
        if step.kind == "property":
            if not isinstance(model, dict):
                if lax:
                    return False, None
                raise _not_an_object(steps, i, model)
            if step.name not in model:
                if i == last or lax:
                    return False, None
                raise _PathNotFound(f"Missing property in path {_where(steps, i + 1)}")
            model = model[step.name]
        else:
            if not isinstance(model, list):
                if lax:
                    return False, None
                raise _not_an_array(steps, i, model)
            index = step.indexes[0]
            effective = index + len(model) if index < 0 else index
            if not 0 <= effective < len(model):  # Jayway skips an index out of bounds
                return False, None
            model = model[effective]
    return True, model


def _walk(steps: tuple[Step, ...], i: int, model: Any, definite: bool, lax: bool, out: list[Any]) -> None:
    """Jayway's evaluation of an indefinite path: every value it reaches, in document order. A step
    that cannot apply raises only in strict mode and only while every step before it was definite."""
    if i == len(steps):
        out.append(model)
        return
    step = steps[i]
    if step.kind == "property":
        if not isinstance(model, dict):
            if definite and not lax:
                raise _not_an_object(steps, i, model)
            return
        if step.name not in model:
            if i < len(steps) - 1 and definite and not lax:
                raise _PathNotFound(f"Missing property in path {_where(steps, i + 1)}")
            return
        _walk(steps, i + 1, model[step.name], definite, lax, out)
    elif step.kind == "wildcard":
        children = model.values() if isinstance(model, dict) else model if isinstance(model, list) else ()
        for child in children:
            _walk(steps, i + 1, child, False, lax, out)
    else:
        if not isinstance(model, list):
            if definite and not lax:
                raise _not_an_array(steps, i, model)
            return
        single = step.kind == "index" and len(step.indexes) == 1
        indexes = step.indexes if step.kind == "index" else _slice_indexes(step, len(model))
        for index in indexes:
            effective = index + len(model) if index < 0 else index
            if 0 <= effective < len(model):  # Jayway skips an index out of bounds
                _walk(steps, i + 1, model[effective], definite and single, lax, out)


class _Failure(Exception):
    """The exception a JSON function's ON ERROR clause sees."""


def read(document: Any, path: JsonPath) -> Any:
    """What JsonApiCommonSyntax gives: the value at the path (a list for an indefinite path, None for
    nothing in lax mode), raising :class:`_Failure` where strict mode (or either mode) fails."""
    if isinstance(document, _Invalid):
        if path.lax:
            return None
        raise _Failure(document.reason)
    if document is None:
        raise _Failure("json object can not be null")
    try:
        if path.definite:
            found, value = _read_definite(path.steps, document, path.lax)
        else:
            out: list[Any] = []
            _walk(path.steps, 0, document, True, path.lax, out)
            return out
    except _PathNotFound as e:
        raise _Failure(str(e)) from None
    if not found:
        if path.lax:
            return None
        raise _Failure("No results for path: " + _where(path.steps, len(path.steps)))
    if value is None and not path.lax:
        raise _Failure("Strict jsonpath mode requires a non empty returned value, but is null")
    return value


# ------------------------------------------------------------------ per distinct value evaluation


def _distinct(values: Value) -> tuple[list[Any], pa.Array | None]:
    """(the distinct values as Python objects, each row's index into them) of a column; a scalar
    is its single value with no indexes."""
    if isinstance(values, pa.Scalar):
        return [values.as_py()], None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return encoded.dictionary.to_pylist(), encoded.indices


def _spread(results: list[Any], indexes: pa.Array | None, t: pa.DataType) -> Value:
    if indexes is None:
        return pa.scalar(results[0], t)
    return pa.array(results, t).take(indexes)


def _per_document(json_values: Value, path: Value, fn: Callable[[Any, JsonPath | None], Any],
                  runtime_path: Callable[[str], JsonPath | None]) -> tuple[list[Any], pa.Array | None]:
    """``fn(document, path)`` once per distinct (JSON text, path) of the rows: (the results, each
    row's index into them; None for a call on constants). A NULL text or path gives None without
    calling ``fn``."""
    if isinstance(path, pa.Scalar):
        if not path.is_valid:
            if isinstance(json_values, pa.Scalar):
                return [None], None
            return [None], pa.array(np.zeros(len(json_values), dtype=np.int32))
        compiled = runtime_path(path.as_py())
        texts, indexes = _distinct(json_values)
        return [None if s is None else fn(parse(s), compiled) for s in texts], indexes
    rows = len(path)
    texts = [json_values.as_py()] * rows if isinstance(json_values, pa.Scalar) else json_values.to_pylist()
    cache: dict[tuple[str, str], Any] = {}
    parsed: dict[str, Any] = {}
    out = []
    for text, spec in zip(texts, path.to_pylist(), strict=True):
        if text is None or spec is None:
            out.append(None)
            continue
        if (text, spec) not in cache:
            if text not in parsed:
                parsed[text] = parse(text)
            cache[(text, spec)] = fn(parsed[text], runtime_path(spec))
        out.append(cache[(text, spec)])
    return out, pa.array(np.arange(rows, dtype=np.int32))


def _runtime_path(spec: str) -> JsonPath | None:
    """A path that arrives as data: one Jayway rejects is an error of the function (None: its ON
    ERROR clause applies, as Flink's 'Illegal jsonpath spec'); one it has but sqlstream does not
    evaluate fails the job, naming the construct."""
    try:
        return compile_path(spec)
    except PathUnsupported as e:
        raise DataError(f"JSON path '{spec}': {e} is not supported") from None
    except PathSyntaxError:
        return None


def _context(document: Any, path: JsonPath | None) -> Any:
    if path is None:
        raise _Failure("Illegal jsonpath spec, format of the spec should be: '<lax|strict> $'{'expr'}''")
    return read(document, path)


# ------------------------------------------------------------------ JSON_VALUE

RETURNING = {"STRING": pa.string(), "BOOLEAN": pa.bool_(), "INT": pa.int32(), "DOUBLE": pa.float64()}
_USE_DEFAULT_EMPTY = object()
_USE_DEFAULT_ERROR = object()


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def _java_cast(raw: Any, returning: str) -> Any:
    """Flink's cast of the JSON value to the RETURNING type: a Java cast of Jackson's object, so an
    INT takes only a JSON integer in int range, a DOUBLE only a number with a fraction or an
    exponent (a BigDecimal), a BOOLEAN only true/false; anything else fails the job."""
    if returning == "STRING":
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return decimal_text(raw) if isinstance(raw, Decimal) else str(raw)
    ok = {"INT": lambda v: isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31,
          "DOUBLE": lambda v: isinstance(v, Decimal), "BOOLEAN": lambda v: isinstance(v, bool)}[returning]
    if not ok(raw):
        raise DataError(f"JSON_VALUE ... RETURNING {returning}: the JSON value {dumps(raw)} is a "
                        f"{_java_class(raw)}, which Flink cannot cast to {returning}")
    return float(raw) if returning == "DOUBLE" else raw


def _json_value(returning: str, empty: str, error: str) -> Callable[[Any, JsonPath | None], Any]:
    def evaluate(document: Any, path: JsonPath | None) -> Any:
        try:
            value = _context(document, path)
        except _Failure as e:
            return _on_error(error, str(e))
        assert path is not None
        if value is None or (path.lax and not _scalar(value)):
            if empty == "ERROR":
                raise DataError("Empty result of JSON_VALUE function is not allowed")
            return _USE_DEFAULT_EMPTY if empty == "DEFAULT" else None
        if not _scalar(value):
            return _on_error(error, f"Strict jsonpath mode requires scalar value, and the actual value is: "
                                    f"'{java_text(value)}'")
        return _java_cast(value, returning)

    return evaluate


def _on_error(error: str, reason: str) -> Any:
    if error == "ERROR":
        raise DataError(reason)
    return _USE_DEFAULT_ERROR if error == "DEFAULT" else None


def _default_value(default: Value, t: pa.DataType, returning: str) -> Value:
    """The DEFAULT as Flink's cast of its Java object to the RETURNING type takes it."""
    if pa.types.is_null(default.type):
        return pa.nulls(len(default), RETURNING[returning]) if isinstance(default, pa.Array) else pa.scalar(None, RETURNING[returning])
    if returning == "STRING":
        if is_string(default.type):
            return default
        if isinstance(default, pa.Scalar):
            return pa.scalar(None if not default.is_valid else java_string(default.as_py(), t), pa.string())
        return pa.array([None if v is None else java_string(v, t) for v in default.to_pylist()], pa.string())
    if (returning == "INT" and t == pa.int32()) or (returning == "BOOLEAN" and pa.types.is_boolean(t)):
        return default
    raise DataError(f"JSON_VALUE ... RETURNING {returning}: Flink cannot cast the DEFAULT value of type "
                    f"{sql_type_name(t)} to {returning}")


def json_value(json_values: Value, path: Value, returning: Value, empty: Value, empty_default: Value,
               error: Value, error_default: Value) -> Value:
    name = returning.as_py()
    out_type = RETURNING[name]
    evaluate = _json_value(name, empty.as_py(), error.as_py())
    results, indexes = _per_document(json_values, path, evaluate, _runtime_path)
    marks = _spread([_mark(r) for r in results], indexes, pa.int8())
    values = _spread([_plain(r) for r in results], indexes, out_type)
    for code, default in ((1, empty_default), (2, error_default)):
        taken = pc.fill_null(pc.equal(marks, code), False)
        if isinstance(taken, pa.Scalar) and not taken.as_py():
            continue
        if isinstance(taken, pa.Array) and not pc.any(taken).as_py():
            continue
        values = pc.if_else(taken, _default_value(default, default.type, name), values)
    return values


def _mark(result: Any) -> int:
    return 1 if result is _USE_DEFAULT_EMPTY else 2 if result is _USE_DEFAULT_ERROR else 0


def _plain(result: Any) -> Any:
    return None if result is _USE_DEFAULT_EMPTY or result is _USE_DEFAULT_ERROR else result


# ------------------------------------------------------------------ JSON_QUERY, JSON_EXISTS, IS JSON


def _element_text(value: Any) -> str | None:
    """An element of JSON_QUERY ... RETURNING ARRAY<STRING>: a scalar as String.valueOf gives it (a
    string without quotes), an object or array as JSON text."""
    if value is None:
        return None
    if not _scalar(value):
        return dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return decimal_text(value) if isinstance(value, Decimal) else str(value)


def _json_query(returning: str, wrapper: str, empty: str, error: str) -> Callable[[Any, JsonPath | None], Any]:
    def on(behaviour: str, reason: str) -> str | list[Any] | None:
        if behaviour == "ERROR":
            raise DataError(reason)
        if behaviour == "EMPTY OBJECT" and returning == "ARRAY":
            raise DataError("Illegal behavior 'EMPTY_OBJECT' specified in JSON_QUERY function returning an ARRAY")
        return {"NULL": None, "EMPTY ARRAY": [] if returning == "ARRAY" else "[]", "EMPTY OBJECT": "{}"}[behaviour]

    def evaluate(document: Any, path: JsonPath | None) -> str | list[Any] | None:
        try:
            value = _context(document, path)
        except _Failure as e:
            return on(error, str(e))
        assert path is not None
        if value is not None and (wrapper == "UNCONDITIONAL" or (wrapper == "CONDITIONAL" and not isinstance(value, list))):
            value = [value]
        if value is None or (path.lax and _scalar(value)):
            return on(empty, "Empty result of JSON_QUERY function is not allowed")
        if _scalar(value):
            return on(error, f"Strict jsonpath mode requires array or object value, and the actual value is: "
                             f"'{java_text(value)}'")
        if returning == "ARRAY":
            if not isinstance(value, list):  # Flink's cast of an object to a List fails
                return on(error, f"{_java_class(value)} cannot be cast to class java.util.List")
            return [_element_text(v) for v in value]
        return dumps(value)

    return evaluate


def json_query(json_values: Value, path: Value, returning: Value, wrapper: Value, empty: Value, error: Value) -> Value:
    """JSON_QUERY: the JSON text at the path (RETURNING STRING) or its elements (RETURNING ARRAY<STRING>)."""
    name = returning.as_py()
    evaluate = _json_query(name, wrapper.as_py(), empty.as_py(), error.as_py())
    out_type = pa.list_(pa.string()) if name == "ARRAY" else pa.string()
    return _spread(*_per_document(json_values, path, evaluate, _runtime_path), out_type)


def json_exists(json_values: Value, path: Value, error: Value) -> Value:
    behaviour = error.as_py()

    def evaluate(document: Any, compiled: JsonPath | None) -> bool | None:
        try:
            return _context(document, compiled) is not None
        except _Failure as e:
            if behaviour == "ERROR":
                raise DataError(str(e)) from None
            return {"TRUE": True, "FALSE": False, "UNKNOWN": None}[behaviour]

    return _spread(*_per_document(json_values, path, evaluate, _runtime_path), pa.bool_())


_KINDS: dict[str, Callable[[Any], bool]] = {
    "VALUE": lambda v: True,
    "OBJECT": lambda v: isinstance(v, dict),
    "ARRAY": lambda v: isinstance(v, list),
    "SCALAR": lambda v: not isinstance(v, dict | list),
}


def is_json(values: Value, kind: Value) -> Value:
    """x IS JSON [VALUE|OBJECT|ARRAY|SCALAR]: FALSE for NULL, never NULL."""
    test = _KINDS[kind.as_py()]
    texts, indexes = _distinct(values)
    results = []
    for text in texts:
        parsed = _Invalid("") if text is None else parse(text)
        results.append(not isinstance(parsed, _Invalid) and test(parsed))
    return _spread(results, indexes, pa.bool_())


# ------------------------------------------------------------------ JSON_STRING, JSON_OBJECT, JSON_ARRAY


_PER_SECOND = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}


def _iso(value: dt.datetime | int, unit: str) -> str:
    """DateTimeFormatter.ISO_LOCAL_DATE_TIME of a wall-clock time (a datetime, or an Arrow timestamp's
    count of ``unit`` past the epoch, which keeps nanoseconds): seconds always, the fraction without
    trailing zeros."""
    if isinstance(value, dt.datetime):
        per, seconds = 10**6, value.replace(tzinfo=None)
        fraction = value.microsecond
        seconds = seconds.replace(microsecond=0)
    else:
        per = _PER_SECOND[unit]
        whole, fraction = divmod(value, per)
        seconds = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=whole)
    text = seconds.strftime("%Y-%m-%dT%H:%M:%S")
    if fraction:
        text += "." + str(fraction).rjust(len(str(per)) - 1, "0").rstrip("0")
    return text


def node(value: Any, t: pa.DataType) -> str:
    """The JSON text of a non-NULL SQL value as Flink's JsonGenerateUtils makes it a node."""
    if is_string(t):
        return quote(value)
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_integer(t):
        return str(value)
    if pa.types.is_floating(t):
        return double_text(float(value))
    if pa.types.is_decimal(t):
        return decimal_text(value)
    if pa.types.is_timestamp(t):
        return quote(_iso(value, t.unit) + ("Z" if is_ltz(t) else ""))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return quote(base64.b64encode(value).decode("ascii"))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "[" + ",".join("null" if v is None else node(v, t.value_type) for v in value) + "]"
    if pa.types.is_struct(t):
        members = {f.name: ("null" if value[f.name] is None else node(value[f.name], f.type)) for f in t}
        return "{" + ",".join(quote(k) + ":" + members[k] for k in sorted(members, key=_utf16)) + "}"
    if pa.types.is_map(t):
        members = {}
        for k, v in value:
            if k is None:
                raise DataError("Key was null. This is not supported during conversion to JSON.")
            members[k] = "null" if v is None else node(v, t.item_type)
        return "{" + ",".join(quote(k) + ":" + members[k] for k in sorted(members, key=_utf16)) + "}"
    raise TypeError(t)


def convertible(t: pa.DataType) -> bool:
    """Whether Flink turns a value of type ``t`` into JSON (DATE, TIME and intervals it refuses)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return convertible(t.value_type)
    if pa.types.is_struct(t):
        return all(convertible(f.type) for f in t)
    if pa.types.is_map(t):
        return is_string(t.key_type) and convertible(t.item_type)
    return (is_string(t) or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t)
            or pa.types.is_decimal(t) or pa.types.is_timestamp(t) or pa.types.is_binary(t)
            or pa.types.is_null(t))


def json_texts(values: Value, raw: bool) -> Value:
    """Each value's JSON text (NULL stays NULL): a JSON_OBJECT/JSON_ARRAY result as it is, strings
    quoted, numbers as Flink writes them. Integers and booleans are converted by Arrow; the other
    types once per distinct value."""
    t = values.type
    if raw:
        return values
    if pa.types.is_null(t):
        return pa.scalar(None, pa.string()) if isinstance(values, pa.Scalar) else pa.nulls(len(values), pa.string())
    if pa.types.is_integer(t):
        return pc.cast(values, pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(values, "true", "false")
    if pa.types.is_timestamp(t):  # as counts past the epoch: Python's datetime has no nanoseconds
        counts = pc.cast(values, pa.int64())
        if isinstance(counts, pa.Scalar):
            return pa.scalar(None if not counts.is_valid else node(counts.as_py(), t), pa.string())
        distinct, indexes = _distinct(counts)
        return _spread([None if v is None else node(v, t) for v in distinct], indexes, pa.string())
    if isinstance(values, pa.Scalar):
        return pa.scalar(None if not values.is_valid else node(values.as_py(), t), pa.string())
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_floating(t) or pa.types.is_decimal(t) or is_string(t):
        distinct, indexes = _distinct(values)
        return _spread([None if v is None else node(v, t) for v in distinct], indexes, pa.string())
    return pa.array([None if v is None else node(v, t) for v in values.to_pylist()], pa.string())


def json_string(values: Value, raw: Value) -> Value:
    return json_texts(values, raw.as_py() == "r")


def _joined(parts: list[Value], separator: str, skip_nulls: bool) -> Value:
    """The parts joined per row (NULL parts left out, or written as null). Each part is prefixed
    with the separator and the first one cut off again: Arrow's join with null_handling='skip'
    drops a row whose parts are all NULL."""
    if not skip_nulls:
        parts = [pc.fill_null(p, "null") for p in parts]
    prefixed = [pc.fill_null(pc.binary_join_element_wise(separator, p, ""), "") for p in parts]
    joined = prefixed[0] if len(prefixed) == 1 else pc.binary_join_element_wise(*prefixed, "")
    return pc.utf8_slice_codeunits(joined, len(separator))


def _wrap(inner: Value, open_: str, close: str, rows: int | None) -> Value:
    out = pc.binary_join_element_wise(open_, inner, close, "")
    if rows is not None and isinstance(out, pa.Scalar):
        out = pa.array([out.as_py()] * rows, pa.string())
    return out


def _rows(args: tuple[Value, ...]) -> int | None:
    return next((len(a) for a in args if not isinstance(a, pa.Scalar)), None)


def json_array(on_null: Value, flags: Value, *elements: Value) -> Value:
    """JSON_ARRAY(v, ... [NULL|ABSENT ON NULL]): ABSENT ON NULL unless NULL ON NULL is given."""
    if not elements:
        return pa.scalar("[]", pa.string())
    texts = [json_texts(e, f == "r") for e, f in zip(elements, flags.as_py(), strict=True)]
    return _wrap(_joined(texts, ",", on_null.as_py() == "ABSENT"), "[", "]", _rows(elements))


def json_object(on_null: Value, flags: Value, *pairs: Value) -> Value:
    """JSON_OBJECT([KEY] k VALUE v, ... [NULL|ABSENT ON NULL]): NULL ON NULL unless ABSENT ON NULL
    is given; keys (constants: Flink refuses a key that may be NULL) sorted, a repeated key's last
    value wins."""
    if not pairs:
        return pa.scalar("{}", pa.string())
    skip = on_null.as_py() == "ABSENT"
    keys, values = pairs[0::2], pairs[1::2]
    texts = [json_texts(v, f == "r") for v, f in zip(values, flags.as_py(), strict=True)]
    if not all(isinstance(k, pa.Scalar) for k in keys):
        raise ArgumentTypeError("JSON_OBJECT's keys must be constants")
    last: dict[str, int] = {}
    for i, k in enumerate(keys):
        if not k.is_valid:
            raise DataError("JSON_OBJECT: a key is NULL")
        last[k.as_py()] = i
    members = []
    for key in sorted(last, key=_utf16):
        text = texts[last[key]]
        members.append(pc.binary_join_element_wise(quote(key) + ":", text if skip else pc.fill_null(text, "null"), ""))
    return _wrap(_joined(members, ",", True), "{", "}", _rows(pairs))


def raw_json(values: Value) -> Value:
    """JSON(value) inside JSON_OBJECT/JSON_ARRAY: the text's first JSON value, written again as Flink's
    mapper writes it (keys sorted); blank text is NULL, text that is not JSON fails the job."""

    def normalized(text: str) -> str | None:
        if not text.strip():
            return None
        parsed = parse(text.strip())
        if isinstance(parsed, _Invalid):
            raise DataError(f'Invalid JSON string in JSON(value) function: "{text}". Error: {parsed.reason}')
        return dumps(parsed)

    distinct, indexes = _distinct(values)
    return _spread([None if v is None else normalized(v) for v in distinct], indexes, pa.string())


_QUOTE_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}


def _json_quote(text: str) -> str:
    """Flink's JsonQuoteFunction: each UTF-16 unit's code point (a surrogate pair's high unit reads
    the whole pair, its low unit again on its own) above 127 as \\u%04x, seven escapes, the rest
    as it is."""
    units = text.encode("utf-16-be", "surrogatepass")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    out = ['"']
    for i, unit in enumerate(codes):
        code = unit
        if 0xD800 <= unit < 0xDC00 and i + 1 < len(codes) and 0xDC00 <= codes[i + 1] < 0xE000:
            code = 0x10000 + ((unit - 0xD800) << 10) + (codes[i + 1] - 0xDC00)
        char = chr(unit) if unit < 0x80 else ""
        if char in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[char])
        elif code > 127:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out) + '"'


_UNESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_unquote(text: str) -> str:
    """Flink's JsonUnquoteFunction: a text that starts and ends with '"' and reads as JSON (Jackson's
    first value) loses its quotes and escapes; any other text is returned as it is."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"' or isinstance(parse(text), _Invalid):
        return text
    inner, out, i = text[1:-1], [], 0
    while i < len(inner):
        c = inner[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = inner[i + 1 : i + 2]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", inner[i + 2 : i + 6]):
            out.append(chr(int(inner[i + 2 : i + 6], 16)))
            i += 6
        elif nxt in _UNESCAPES and nxt:
            out.append(_UNESCAPES[nxt])
            i += 2
        else:
            return text
    # escaped surrogate pairs become their character; an unpaired one is '?', as Java's UTF-8 encoder writes it
    paired = "".join(out).encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return _LONE_SURROGATE.sub("?", paired)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_quote(values: Value) -> Value:
    distinct, indexes = _distinct(values)
    return _spread([None if v is None else _json_quote(v) for v in distinct], indexes, pa.string())


def json_unquote(values: Value) -> Value:
    distinct, indexes = _distinct(values)
    return _spread([None if v is None else _json_unquote(v) for v in distinct], indexes, pa.string())


def objectagg_entry(key: Value, text: Value) -> Value:
    """One JSON_OBJECTAGG input as the member text '"key":value' (the value null when NULL): its
    aggregate keeps key and value in one string column. Flink's MapView refuses a NULL key."""
    if (isinstance(key, pa.Scalar) and not key.is_valid) or (isinstance(key, pa.Array) and key.null_count):
        raise DataError("JSON_OBJECTAGG: Map views don't support null keys.")
    keys = json_texts(key, False)
    return pc.binary_join_element_wise(keys, pc.fill_null(text, "null"), ":")


def split_entry(entry: str) -> tuple[str, str]:
    """(key, value text) of an :func:`objectagg_entry`."""
    key, end = _DECODER.raw_decode(entry)
    return key, entry[end + 1 :]


def object_text(members: dict[str, str]) -> str:
    """An object of JSON texts, keys sorted as Flink's mapper sorts them."""
    return "{" + ",".join(quote(k) + ":" + members[k] for k in sorted(members, key=_utf16)) + "}"


# ------------------------------------------------------------------ typing rules


def _character(t: pa.DataType, what: str) -> None:
    if not (is_string(t) or pa.types.is_null(t)):
        raise ArgumentTypeError(f"{what} must be a character string, got {sql_type_name(t)}")


def constant_path(spec: str) -> None:
    """Checks a path constant at plan time: ArgumentTypeError naming the offset of a syntax error
    or the construct sqlstream does not evaluate."""
    try:
        compile_path(spec)
    except PathUnsupported as e:
        raise ArgumentTypeError(f"JSON path '{spec}': {e} is not supported (at offset {e.position})") from None
    except PathSyntaxError as e:
        raise ArgumentTypeError(f"JSON path syntax error at offset {e.position} of '{spec}': {e}") from None


def _infer_value(types: list[pa.DataType], constants: list[Any]) -> pa.DataType:
    _character(types[0], "JSON_VALUE's JSON argument")
    _character(types[1], "JSON_VALUE's path")
    returning = constants[2]
    for kind, t in ((constants[3], types[4]), (constants[5], types[6])):
        if kind == "DEFAULT" and returning == "STRING" and not (
                is_string(t) or pa.types.is_null(t) or pa.types.is_integer(t) or pa.types.is_floating(t)
                or pa.types.is_decimal(t) or pa.types.is_boolean(t)):
            raise ArgumentTypeError(f"a DEFAULT of type {sql_type_name(t)} for JSON_VALUE's STRING result is not supported")
    return RETURNING[returning]


def _infer_query(types: list[pa.DataType], constants: list[Any]) -> pa.DataType:
    _character(types[0], "JSON_QUERY's JSON argument")
    _character(types[1], "JSON_QUERY's path")
    return pa.list_(pa.string()) if constants[2] == "ARRAY" else pa.string()


def _infer_exists(types: list[pa.DataType], constants: list[Any]) -> pa.DataType:
    _character(types[0], "JSON_EXISTS's JSON argument")
    _character(types[1], "JSON_EXISTS's path")
    return pa.bool_()


def _infer_is_json(types: list[pa.DataType]) -> pa.DataType:
    _character(types[0], "IS JSON's argument")
    return pa.bool_()


def _convertible_values(types: Iterable[pa.DataType], what: str) -> None:
    for t in types:
        if not convertible(t):
            raise ArgumentTypeError(f"{what}: type '{sql_type_name(t)}' is not scalar or cannot be converted into JSON")


def _infer_string(types: list[pa.DataType]) -> pa.DataType:
    _convertible_values(types[:1], "JSON_STRING")
    return pa.string()


def _infer_array(types: list[pa.DataType]) -> pa.DataType:
    _convertible_values(types[2:], "JSON_ARRAY")
    return pa.string()


def _infer_object(types: list[pa.DataType]) -> pa.DataType:
    for t in types[2::2]:
        _character(t, "JSON_OBJECT's key")
    _convertible_values(types[3::2], "JSON_OBJECT")
    return pa.string()


def _infer_entry(types: list[pa.DataType]) -> pa.DataType:
    _character(types[0], "JSON_OBJECTAGG's key")
    return pa.string()


register("JSON_VALUE", _infer_value, json_value, 7, sees_constants=True)  # type: ignore[arg-type]
register("JSON_QUERY", _infer_query, json_query, 6, sees_constants=True)  # type: ignore[arg-type]
register("JSON_EXISTS", _infer_exists, json_exists, 3, sees_constants=True)  # type: ignore[arg-type]
register("$IS_JSON", _infer_is_json, is_json, 2)
register("JSON_STRING", _infer_string, json_string, 2)
register("JSON_ARRAY", _infer_array, json_array, 2, None)
register("JSON_OBJECT", _infer_object, json_object, 2, None)
register("$JSON_OBJECTAGG_ENTRY", _infer_entry, objectagg_entry, 2)


def _infer_character(name: str) -> Callable[[list[pa.DataType]], pa.DataType]:
    def infer(types: list[pa.DataType]) -> pa.DataType:
        _character(types[0], f"{name}'s argument")
        return pa.string()

    return infer


register("$JSON", _infer_character("JSON"), raw_json, 1)
register("JSON_QUOTE", _infer_character("JSON_QUOTE"), json_quote, 1)
register("JSON_UNQUOTE", _infer_character("JSON_UNQUOTE"), json_unquote, 1)
