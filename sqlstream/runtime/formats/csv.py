"""CSV format, following Flink's 'csv' format (no header; RFC-4180 quoting).

NULL handling is Flink's (Jackson's): without 'csv.null-literal' no field is
NULL, an empty STRING field (quoted or not) is '' and an empty field of any
other type does not parse (an error, or NULL with 'csv.ignore-parse-errors').
With the option, a field whose text equals the literal is NULL, quoted or not.
NULL is written as the null literal (empty by default) and '' as an empty
field, so '' reads back as NULL when the literal is empty, as in Flink.
"""

from __future__ import annotations

import codecs
import csv as pycsv
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    Locate,
    TextFormat,
    cannot_parse,
    check_text_type,
    concat_values,
    convert_columns,
    convert_text,
    ignore_parse_errors,
    make_batch,
    parse_text,
    value_text,
)

OPTIONS: tuple[Option, ...] = (
    Option("csv.field-delimiter", default=",", description="field separator, one character ('\\t' for tab)"),
    Option("csv.quote-character", default='"', description="character enclosing fields with special characters"),
    Option("csv.null-literal", description="text read and written as NULL (default: none on read, empty field on write)"),
    Option("csv.allow-comments", "bool", default=False, description="skip lines starting with '#'"),
    Option("csv.ignore-parse-errors", "bool", description="skip malformed records instead of failing"),
    Option("csv.header", "bool", default=False, description="the first line of each file is a header to skip"),
    Option("csv.array-element-delimiter", default=";",
           description="separates the elements of an ARRAY field and the fields of a ROW field"),
)

_BLOCK_SIZE = 1 << 20


def _one_char(raw: str, key: str, table: str) -> str:
    """Flink allows backslash escapes ('\\t') for the single-character options."""
    text = codecs.decode(raw, "unicode_escape") if raw.startswith("\\") else raw
    if len(text) != 1:
        raise ConnectorError(f"table '{table}': option '{key}' must be a single character, got '{raw}'")
    return text


class CsvFormat(TextFormat):
    """Decodes/encodes CSV records of a schema; see the module docstring for NULL handling."""

    name = "csv"
    extension = "csv"

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        super().__init__(schema, options, columns, table)
        for f in schema:
            check_text_type(f.type, "csv", f.name, table)
        self.delimiter = _one_char(options.get("csv.field-delimiter") or ",", "csv.field-delimiter", table)
        self.quote = _one_char(options.get("csv.quote-character") or '"', "csv.quote-character", table)
        if self.quote == self.delimiter:
            raise ConnectorError(f"table '{table}': csv.quote-character must differ from csv.field-delimiter")
        self.null_literal: str | None = options.get("csv.null-literal")
        self.allow_comments = bool(options.get("csv.allow-comments") or False)
        self.header = bool(options.get("csv.header") or False)
        self.ignore_errors = ignore_parse_errors(options, "csv")
        self.element_delimiter: str = options.get("csv.array-element-delimiter") or ";"
        special = re.escape(self.delimiter + self.quote) + r"\r\n"
        self._needs_quote = f"[{special}]|^\\s|\\s$"
        self._records_seen = 0  # records (good or bad) seen by the last _decode

    # -- decoding ------------------------------------------------------

    def _read_options(self, skip: int) -> pacsv.ReadOptions:
        return pacsv.ReadOptions(
            column_names=self.schema.names, skip_rows=skip, use_threads=False, block_size=_BLOCK_SIZE
        )

    def _convert_options(self) -> pacsv.ConvertOptions:
        # Zero projected columns still need row counts: read the first column and drop it.
        include = self.columns or self.schema.names[:1]
        return pacsv.ConvertOptions(
            include_columns=include,
            column_types={c: pa.string() for c in self.schema.names},
            null_values=[self.null_literal] if self.null_literal is not None else [],
            strings_can_be_null=self.null_literal is not None,
            quoted_strings_can_be_null=True,
        )

    def _parse_options(self, invalid: list[tuple[int | None, int, int]]) -> pacsv.ParseOptions:
        def on_invalid(row: Any) -> str:
            # Only called for rows with a wrong field count (the error path), and by Arrow's
            # read-ahead up to a block before their batch is read: _decode counts them per batch.
            invalid.append((row.number, row.expected_columns, row.actual_columns))
            return "skip"

        return pacsv.ParseOptions(
            delimiter=self.delimiter,
            quote_char=self.quote,
            newlines_in_values=True,
            ignore_empty_lines=True,
            invalid_row_handler=on_invalid,
        )

    def _decode(
        self, stream: pa.NativeFile, skip: int, locate: Locate, what: str
    ) -> Iterator[pa.RecordBatch]:
        """Batches of a CSV stream; ``locate`` names record k (0-based, data records only)."""
        invalid: list[tuple[int | None, int, int]] = []
        try:
            reader = pacsv.open_csv(
                stream,
                read_options=self._read_options(skip),
                parse_options=self._parse_options(invalid),
                convert_options=self._convert_options(),
            )
        except pa.ArrowInvalid as e:
            if "Empty CSV file" in str(e):
                return
            raise DataError(f"malformed CSV data in {what}: {e}") from None
        records = 0  # data records before the current batch (exact until the first invalid one)
        counted = 0  # the first `counted` rows of `invalid` belong to the batches read so far
        self._records_seen = 0
        fields = list(self.output_schema)
        while True:
            try:
                strings = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as e:
                raise DataError(f"malformed CSV data in {what}: {e}") from None
            n = strings.num_rows
            mine = _invalid_in_block(invalid, counted, skip + records + counted, n)
            arrays, careful = _quick_columns(strings.columns[: len(fields)], fields)
            texts, blank = _jackson_text([strings.column(k) for k in careful], [fields[k] for k in careful])
            scalar = [j for j, k in enumerate(careful) if not _is_nested(fields[k].type)]
            converted, bad = convert_columns([texts[j] for j in scalar], [fields[careful[j]] for j in scalar],
                                             not self.ignore_errors, "column")
            for j, arr in zip(scalar, converted, strict=True):
                arrays[careful[j]] = arr
            for j, k in enumerate(careful):
                if arrays[k] is None:
                    arrays[k], nested_bad = self._nested(texts[j], fields[k])
                    for row, reason in nested_bad.items():
                        bad.setdefault(row, reason)
            bad = {**blank, **dict(sorted(bad.items()))}
            if not self.ignore_errors:
                self._raise_first(invalid[counted:counted + mine], bad, records, skip, locate)
            else:
                # Flink skips the record of the wrong field count, and nulls the field that does
                # not parse and keeps the record.
                self.parse_errors += mine + len(bad)
            counted += mine
            records += n
            self._records_seen = records + counted
            if n:
                yield make_batch(arrays, self.output_schema, n)
        if len(invalid) > counted:  # after the last batch's records
            if not self.ignore_errors:
                self._raise_first(invalid[counted:], {}, records, skip, locate)
            self.parse_errors += len(invalid) - counted
        self._records_seen = records + len(invalid)

    def _nested(self, text: pa.Array, f: pa.Field) -> tuple[pa.Array, dict[int, str]]:
        """An ARRAY or ROW field's values, split at 'csv.array-element-delimiter' as Flink's csv
        format does: an empty field is an empty ARRAY, an element equal to the null literal is NULL,
        a ROW takes its fields by position (missing ones NULL, extra ones ignored).  Returns the
        values and ``{row: reason}`` for the fields that do not convert (NULL in the values)."""
        try:
            return self._split_nested(text, f.type), {}
        except CONVERSION_ERRORS:
            pass
        bad: dict[int, str] = {}
        for row in range(len(text)):  # the error path only: find the fields that fail
            try:
                self._split_nested(text.slice(row, 1), f.type)
            except CONVERSION_ERRORS:
                bad[row] = f"column '{f.name}': {cannot_parse(text[row].as_py(), f.type)}"
                if not self.ignore_errors:
                    break
        cleaned = pc.if_else(pa.array(np.isin(np.arange(len(text)), list(bad))), pa.scalar(None, pa.string()), text)
        return self._split_nested(cleaned, f.type), bad

    def _split_nested(self, text: pa.Array, t: pa.DataType) -> pa.Array:
        if pa.types.is_list(t) and self.null_literal == "":
            text = pc.fill_null(text, "")  # the empty field, read as the null literal, is []
        parts = pc.split_pattern(text, self.element_delimiter)
        counts = pc.fill_null(pc.list_value_length(parts), 0).to_numpy(zero_copy_only=False)
        flat = parts.flatten()
        if self.null_literal is not None:
            flat = pc.if_else(pc.equal(flat, self.null_literal), pa.scalar(None, pa.string()), flat)
        mask = text.is_null() if text.null_count else None
        if pa.types.is_list(t):
            empty = pc.fill_null(pc.equal(text, ""), False).to_numpy(zero_copy_only=False)
            keep = np.repeat(~empty, counts)  # an empty field splits into one '': no element
            lengths = np.where(empty, 0, counts)
            values = _element_values(flat.filter(pa.array(keep)), t.value_type)
            offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
            return pa.ListArray.from_arrays(offsets, values, type=t, mask=mask)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        children = []
        for i, field in enumerate(t):
            has = counts > i
            at = pa.array(np.where(has, starts + i, 0), mask=~has)
            texts = flat.take(at) if len(flat) else pa.nulls(len(text), pa.string())
            children.append(_element_values(texts, field.type))
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)

    def _raise_first(
        self,
        invalid: list[tuple[int | None, int, int]],
        bad: dict[int, str],
        records: int,
        skip: int,
        locate: Locate,
    ) -> None:
        """In strict mode: raise for the earliest bad record among field-count and value errors."""
        first_bad = records + min(bad) if bad else None
        if invalid:
            number, expected, actual = invalid[0]
            # Arrow numbers records from 1, counting the skipped header.
            index = (number - 1 - skip) if number is not None else None
            if first_bad is None or index is None or index <= first_bad:
                where = locate(index) if index is not None else "unknown record"
                raise DataError(
                    f"malformed CSV record in {where}: expected {expected} fields, got {actual}"
                )
        if first_bad is not None:
            raise DataError(f"malformed CSV record in {locate(first_bad)}: {bad[min(bad)]}")

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        if os.path.getsize(path) == 0:
            return
        stream = self._open(path)
        try:
            decoded = self._decode(stream, int(self.header), lambda k: self._locate(path, k), path)
            yield from self.skip_rows(decoded, skip_rows)
        finally:
            stream.close()

    def _open(self, path: str) -> pa.NativeFile:
        if not self.allow_comments:
            return pa.OSFile(path, "rb")
        with open(path, "rb") as f:
            data = f.read()
        return pa.BufferReader(_strip_comment_lines(data))

    def _locate(self, path: str, record: int) -> str:
        """'<path> line <n>' for data record ``record`` (slow path: rescans the file)."""
        seen = 0
        for line, _ in self._records_with_lines(path):
            if seen == record:
                return f"{path} line {line}"
            seen += 1
        return f"{path} record {record + 1}"

    def _records_with_lines(self, path: str) -> Iterator[tuple[int, list[str]]]:
        """(first line number, fields) of each data record, skipping what Arrow skips."""
        state = {"line": 0, "start": 0}

        def lines() -> Iterator[str]:
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                for text in f:
                    state["line"] += 1
                    if self.allow_comments and text.startswith("#"):
                        continue
                    if not state["start"]:
                        state["start"] = state["line"]
                    yield text

        reader = pycsv.reader(lines(), delimiter=self.delimiter, quotechar=self.quote)
        header_pending = self.header
        for rec in reader:
            start, state["start"] = state["start"], 0
            if not rec:
                continue
            if header_pending:
                header_pending = False
                continue
            yield start, rec

    def decode_messages(self, messages: Sequence[bytes], where: Locate) -> pa.RecordBatch:
        raw = pa.array(messages, pa.binary())
        blank = pc.match_substring_regex(raw, r"^[\r\n]*$").to_numpy(zero_copy_only=False)
        keep = np.flatnonzero(~blank.astype(bool))
        if len(keep) == 0:
            return _empty(self.output_schema)
        records = pc.replace_substring_regex(raw.take(pa.array(keep)), r"[\r\n]+$", "")
        data = concat_values(pc.binary_join_element_wise(records, pa.scalar(b""), b"\n"))
        errors_before = self.parse_errors

        def locate(k: int) -> str:
            return where(int(keep[min(k, len(keep) - 1)]))

        try:
            batches = list(self._decode(pa.BufferReader(data), 0, locate, "messages"))
        except DataError:
            batches = None  # located precisely below
        if batches is not None and self._records_seen == len(keep):
            return _concat(batches, self.output_schema)
        # Some message holds more or less than one record (e.g. an unterminated
        # quote swallowed the next ones): decode message by message to find it.
        self.parse_errors = errors_before
        return self._decode_each(records, keep, where)

    def _decode_each(self, records: pa.Array, keep: np.ndarray, where: Locate) -> pa.RecordBatch:
        """Slow path of decode_messages: one Arrow parse per message."""
        out: list[pa.RecordBatch] = []
        for k, message in enumerate(records.to_pylist()):
            location = where(int(keep[k]))
            got = list(self._decode(pa.BufferReader(message), 0, lambda _i, loc=location: loc, location))
            if self._records_seen > 1:
                if not self.ignore_errors:
                    raise DataError(
                        f"malformed CSV record in {location}: expected one record per message, "
                        f"got {self._records_seen}"
                    )
                self.parse_errors += 1
                continue
            out.extend(got)
        return _concat(out, self.output_schema)

    # -- encoding ------------------------------------------------------

    def encode_lines(self, batch: pa.RecordBatch) -> pa.Array:
        null_text = self.null_literal if self.null_literal is not None else ""
        cells = []
        for arr in batch.columns:
            text = self._nested_text(arr, null_text) if _is_nested(arr.type) else value_text(arr)
            if self._may_need_quotes(text):
                quote = pc.match_substring_regex(text, self._needs_quote)
                doubled = pc.replace_substring(text, self.quote, self.quote * 2)
                quoted = pc.binary_join_element_wise(self.quote, doubled, self.quote, "")
                text = pc.if_else(pc.fill_null(quote, False), quoted, text)
            cells.append(pc.fill_null(text, null_text) if text.null_count else text)
        if not cells:
            return pa.array([""] * batch.num_rows, pa.string())
        if len(cells) == 1:
            return cells[0]
        return pc.binary_join_element_wise(*cells, self.delimiter)

    def _may_need_quotes(self, text: pa.Array) -> bool:
        """Whether some value may need quoting (holds the delimiter, the quote or a line break, or
        starts or ends with whitespace), from a byte scan of the column's values: most columns
        (numbers, times, plain text) need none, and the scan costs a fraction of the per-row regex.
        False only when no value can match ``_needs_quote``; a NULL's bytes count too."""
        if len(text) == 0:
            return False
        text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        wide = pa.types.is_large_string(text.type) or pa.types.is_large_binary(text.type)
        offsets = np.frombuffer(text.buffers()[1], np.int64 if wide else np.int32)
        offsets = offsets[text.offset : text.offset + len(text) + 1]
        data_buf = text.buffers()[2]
        if data_buf is None or offsets[-1] == offsets[0]:
            return False
        data = np.frombuffer(data_buf, np.uint8)
        values = data[offsets[0] : offsets[-1]]
        for special in (self.delimiter, self.quote, "\r", "\n"):
            encoded = special.encode()
            found = (values == encoded[0]).any() if len(encoded) == 1 else values.tobytes().find(encoded) >= 0
            if found:
                return True
        nonempty = offsets[1:] > offsets[:-1]
        edges = np.concatenate([data[offsets[:-1][nonempty]], data[offsets[1:][nonempty] - 1]])
        return bool(np.isin(edges, _RE2_SPACE).any())

    def _nested_text(self, arr: pa.Array, null_text: str) -> pa.Array:
        """An ARRAY's elements or a ROW's fields joined by the element delimiter, a NULL one as the
        null literal (as Flink writes them; NULL stays NULL for the field's own null literal)."""
        if pa.types.is_struct(arr.type):
            fields = [pc.fill_null(value_text(pc.struct_field(arr, [i])), null_text) for i in range(arr.type.num_fields)]
            joined = fields[0] if len(fields) == 1 else pc.binary_join_element_wise(*fields, self.element_delimiter)
            return pc.if_else(arr.is_valid(), joined, pa.scalar(None, pa.string()))
        items = pc.fill_null(value_text(arr.values), null_text)
        offsets = pa.array(arr.offsets.to_numpy())  # fresh: Arrow takes no mask with sliced offsets
        lists = pa.ListArray.from_arrays(offsets, items, mask=arr.is_null() if arr.null_count else None)
        return pc.binary_join(lists, self.element_delimiter)


# the bytes of RE2's ``\s`` (ASCII whitespace: tab, newline, form feed, carriage return, space)
_RE2_SPACE = np.array([9, 10, 12, 13, 32], np.uint8)


def _element_values(texts: pa.Array, t: pa.DataType) -> pa.Array:
    """Element texts converted; a blank one of a non-string type does not parse (as a field's)."""
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        if pc.any(pc.equal(pc.utf8_trim_whitespace(texts), "")).as_py():
            raise pa.ArrowInvalid(f"an empty element is no {sql_type_name(t)}")
    return convert_text(texts, t)


def _is_nested(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_struct(t)


def _quick_columns(columns: Sequence[pa.Array], fields: Sequence[pa.Field]) -> tuple[list[Any], list[int]]:
    """The columns that convert as they are: STRING ones, and those whose every value Arrow's cast
    takes (the common, well-formed text), which is what the careful path (_jackson_text, then
    convert_columns) makes of them too: a value that trims to nothing never casts to a
    non-string type, so such a column has no blank field, and convert_text tries this cast first.
    Returns the converted arrays (None for the others) and the indices of the others, for the
    careful path: BOOLEAN (Flink's own rule), ARRAY and ROW, and any column some value of which
    does not cast (blank, padded, malformed: the careful path finds which and why)."""
    arrays: list[Any] = [None] * len(fields)
    careful: list[int] = []
    for k, (arr, f) in enumerate(zip(columns, fields, strict=True)):
        t = f.type
        if pa.types.is_boolean(t) or _is_nested(t):
            careful.append(k)
            continue
        try:
            arrays[k] = parse_text(arr, t)
        except CONVERSION_ERRORS:
            careful.append(k)
    return arrays, careful


def _jackson_text(columns: Sequence[pa.Array], fields: Sequence[pa.Field]) -> tuple[list[pa.Array], dict[int, str]]:
    """Apply Flink's (Jackson-based) per-type text rules before the Arrow conversion.

    Flink parses a BOOLEAN field with Boolean.parseBoolean (only 'true', any case,
    is TRUE; anything else, the empty field included, is FALSE) and fails on a
    blank field of any other non-string type.  Returns the adjusted text columns
    and ``{row: reason}`` for the blank fields (the conversion makes them NULL).
    """
    out: list[pa.Array] = []
    blank: dict[int, str] = {}
    for arr, f in zip(columns, fields, strict=True):
        t = f.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_nested(t):
            out.append(arr)
            continue
        trimmed = pc.utf8_trim_whitespace(arr)
        if pa.types.is_boolean(t):
            out.append(pc.if_else(pc.equal(pc.utf8_lower(trimmed), "true"), "true", "false").cast(pa.string()))
            out[-1] = pc.if_else(pc.is_null(arr), pa.scalar(None, pa.string()), out[-1])
            continue
        out.append(arr)
        for row in np.flatnonzero(pc.fill_null(pc.equal(trimmed, ""), False).to_numpy(zero_copy_only=False)):
            blank.setdefault(int(row), f"column '{f.name}': {cannot_parse(arr[int(row)].as_py(), t)}")
    return out, blank


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _concat(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    if not batches:
        return _empty(schema)
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)


def _strip_comment_lines(data: bytes) -> bytes:
    """``data`` without the lines starting with '#' (vectorized over the bytes)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    if len(buf) == 0:
        return data
    newlines = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines + 1, [len(buf)]))
    starts, ends = starts[starts < len(buf)], ends[starts < len(buf)]
    comment = buf[starts] == ord("#")
    if not comment.any():
        return data
    keep = np.repeat(~comment, ends - starts)
    return buf[keep].tobytes()


def _invalid_in_block(invalid: list[tuple[int | None, int, int]], first: int, start: int, n: int) -> int:
    """How many of ``invalid[first:]`` (rows of the wrong field count, in record order) belong to
    the block of ``n`` good records that follows record number ``start``.

    Arrow's reader parses a block ahead and reports that block's invalid rows before the batch
    before it is read, so a count kept as they are reported would depend on timing, and a
    checkpoint taken inside a block would count the next block's rows, which a restore counts
    again. Their record numbers decide instead: a block of ``n`` good and ``m`` invalid records
    holds the numbers up to ``start + n + m``, so ``m`` is the least fixed point of
    ``m = #{numbers <= start + n + m}``, the same however far Arrow has read. (An invalid record
    right after the block's last good one may count with the next block; restores decide alike.)
    Without numbers (Arrow's threaded parse), all reported rows count with this block."""
    m = 0
    while first + m < len(invalid):
        number = invalid[first + m][0]
        if number is not None and number > start + n + m:
            break
        m += 1
    return m
