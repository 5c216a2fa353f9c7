"""JSON lines format, following Flink's 'json' format: one JSON object per line.

Fields are matched by name; unknown fields are ignored and a missing field is
NULL unless ``json.fail-on-missing-field`` is set.  Timestamps are read in
both the SQL ('yyyy-MM-dd HH:mm:ss.SSS') and ISO-8601 forms and written in
the form ``json.timestamp-format.standard`` selects.

Arrow's JSON reader decodes a whole block at once.  When it rejects a block
(bad syntax, or a value of another JSON type than the column's, which Flink
converts leniently), the block is bisected into line ranges that Arrow accepts
and small ranges that are decoded line by line with Python's json module,
which both converts leniently and names the bad line.
"""

from __future__ import annotations

import json as pyjson
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from sqlstream.core.connectors import Option
from sqlstream.core.errors import DataError
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    Locate,
    TextFormat,
    cannot_parse,
    check_text_type,
    convert_columns,
    convert_text,
    drop_rows,
    ignore_parse_errors,
    line_blocks,
    make_batch,
    message_lines,
    value_text,
)

OPTIONS: tuple[Option, ...] = (
    Option("json.ignore-parse-errors", "bool", description="skip malformed records instead of failing"),
    Option(
        "json.fail-on-missing-field",
        "bool",
        default=False,
        description="a record without one of the table's fields is malformed (default: NULL)",
    ),
    Option(
        "json.timestamp-format.standard",
        default="sql",
        choices=("sql", "iso-8601"),
        description="how timestamps are written: 'SQL' (yyyy-MM-dd HH:mm:ss.SSS) or 'ISO-8601'",
    ),
)

_BLOCK_SIZE = 4 << 20
_TYPE_CHANGED = re.compile(r"Column\(/([^)/]*)\) changed from")
_LINE_BY_LINE = 32  # line ranges at most this long are decoded with Python's json module


def _is_text_typed(t: pa.DataType) -> bool:
    """Types Arrow's JSON reader cannot parse from strings the way Flink writes them: read as text."""
    return pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t)


def _reader_type(t: pa.DataType) -> pa.DataType:
    if _is_text_typed(t):
        return pa.string()
    if pa.types.is_list(t):
        return pa.list_(_reader_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _reader_type(f.type)) for f in t])
    return t


def _has_text_typed(t: pa.DataType) -> bool:
    return _is_text_typed(t) or (pa.types.is_list(t) and _has_text_typed(t.value_type)) or (
        pa.types.is_struct(t) and any(_has_text_typed(f.type) for f in t))


def _has_map(t: pa.DataType) -> bool:
    """Whether a MAP is in the type: Arrow's JSON reader reads objects as structs of known fields
    only, so a MAP's arbitrary keys are decoded by the Python path."""
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t):
        return _has_map(t.value_type)
    return pa.types.is_struct(t) and any(_has_map(f.type) for f in t)


class JsonFormat(TextFormat):
    """Decodes/encodes JSON lines of a schema; see the module docstring."""

    name = "json"
    extension = "json"

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        super().__init__(schema, options, columns, table)
        for f in self.output_schema:
            check_text_type(f.type, "json", f.name, table)
        self.ignore_errors = ignore_parse_errors(options, "json")
        self.fail_on_missing = bool(options.get("json.fail-on-missing-field") or False)
        standard = (options.get("json.timestamp-format.standard") or "sql").lower()
        self.iso_timestamps = standard == "iso-8601"
        self._reader_schema = pa.schema(
            [pa.field(f.name, _reader_type(f.type)) for f in self.output_schema]
        )
        # Columns Arrow must infer (their JSON type differs from the column's), learned while reading.
        self._relaxed: set[str] = set()
        self._parse_options_by_relaxed: dict[frozenset[str], pajson.ParseOptions] = {}
        self._python_only = any(_has_map(f.type) for f in self.output_schema)
        # per column, how the Python path turns its JSON value into what _line_by_line converts:
        # text (scalars), member pairs (a MAP of scalars, converted column-wise) or a value
        self._python_converters = [
            (f, _map_texts if _is_flat_map(f.type) else _python_nested if _is_nested(f.type) else _scalar_text)
            for f in self.output_schema
        ]
        self._key_patterns = [
            '"' + re.escape(pyjson.dumps(c)[1:-1]) + r'"\s*:' for c in self.columns
        ]

    # -- decoding ------------------------------------------------------

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        return self.skip_rows(self._read_blocks(path), skip_rows)

    def _read_blocks(self, path: str) -> Iterator[pa.RecordBatch]:
        """Batches of the file, decoded in blocks of whole lines."""
        for first, block in line_blocks(path, _BLOCK_SIZE):
            yield from self._decode_block(block, lambda k, first=first: f"{path} line {first + k}")

    def decode_messages(self, messages: Sequence[bytes], where: Locate) -> pa.RecordBatch:
        lines = message_lines(messages)
        if lines is None:
            return pa.RecordBatch.from_pylist([], schema=self.output_schema)
        data, keep = lines
        batches = list(self._decode_block(data, lambda k: where(int(keep[k]))))
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=self.output_schema)
        return batches[0] if len(batches) == 1 else pa.concat_batches(batches)

    def _decode_block(self, block: bytes, locate: Locate) -> Iterator[pa.RecordBatch]:
        """Batches of a block of whole lines; ``locate(k)`` names its k-th line (0-based)."""
        if not block.strip():
            return
        if self._python_only:
            lines, numbers = _split_lines(block)
            batch = self._line_by_line(lines, numbers, locate)
            if batch.num_rows:
                yield batch
            return
        batch = self._fast(block)
        if batch is not None and self.fail_on_missing:
            if self._missing_rows(pa.array(_split_lines(block)[0], pa.binary())):
                batch = None  # the slow path names or drops them
        if batch is not None:
            yield batch
            return
        lines, numbers = _split_lines(block)
        yield from self._bisect(lines, numbers, locate)

    def _fast(self, data: bytes) -> pa.RecordBatch | None:
        """Arrow's decoding of whole lines, or None if Arrow rejects any of them.

        A column whose JSON values are all of another type than the column's
        (numbers for a STRING column, numeric strings for an INT column) is
        "relaxed": Arrow infers its type and a vectorized cast converts it,
        as Flink converts such values one by one.
        """
        while True:
            try:
                table = pajson.read_json(
                    pa.BufferReader(data),
                    read_options=pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                    parse_options=self._options_relaxing(frozenset(self._relaxed)),
                )
                break
            except CONVERSION_ERRORS as e:
                m = _TYPE_CHANGED.search(str(e))
                if m is None or m.group(1) not in self.columns or m.group(1) in self._relaxed:
                    return None
                self._relaxed.add(m.group(1))
        table = table.combine_chunks()
        arrays = []
        for f in self.output_schema:
            if f.name not in table.column_names:  # relaxed and absent from every line
                arrays.append(pa.nulls(table.num_rows, f.type))
                continue
            col = table.column(f.name)
            arr = col.chunk(0) if col.num_chunks else pa.array([], col.type)
            try:
                if f.name in self._relaxed:
                    arr = _convert_relaxed(arr, f.type)
                elif _has_text_typed(f.type):
                    arr = _convert_nested(arr, f.type)
            except CONVERSION_ERRORS:
                return None
            arrays.append(arr)
        return make_batch(arrays, self.output_schema, table.num_rows)

    def _options_relaxing(self, relaxed: frozenset[str]) -> pajson.ParseOptions:
        options = self._parse_options_by_relaxed.get(relaxed)
        if options is None:
            schema = pa.schema([f for f in self._reader_schema if f.name not in relaxed])
            options = pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="infer" if relaxed else "ignore"
            )
            self._parse_options_by_relaxed[relaxed] = options
        return options

    def _missing_rows(self, lines: pa.Array) -> list[int]:
        """Rows whose line has no key for some projected column (a regex per column)."""
        missing = np.zeros(len(lines), dtype=bool)
        for pattern in self._key_patterns:
            has = pc.match_substring_regex(lines, pattern).to_numpy(zero_copy_only=False)
            missing |= ~has.astype(bool)
        return np.flatnonzero(missing).tolist()

    def _bisect(self, lines: list[bytes], numbers: list[int], locate: Locate) -> Iterator[pa.RecordBatch]:
        """Decode ``lines`` (non-blank, with their 0-based line index) isolating the bad ones."""
        if len(lines) <= _LINE_BY_LINE:
            batch = self._line_by_line(lines, numbers, locate)
            if batch.num_rows:
                yield batch
            return
        half = len(lines) // 2
        for part_lines, part_numbers in ((lines[:half], numbers[:half]), (lines[half:], numbers[half:])):
            batch = self._fast(b"\n".join(part_lines))
            if batch is not None and self.fail_on_missing and self._missing_rows(pa.array(part_lines, pa.binary())):
                batch = None
            if batch is not None:
                if batch.num_rows:
                    yield batch
            else:
                yield from self._bisect(part_lines, part_numbers, locate)

    def _line_by_line(self, lines: list[bytes], numbers: list[int], locate: Locate) -> pa.RecordBatch:
        """Slow path: Python's json per line; lenient conversion, exact error locations."""
        texts: list[list[Any]] = [[] for _ in self.columns]
        kept: list[int] = []
        bad: dict[int, str] = {}
        try:  # one parse of the whole range; a bad line makes each line be parsed on its own
            docs: list[Any] = pyjson.loads(b"[" + b",".join(lines) + b"]")
        except ValueError:
            docs = lines
        for row, line in enumerate(docs):
            try:
                values = self._python_values(line)
            except ValueError as e:
                bad[row] = str(e)
                if not self.ignore_errors:
                    break
                continue
            kept.append(row)
            for k, v in enumerate(values):
                texts[k].append(v)
        arrays: list[pa.Array] = []
        fields = list(self.output_schema)
        scalar_cols = [k for k, f in enumerate(fields) if not _is_nested(f.type)]
        converted, value_bad = convert_columns(
            [pa.array(texts[k], pa.string()) for k in scalar_cols],
            [fields[k] for k in scalar_cols],
            not self.ignore_errors,
            "field",
        )
        for row, reason in value_bad.items():
            bad.setdefault(kept[row], reason)
        by_col = dict(zip(scalar_cols, converted, strict=True))
        for k, f in enumerate(fields):
            if _is_flat_map(f.type):
                by_col[k], map_bad = _flat_map_column(texts[k], f)
                for row, reason in map_bad.items():
                    bad.setdefault(kept[row], reason)
        for k, f in enumerate(fields):
            arrays.append(by_col[k] if k in by_col else pa.array(texts[k], f.type))
        if bad and not self.ignore_errors:
            first = min(bad)
            raise DataError(f"malformed JSON record in {locate(numbers[first])}: {bad[first]}")
        self.parse_errors += len(bad)
        drop = sorted(r for r, row in enumerate(kept) if row in bad)
        arrays = drop_rows(arrays, len(kept), drop)
        return make_batch(arrays, self.output_schema, len(kept) - len(drop))

    def _python_values(self, line: bytes | Any) -> list[Any]:
        """Per projected column of a line (or of its parsed document): the value as text (scalars),
        member pairs (a MAP of scalars) or a converted value; ValueError if bad."""
        try:
            doc = pyjson.loads(line) if isinstance(line, bytes) else line
        except UnicodeDecodeError as e:
            raise ValueError(f"invalid UTF-8: {e.reason}") from None
        except pyjson.JSONDecodeError as e:
            raise ValueError(f"{e.msg} at column {e.colno}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"expected a JSON object, got {_json_kind(doc)}")
        out: list[Any] = []
        for f, convert in self._python_converters:
            if f.name not in doc:
                if self.fail_on_missing:
                    raise ValueError(f"field '{f.name}' is missing")
                out.append(None)
                continue
            out.append(convert(doc[f.name], f))
        return out

    # -- encoding ------------------------------------------------------

    def encode_lines(self, batch: pa.RecordBatch) -> pa.Array:
        members = []
        for name, arr in zip(batch.schema.names, batch.columns, strict=True):
            value = pc.fill_null(self._json_value(arr), "null")
            members.append(pc.binary_join_element_wise(pyjson.dumps(name, ensure_ascii=False) + ":", value, ""))
        if not members:
            return pa.array(["{}"] * batch.num_rows, pa.string())
        body = members[0] if len(members) == 1 else pc.binary_join_element_wise(*members, ",")
        return pc.binary_join_element_wise("{", body, "}", "")

    def _json_value(self, arr: pa.Array) -> pa.Array:
        """JSON text of each value; NULL where the value is NULL."""
        t = arr.type
        if pa.types.is_list(t):
            inner = pc.fill_null(self._json_value(arr.flatten()), "null")
            offsets = pc.subtract(arr.offsets, arr.offsets[0])
            lists = pa.ListArray.from_arrays(offsets, inner, mask=arr.is_null())
            return pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")
        if pa.types.is_struct(t):
            # a ROW is an object of its fields, in order; a NULL row is null
            members = [
                pc.binary_join_element_wise(pyjson.dumps(f.name, ensure_ascii=False) + ":",
                                            pc.fill_null(self._json_value(pc.struct_field(arr, [i])), "null"), "")
                for i, f in enumerate(t)
            ]
            body = members[0] if len(members) == 1 else pc.binary_join_element_wise(*members, ",")
            whole = pc.binary_join_element_wise("{", body, "}", "")
            return pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), whole)
        if pa.types.is_map(t):
            # a MAP is an object whose member names are its keys' text
            keys = _json_string(value_text(arr.keys, self.iso_timestamps))
            entries = pc.binary_join_element_wise(keys, pc.fill_null(self._json_value(arr.items), "null"), ":")
            offsets = pa.array(arr.offsets.to_numpy())
            lists = pa.ListArray.from_arrays(offsets, entries, mask=arr.is_null() if arr.null_count else None)
            return pc.binary_join_element_wise("{", pc.binary_join(lists, ","), "}", "")
        if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
            return pc.cast(arr, pa.string())
        if pa.types.is_floating(t):
            text = pc.cast(arr, pa.string())
            finite = pc.is_finite(arr)
            named = pc.replace_substring(pc.replace_substring(text, "nan", "NaN"), "inf", "Infinity")
            return pc.if_else(finite, text, pc.binary_join_element_wise('"', named, '"', ""))
        return _json_string(value_text(arr, self.iso_timestamps))


def _convert_relaxed(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """An inferred column to the column's type: text is parsed, scalars become text or are cast."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return convert_text(arr, t)
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), t)
    scalar = pa.types.is_boolean(arr.type) or pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
    if scalar and (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
                   or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        return pc.cast(arr, t)
    raise pa.ArrowInvalid(f"cannot read JSON values of type {arr.type} as {t}")


def _convert_nested(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """Convert text-typed values (temporal types read as strings), also inside lists and rows."""
    if pa.types.is_list(t):
        values = _convert_nested(arr.values, t.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=t, mask=arr.is_null())
    if pa.types.is_struct(t):
        children = [_convert_nested(pc.struct_field(arr, [i]), f.type) for i, f in enumerate(t)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=arr.is_null())
    return convert_text(arr, t)


def _json_string(text: pa.Array) -> pa.Array:
    """Quote and escape strings for JSON, vectorized."""
    escaped = pc.replace_substring(pc.replace_substring(text, "\\", "\\\\"), '"', '\\"')
    if pc.any(pc.match_substring_regex(escaped, r"[\x00-\x1f]")).as_py():
        for code in range(0x20):
            char = chr(code)
            if pc.any(pc.match_substring(escaped, char)).as_py():
                escaped = pc.replace_substring(escaped, char, pyjson.dumps(char)[1:-1])
    return pc.binary_join_element_wise('"', escaped, '"', "")


def _split_lines(block: bytes) -> tuple[list[bytes], list[int]]:
    """The non-blank lines of a block and their 0-based line indices (slow path)."""
    lines: list[bytes] = []
    numbers: list[int] = []
    for k, line in enumerate(block.split(b"\n")):
        if line.strip():
            lines.append(line)
            numbers.append(k)
    return lines, numbers


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _scalar_text(value: Any, f: pa.Field) -> str | None:
    """A JSON value as the text the vectorized conversion parses (Flink converts leniently)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else pyjson.dumps(value)  # json's own spelling
    if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
        return pyjson.dumps(value, ensure_ascii=False, separators=(",", ":"))
    raise ValueError(f"field '{f.name}': {cannot_parse(pyjson.dumps(value), f.type)}")


def _is_flat_map(t: pa.DataType) -> bool:
    """A MAP of scalar keys and values: decoded by the Python path but converted column-wise."""
    return pa.types.is_map(t) and not _is_nested(t.key_type) and not _is_nested(t.item_type)


def _map_texts(value: Any, f: pa.Field) -> list[tuple[str | None, str | None]] | None:
    """A JSON object's members as (key text, value text) pairs, for _flat_map_column."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"field '{f.name}': expected an object, got {_json_kind(value)}")
    item = pa.field(f.name, f.type.item_type)
    return [(k, v if isinstance(v, str) or v is None else _scalar_text(v, item)) for k, v in value.items()]


def _flat_map_column(rows: list[Any], f: pa.Field) -> tuple[pa.Array, dict[int, str]]:
    """The MAP column of ``rows`` (lists of text pairs, or None), its keys and values converted in
    one vectorized call each; ``{row: reason}`` for the rows whose map does not convert (NULL)."""
    t = f.type
    lengths = np.array([0 if r is None else len(r) for r in rows], np.int64)
    pairs = [p for r in rows if r is not None for p in r]
    keys = pa.array([k for k, _ in pairs], pa.string())
    items = pa.array([v for _, v in pairs], pa.string())
    bad: dict[int, str] = {}
    try:
        converted_keys, converted_items = convert_text(keys, t.key_type), convert_text(items, t.item_type)
    except CONVERSION_ERRORS:
        # the error path: the rows whose map does not convert, found one by one
        for row, r in enumerate(rows):
            if r is None:
                continue
            try:
                convert_text(pa.array([k for k, _ in r], pa.string()), t.key_type)
                convert_text(pa.array([v for _, v in r], pa.string()), t.item_type)
            except CONVERSION_ERRORS:
                bad[row] = f"field '{f.name}': {cannot_parse(pyjson.dumps(dict(r)), t)}"
        rows = [None if row in bad else r for row, r in enumerate(rows)]
        return _flat_map_column(rows, f)[0], bad
    if converted_keys.null_count:
        first = int(np.repeat(np.arange(len(rows)), lengths)[np.flatnonzero(converted_keys.is_null())[0]])
        return _flat_map_column([None if i == first else r for i, r in enumerate(rows)], f)[0], {
            first: f"field '{f.name}': a MAP key is NULL"}
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    out = pa.MapArray.from_arrays(offsets, converted_keys, converted_items, type=t)
    nulls = np.array([r is None for r in rows], bool)
    return (pc.if_else(pa.array(nulls), pa.scalar(None, t), out) if nulls.any() else out), bad


def _is_nested(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t)


def _python_nested(value: Any, f: pa.Field) -> Any:
    """A JSON array (ARRAY) or object (MAP, ROW) converted for its column (slow path): scalars
    inside are converted as top-level ones are, a MAP's keys from their text."""
    if value is None:
        return None
    t = f.type
    expected = "an array" if pa.types.is_list(t) else "an object"
    if not isinstance(value, list if pa.types.is_list(t) else dict):
        raise ValueError(f"field '{f.name}': expected {expected}, got {_json_kind(value)}")
    try:
        if pa.types.is_list(t):
            return _python_children(list(value), pa.field(f.name, t.value_type))
        if pa.types.is_map(t):
            keys = convert_text(pa.array(list(value), pa.string()), t.key_type).to_pylist()
            values = _python_children(list(value.values()), pa.field(f.name, t.item_type))
            return list(zip(keys, values, strict=True))
        return {g.name: _python_children([value.get(g.name)], pa.field(f"{f.name}.{g.name}", g.type))[0] for g in t}
    except CONVERSION_ERRORS:
        raise ValueError(f"field '{f.name}': {cannot_parse(pyjson.dumps(value), t)}") from None


def _python_children(values: list[Any], element: pa.Field) -> list[Any]:
    if _is_nested(element.type):
        return [_python_nested(v, element) for v in values]
    texts = pa.array([_scalar_text(v, element) for v in values], pa.string())
    return convert_text(texts, element.type).to_pylist()
