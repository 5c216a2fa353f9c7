"""Changelog JSON formats, following Flink's 'debezium-json', 'canal-json' and 'maxwell-json'.

Each record is a change event of a database table; decoding turns it into rows
with a RowKind (the batch's last column, :data:`ROW_KIND_COLUMN`):

* Debezium ``{"before": {..}, "after": {..}, "op": "c"|"r"|"u"|"d"}`` (with
  ``debezium-json.schema-include`` the envelope is the ``payload`` of
  ``{"schema": .., "payload": ..}``): c/r -> +I after; u -> -U before, +U after;
  d -> -D before.
* Canal ``{"data": [..], "old": [..], "type": "INSERT"|"UPDATE"|"DELETE"|"CREATE",
  "database": .., "table": ..}``: one row per element of ``data``; an UPDATE's
  before row is the data row with the fields listed in the matching ``old``
  element replaced; CREATE (DDL) is skipped; ``canal-json.database.include`` /
  ``canal-json.table.include`` keep only events whose database / table fully
  matches the regular expression.
* Maxwell ``{"data": {..}, "old": {..}, "type": "insert"|"update"|"delete"}``:
  as Canal with one row per event.

Encoding writes what Flink writes: +I and +U as creations/inserts, -U and -D as
deletions (``{"before":null,"after":{..},"op":"c"}`` / ``{"before":{..},"after":null,"op":"d"}``,
``{"data":[{..}],"type":"INSERT"|"DELETE"}``, ``{"data":{..},"type":"insert"|"delete"}``),
the row objects as the 'json' format writes them.

Decoding is vectorized: Arrow's JSON reader parses a block of envelopes with
an explicit schema (the row fields typed as the 'json' format reads them; a
field whose values come as text, as Canal writes every value, is read as text
and cast), and the envelope rules are array operations.  A block Arrow rejects
is bisected down to small line ranges decoded with Python's json module, which
names the bad line.  Empty messages (Kafka tombstones) are skipped.
"""

from __future__ import annotations

import json as pyjson
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.formats import (
    CONVERSION_ERRORS,
    ROW_KIND_COLUMN,
    Locate,
    TextFormat,
    check_text_type,
    concat_values,
    convert_columns,
    ignore_parse_errors,
    line_blocks,
    message_lines,
    split_row_kinds,
)
from sqlstream.runtime.formats.json import JsonFormat, _reader_type, _scalar_text

_BLOCK_SIZE = 4 << 20
_LINE_BY_LINE = 32  # line ranges at most this long are decoded with Python's json module
_TYPE_CHANGED = re.compile(r"Column\(/(?:[^)]*/)?([^)/]+)\) changed from")
_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = (int(k) for k in RowKind)


def _options(prefix: str, *extra: Option) -> tuple[Option, ...]:
    return (
        Option(f"{prefix}.ignore-parse-errors", "bool", description="skip malformed change events instead of failing"),
        Option(
            f"{prefix}.timestamp-format.standard",
            default="sql",
            choices=("sql", "iso-8601"),
            description="how timestamps are written: 'SQL' (yyyy-MM-dd HH:mm:ss.SSS) or 'ISO-8601'",
        ),
        *extra,
    )


@dataclass
class _Changes:
    """Decoded rows of a block before ordering: per row its line, its place in the line, its kind."""

    columns: list[pa.Array]  # per projected column, values already of the column's type
    lines: np.ndarray  # 0-based index among the block's non-blank lines
    order: np.ndarray  # position among the rows of its line
    kinds: np.ndarray  # int8 RowKind
    bad: dict[int, str]  # line -> why it is malformed


class _ChangelogJsonFormat(TextFormat):
    """What the three envelope formats share: reading blocks, the slow path, errors, encoding rows."""

    label: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        super().__init__(schema, options, columns, table)
        for f in self.output_schema:
            if pa.types.is_list(f.type):
                raise ConnectorError(
                    f"table '{table}': format '{self.name}' does not support column '{f.name}' of type ARRAY"
                )
            check_text_type(f.type, self.name, f.name, table)
        self.fields = list(self.output_schema)
        self.ignore_errors = ignore_parse_errors(options, self.name)
        standard = (options.get(f"{self.name}.timestamp-format.standard") or "sql").lower()
        self._rows = JsonFormat(schema, {"json.timestamp-format.standard": standard}, columns, table)
        self.output_schema = self.output_schema.append(pa.field(ROW_KIND_COLUMN, pa.int8()))
        self._relaxed: set[str] = set()  # row fields read as text (their JSON values are strings)

    # -- the envelope, per format ------------------------------------------

    def _envelope(self, row: pa.DataType) -> list[pa.Field]:
        """The reader schema's top-level fields, given the row struct type."""
        raise NotImplementedError

    def _vectorized(self, table: pa.Table, lines: pa.Array) -> _Changes:
        """The changes of a block Arrow has read (``lines``: the raw lines, for presence tests)."""
        raise NotImplementedError

    def _python(self, doc: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        """The (kind, row object) changes of one parsed event; ValueError names what is wrong."""
        raise NotImplementedError

    # -- decoding ------------------------------------------------------

    def read_file(self, path: str, skip_rows: int = 0) -> Iterator[pa.RecordBatch]:
        return self.skip_rows(self._read_blocks(path), skip_rows)

    def _read_blocks(self, path: str) -> Iterator[pa.RecordBatch]:
        for first, block in line_blocks(path, _BLOCK_SIZE):
            batch = self._decode_block(block, lambda k, first=first: f"{path} line {first + k}")
            if batch.num_rows:
                yield batch

    def decode_messages(self, messages: Sequence[bytes], where: Locate) -> pa.RecordBatch:
        lines = message_lines(messages)
        if lines is None:
            return _empty(self.output_schema)
        data, keep = lines
        return self._decode_block(data, lambda k: where(int(keep[k])))

    def _decode_block(self, block: bytes, locate: Locate) -> pa.RecordBatch:
        """The rows of a block of whole lines; ``locate(k)`` names its k-th line (0-based)."""
        raw = pa.array(block.split(b"\n"), pa.binary())
        blank = pc.match_substring_regex(raw, r"^\s*$").to_numpy(zero_copy_only=False).astype(bool)
        numbers = np.flatnonzero(~blank)
        if len(numbers) == 0:
            return _empty(self.output_schema)
        lines = raw.take(pa.array(numbers))
        parts = list(self._decode_lines(lines, 0))
        changes = _concat(parts, len(self.fields))
        if changes.bad:
            if not self.ignore_errors:
                first = min(changes.bad)
                raise DataError(
                    f"malformed {self.label} JSON record in {locate(int(numbers[first]))}: {changes.bad[first]}"
                )
            self.parse_errors += len(changes.bad)
            keep = ~np.isin(changes.lines, np.fromiter(changes.bad, dtype=np.int64))
            changes = _take(changes, np.flatnonzero(keep))
        order = np.lexsort((changes.order, changes.lines))
        changes = _take(changes, order)
        return pa.RecordBatch.from_arrays(
            [*changes.columns, pa.array(changes.kinds, pa.int8())], schema=self.output_schema
        )

    def _decode_lines(self, lines: pa.Array, base: int) -> Iterator[_Changes]:
        """Changes of ``lines`` (line numbers from ``base``): Arrow where it accepts them, else bisected."""
        table = self._read(concat_values(pc.binary_join_element_wise(lines, pa.scalar(b""), b"\n")))
        if table is not None and table.num_rows == len(lines):
            changes = self._vectorized(table, lines)
            changes = self._convert(changes)
            changes.lines = changes.lines + base
            changes.bad = {k + base: v for k, v in changes.bad.items()}
            yield changes
            return
        if len(lines) <= _LINE_BY_LINE:
            yield self._line_by_line(lines.to_pylist(), base)
            return
        half = len(lines) // 2
        yield from self._decode_lines(lines.slice(0, half), base)
        yield from self._decode_lines(lines.slice(half), base + half)

    def _row_type(self) -> pa.StructType:
        return pa.struct(
            [pa.field(f.name, pa.string() if f.name in self._relaxed else _reader_type(f.type)) for f in self.fields]
        )

    def _read(self, data: bytes) -> pa.Table | None:
        """Arrow's reading of the envelopes, or None if it rejects them.

        A row field whose JSON values are strings where the column is not (Canal
        writes every value as a string) is from then on read as text and cast.
        """
        while True:
            options = pajson.ParseOptions(
                explicit_schema=pa.schema(self._envelope(self._row_type())), unexpected_field_behavior="ignore"
            )
            try:
                table = pajson.read_json(
                    pa.BufferReader(data),
                    read_options=pajson.ReadOptions(use_threads=False, block_size=len(data) + 1),
                    parse_options=options,
                )
                return table.combine_chunks()
            except CONVERSION_ERRORS as e:
                m = _TYPE_CHANGED.search(str(e))
                names = [f.name for f in self.fields]
                if m is None or m.group(1) not in names or m.group(1) in self._relaxed:
                    return None
                self._relaxed.add(m.group(1))

    def _convert(self, changes: _Changes) -> _Changes:
        """Row fields read as text (relaxed ones, timestamps) cast to their columns' types."""
        texts = [
            k for k, f in enumerate(self.fields)
            if pa.types.is_string(changes.columns[k].type) and not pa.types.is_string(f.type)
        ]
        if not texts:
            return changes
        converted, bad = convert_columns(
            [changes.columns[k] for k in texts], [self.fields[k] for k in texts], not self.ignore_errors, "field"
        )
        for row, reason in bad.items():
            changes.bad.setdefault(int(changes.lines[row]), reason)
        if bad and not self.ignore_errors:
            converted = [pa.nulls(len(changes.lines), self.fields[k].type) for k in texts]
        for k, arr in zip(texts, converted, strict=True):
            changes.columns[k] = arr
        return changes

    def _line_by_line(self, lines: list[bytes], base: int) -> _Changes:
        """Slow path: Python's json per line; exact reasons for malformed lines."""
        texts: list[list[str | None]] = [[] for _ in self.fields]
        line_of: list[int] = []
        order: list[int] = []
        kinds: list[int] = []
        bad: dict[int, str] = {}
        for k, line in enumerate(lines):
            try:
                doc = _parse(line)
                changes = self._python(doc)
                values = [[_scalar_text(row.get(f.name), f) for f in self.fields] for _, row in changes]
            except ValueError as e:
                bad[base + k] = str(e)
                continue
            for pos, ((kind, _), row_values) in enumerate(zip(changes, values, strict=True)):
                line_of.append(base + k)
                order.append(pos)
                kinds.append(kind)
                for c, v in enumerate(row_values):
                    texts[c].append(v)
        converted, value_bad = convert_columns(
            [pa.array(t, pa.string()) for t in texts], self.fields, not self.ignore_errors, "field"
        )
        for row, reason in value_bad.items():
            bad.setdefault(line_of[row], reason)
        if value_bad and not self.ignore_errors:
            converted = [pa.nulls(len(line_of), f.type) for f in self.fields]
        return _Changes(
            converted,
            np.array(line_of, dtype=np.int64),
            np.array(order, dtype=np.int64),
            np.array(kinds, dtype=np.int8),
            bad,
        )

    # -- encoding ------------------------------------------------------

    def encode_lines(self, batch: pa.RecordBatch) -> pa.Array:
        rows, kinds = split_row_kinds(batch)
        objects = self._rows.encode_lines(rows)
        if kinds is None:
            additions = pa.array(np.ones(batch.num_rows, dtype=bool))
        else:
            additions = pc.is_in(kinds, pa.array([_INSERT, _UPDATE_AFTER], pa.int8()))
        return self._envelope_text(objects, additions)

    def _envelope_text(self, objects: pa.Array, additions: pa.Array) -> pa.Array:
        """Each row object in its event: an addition (+I/+U) or a deletion (-U/-D)."""
        raise NotImplementedError


class DebeziumJsonFormat(_ChangelogJsonFormat):
    """Debezium change events; see the module docstring."""

    name = "debezium-json"
    extension = "json"
    label = "Debezium"
    OPTIONS = _options(
        "debezium-json",
        Option(
            "debezium-json.schema-include",
            "bool",
            default=False,
            description="the events are Kafka Connect's {\"schema\": .., \"payload\": ..} (read only)",
        ),
    )

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        super().__init__(schema, options, columns, table)
        self.schema_include = bool(options.get("debezium-json.schema-include") or False)

    def _envelope(self, row: pa.DataType) -> list[pa.Field]:
        fields = [pa.field("before", row), pa.field("after", row), pa.field("op", pa.string())]
        return [pa.field("payload", pa.struct(fields))] if self.schema_include else fields

    def _vectorized(self, table: pa.Table, lines: pa.Array) -> _Changes:
        env = table
        bad: dict[int, str] = {}
        if self.schema_include:
            payload = _col(table, "payload")
            env = pa.Table.from_arrays(payload.flatten(), names=[f.name for f in payload.type])
            for k in np.flatnonzero(~_np(payload.is_valid())):
                bad[int(k)] = 'the message has no "payload" (\'debezium-json.schema-include\' is true)'
        op = pc.fill_null(_col(env, "op"), "")
        before, after = _col(env, "before"), _col(env, "after")
        n = len(op)
        is_insert = _np(pc.is_in(op, pa.array(["c", "r"])))
        is_update = _np(pc.equal(op, "u"))
        is_delete = _np(pc.equal(op, "d"))
        has_before, has_after = _np(before.is_valid()), _np(after.is_valid())
        for k in np.flatnonzero(~(is_insert | is_update | is_delete)):
            bad.setdefault(int(k), self._unknown_op(lines[k].as_py(), op[k].as_py()))
        for k in np.flatnonzero((is_update | is_delete) & ~has_before):
            bad.setdefault(int(k), _replica_identity("UPDATE" if is_update[k] else "DELETE"))
        for k in np.flatnonzero((is_insert | is_update) & ~has_after):
            bad.setdefault(int(k), f'the "after" field of an "{op[k].as_py()}" message is null')
        lines_n = np.arange(n, dtype=np.int64)
        parts = [
            _part(before, is_update, lines_n, 0, _UPDATE_BEFORE, self.fields),
            _part(before, is_delete, lines_n, 0, _DELETE, self.fields),
            _part(after, is_insert, lines_n, 1, _INSERT, self.fields),
            _part(after, is_update, lines_n, 1, _UPDATE_AFTER, self.fields),
        ]
        out = _concat(parts, len(self.fields))
        out.bad = bad
        return out

    def _unknown_op(self, line: bytes, op: str) -> str:
        if not self.schema_include and b'"payload"' in line:
            return ('no "op" in the message, which has a "payload": set \'debezium-json.schema-include\' = '
                    "'true' for Kafka Connect's schema envelope")
        return f'Unknown "op" value "{op or "null"}"'

    def _python(self, doc: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        if self.schema_include:
            doc = doc.get("payload")  # type: ignore[assignment]
            if not isinstance(doc, dict):
                raise ValueError('the message has no "payload" (\'debezium-json.schema-include\' is true)')
        op = doc.get("op")
        before, after = _object(doc, "before"), _object(doc, "after")
        if op in ("c", "r"):
            if after is None:
                raise ValueError(f'the "after" field of an "{op}" message is null')
            return [(_INSERT, after)]
        if op == "u":
            if before is None:
                raise ValueError(_replica_identity("UPDATE"))
            if after is None:
                raise ValueError('the "after" field of an "u" message is null')
            return [(_UPDATE_BEFORE, before), (_UPDATE_AFTER, after)]
        if op == "d":
            if before is None:
                raise ValueError(_replica_identity("DELETE"))
            return [(_DELETE, before)]
        if op is None and not self.schema_include and "payload" in doc:
            raise ValueError(self._unknown_op(b'"payload"', ""))
        raise ValueError(f'Unknown "op" value "{op if op is not None else "null"}"')

    def encode_lines(self, batch: pa.RecordBatch) -> pa.Array:
        if self.schema_include:
            raise ConnectorError(
                f"table '{self.table}': Debezium JSON serialization doesn't support "
                "'debezium-json.schema-include' option been set to true."
            )
        return super().encode_lines(batch)

    def _envelope_text(self, objects: pa.Array, additions: pa.Array) -> pa.Array:
        created = pc.binary_join_element_wise('{"before":null,"after":', objects, ',"op":"c"}', "")
        deleted = pc.binary_join_element_wise('{"before":', objects, ',"after":null,"op":"d"}', "")
        return pc.if_else(additions, created, deleted)


class _DataOldFormat(_ChangelogJsonFormat):
    """Canal and Maxwell: "type" names the change, "data" holds rows, "old" an update's changed fields."""

    insert: ClassVar[str] = ""
    update: ClassVar[str] = ""
    delete: ClassVar[str] = ""
    skipped: ClassVar[tuple[str, ...]] = ()
    many: ClassVar[bool] = False  # "data"/"old" are arrays of rows (Canal) or one row (Maxwell)

    def __init__(
        self,
        schema: pa.Schema,
        options: Mapping[str, Any],
        columns: Sequence[str] | None,
        table: str,
    ) -> None:
        super().__init__(schema, options, columns, table)
        self.includes: list[tuple[str, str]] = []
        for what in ("database", "table"):
            pattern = options.get(f"{self.name}.{what}.include")
            if pattern:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ConnectorError(
                        f"table '{table}': option '{self.name}.{what}.include' = '{pattern}' is not a valid "
                        f"regular expression: {e}"
                    ) from None
                self.includes.append((what, pattern))

    def _envelope(self, row: pa.DataType) -> list[pa.Field]:
        rows = pa.list_(row) if self.many else row
        return [
            pa.field("data", rows),
            pa.field("old", rows),
            pa.field("type", pa.string()),
            pa.field("database", pa.string()),
            pa.field("table", pa.string()),
        ]

    def _vectorized(self, table: pa.Table, lines: pa.Array) -> _Changes:
        n = table.num_rows
        kind = pc.fill_null(_col(table, "type"), "")
        wanted = np.ones(n, dtype=bool)
        for what, pattern in self.includes:
            matches = pc.fill_null(pc.match_substring_regex(_col(table, what), f"^(?:{pattern})$"), False)
            wanted &= _np(matches)
        is_insert = wanted & _np(pc.equal(kind, self.insert))
        is_update = wanted & _np(pc.equal(kind, self.update))
        is_delete = wanted & _np(pc.equal(kind, self.delete))
        known = is_insert | is_update | is_delete | _np(pc.is_in(kind, pa.array(list(self.skipped), pa.string())))
        data, old = _col(table, "data"), _col(table, "old")
        bad: dict[int, str] = {}
        for k in np.flatnonzero(wanted & ~known):
            bad[int(k)] = f'Unknown "type" value "{kind[k].as_py() or "null"}"'
        changing = is_insert | is_update | is_delete
        for k in np.flatnonzero(changing & ~_np(data.is_valid())):
            bad[int(k)] = 'the "data" field is null'
        for k in np.flatnonzero(is_update & ~_np(old.is_valid())):
            bad.setdefault(int(k), 'the "old" field of an update is null')
        if self.many:
            too_few = is_update & (
                _np(pc.fill_null(pc.list_value_length(old), 0)) < _np(pc.fill_null(pc.list_value_length(data), 0))
            )
            for k in np.flatnonzero(too_few):
                bad.setdefault(int(k), 'the "old" field has fewer rows than the "data" field')
        usable = changing & ~np.isin(np.arange(n), np.fromiter(bad, dtype=np.int64))
        rows, line_of, position = self._rows_of(data, usable)
        kinds_of_line = np.where(is_insert, _INSERT, np.where(is_update, _UPDATE_AFTER, _DELETE)).astype(np.int8)
        after = _Changes(
            _columns(rows, self.fields), line_of, position * 2 + 1, kinds_of_line[line_of], {}
        )
        updated = np.flatnonzero(is_update[line_of])
        before = self._before(rows, old, lines, line_of, position, updated)
        out = _concat([after, before], len(self.fields))
        out.bad = bad
        return out

    def _rows_of(self, data: pa.Array, usable: np.ndarray) -> tuple[pa.StructArray, np.ndarray, np.ndarray]:
        """The rows of the usable lines' "data", with their line and position in it."""
        if not self.many:
            line_of = np.flatnonzero(usable)
            return data.take(pa.array(line_of, pa.int64())), line_of, np.zeros(len(line_of), dtype=np.int64)
        lists = data.filter(pa.array(usable))
        lines_kept = np.flatnonzero(usable)
        flat = pc.list_flatten(lists)
        if len(flat) == 0:
            return flat, np.zeros(0, np.int64), np.zeros(0, np.int64)
        parents = _np(pc.list_parent_indices(lists)).astype(np.int64)
        offsets = _np(lists.offsets).astype(np.int64)  # of the filtered array: they may not start at 0
        position = np.arange(len(flat), dtype=np.int64) + offsets[0] - offsets[parents]
        return flat, lines_kept[parents], position

    def _before(
        self,
        rows: pa.StructArray,
        old: pa.Array,
        lines: pa.Array,
        line_of: np.ndarray,
        position: np.ndarray,
        updated: np.ndarray,
    ) -> _Changes:
        """The before rows of updates: the data row with the fields listed in "old" replaced."""
        idx = pa.array(updated, pa.int64())
        after_rows = rows.take(idx)
        update_lines = line_of[updated]
        if self.many:
            starts = _np(old.offsets).astype(np.int64)
            olds = old.values.take(pa.array(starts[update_lines] + position[updated], pa.int64()))
        else:
            olds = old.take(pa.array(update_lines, pa.int64()))
        raw = lines.take(pa.array(update_lines, pa.int64()))
        columns = []
        for f, new in zip(self.fields, _columns(after_rows, self.fields), strict=True):
            previous = olds.field(f.name)
            # as Flink: a field null in the old row and named nowhere in "old" did not change
            listed = pc.match_substring_regex(raw, self._listed(f.name))
            keep_new = pc.and_(pc.is_null(previous), pc.invert(listed))
            columns.append(pc.if_else(keep_new, new, previous))
        kinds = np.full(len(updated), _UPDATE_BEFORE, dtype=np.int8)
        return _Changes(columns, update_lines, position[updated] * 2, kinds, {})

    def _listed(self, field: str) -> str:
        key = re.escape(pyjson.dumps(field)[1:-1])
        inside = r"\[[^\]]*" if self.many else r"\{[^}]*"
        return rf'"old"\s*:\s*{inside}"{key}"\s*:'

    def _python(self, doc: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        for what, pattern in self.includes:
            value = doc.get(what)
            if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
                return []
        kind = doc.get("type")
        if kind in self.skipped:
            return []
        if kind not in (self.insert, self.update, self.delete):
            raise ValueError(f'Unknown "type" value "{kind if kind is not None else "null"}"')
        data = self._rows_list(doc, "data")
        if data is None:
            raise ValueError('the "data" field is null')
        if kind == self.insert:
            return [(_INSERT, row) for row in data]
        if kind == self.delete:
            return [(_DELETE, row) for row in data]
        old = self._rows_list(doc, "old")
        if old is None:
            raise ValueError('the "old" field of an update is null')
        if len(old) < len(data):
            raise ValueError('the "old" field has fewer rows than the "data" field')
        # As Flink: a field null in the old row and named nowhere in "old" did not change.
        listed = {name for o in old for name in o}
        out: list[tuple[int, dict[str, Any]]] = []
        for row, changed in zip(data, old, strict=False):
            before = {
                f.name: row.get(f.name) if changed.get(f.name) is None and f.name not in listed else changed.get(f.name)
                for f in self.fields
            }
            out += [(_UPDATE_BEFORE, before), (_UPDATE_AFTER, row)]
        return out

    def _rows_list(self, doc: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
        value = doc.get(key)
        if value is None:
            return None
        rows = value if self.many else [value]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f'the "{key}" field is not {"an array of objects" if self.many else "an object"}')
        return rows


class CanalJsonFormat(_DataOldFormat):
    """Canal change events; see the module docstring."""

    name = "canal-json"
    extension = "json"
    label = "Canal"
    insert, update, delete = "INSERT", "UPDATE", "DELETE"
    skipped = ("CREATE",)
    many = True
    OPTIONS = _options(
        "canal-json",
        Option("canal-json.database.include", description="read only events of databases matching this regex"),
        Option("canal-json.table.include", description="read only events of tables matching this regex"),
    )

    def _envelope_text(self, objects: pa.Array, additions: pa.Array) -> pa.Array:
        kind = pc.if_else(additions, "INSERT", "DELETE")
        return pc.binary_join_element_wise('{"data":[', objects, '],"type":"', kind, '"}', "")


class MaxwellJsonFormat(_DataOldFormat):
    """Maxwell change events; see the module docstring."""

    name = "maxwell-json"
    extension = "json"
    label = "Maxwell"
    insert, update, delete = "insert", "update", "delete"
    OPTIONS = _options("maxwell-json")

    def _envelope_text(self, objects: pa.Array, additions: pa.Array) -> pa.Array:
        kind = pc.if_else(additions, "insert", "delete")
        return pc.binary_join_element_wise('{"data":', objects, ',"type":"', kind, '"}', "")


# ---------------------------------------------------------------------------
# helpers


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _np(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def _col(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    if col.num_chunks == 0:
        return pa.array([], col.type)
    return col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)


def _columns(rows: pa.StructArray, fields: Sequence[pa.Field]) -> list[pa.Array]:
    return [rows.field(f.name) for f in fields]


def _part(rows: pa.StructArray, mask: np.ndarray, lines: np.ndarray, order: int, kind: int,
          fields: Sequence[pa.Field]) -> _Changes:
    """The rows of ``rows`` where ``mask``, all of one kind and one place in their line."""
    picked = np.flatnonzero(mask)
    taken = rows.take(pa.array(picked, pa.int64()))
    return _Changes(
        _columns(taken, fields),
        lines[picked],
        np.full(len(picked), order, dtype=np.int64),
        np.full(len(picked), kind, dtype=np.int8),
        {},
    )


def _concat(parts: Sequence[_Changes], width: int) -> _Changes:
    bad: dict[int, str] = {}
    for p in parts:
        bad.update(p.bad)
    columns = [pa.concat_arrays([p.columns[k] for p in parts]) for k in range(width)] if parts else []
    return _Changes(
        columns,
        np.concatenate([p.lines for p in parts]) if parts else np.zeros(0, np.int64),
        np.concatenate([p.order for p in parts]) if parts else np.zeros(0, np.int64),
        np.concatenate([p.kinds for p in parts]) if parts else np.zeros(0, np.int8),
        bad,
    )


def _take(changes: _Changes, indexes: np.ndarray) -> _Changes:
    idx = pa.array(indexes, pa.int64())
    return _Changes(
        [c.take(idx) for c in changes.columns],
        changes.lines[indexes],
        changes.order[indexes],
        changes.kinds[indexes],
        changes.bad,
    )


def _parse(line: bytes) -> dict[str, Any]:
    try:
        doc = pyjson.loads(line)
    except UnicodeDecodeError as e:
        raise ValueError(f"invalid UTF-8: {e.reason}") from None
    except pyjson.JSONDecodeError as e:
        raise ValueError(f"{e.msg} at column {e.colno}") from None
    if not isinstance(doc, dict):
        raise ValueError("expected a JSON object")
    return doc


def _object(doc: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, dict):
        raise ValueError(f'the "{key}" field is not an object')
    return value


def _replica_identity(what: str) -> str:
    return (
        f'The "before" field of {what} message is null, if you are using Debezium Postgres Connector, '
        "please check the Postgres table has been set REPLICA IDENTITY to FULL level."
    )
