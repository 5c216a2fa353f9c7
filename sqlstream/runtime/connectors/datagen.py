"""The 'datagen' connector: generated rows, following Flink's datagen connector.

Per column, ``fields.<col>.kind`` is 'random' (default) or 'sequence'.  Random
values are a pure function of (seed, column, row index): each is derived from
a splitmix64 hash of the row index, computed for a whole batch at once with
numpy.  So a reader restored from ``snapshot_position`` (which records the
seed, the start time and the rows already returned) replays exactly the rows
that follow, whatever the batch sizes were.

Random timestamps are "the row's nominal emission time minus a random
duration up to max-past": row r of a subtask producing R rows per second is
nominally emitted at start + r / R seconds.  Like wall-clock "now" in Flink
this advances as rows are produced (so event-time windows fire), but it is
reproducible.  Times are UTC.
"""

from __future__ import annotations

import difflib
import math
import secrets
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.connectors import Option
from sqlstream.core.durations import parse_duration_ms
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.connectors.base import Connector, SourceContext, SourceReader
from sqlstream.runtime.connectors.throttle import Throttle

FIELD_OPTIONS = ("kind", "min", "max", "length", "start", "end", "max-past", "null-rate")
_DEFAULT_STRING_LENGTH = 100
_MASK64 = (1 << 64) - 1
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class FieldSpec:
    """How one column is generated (validated and typed)."""

    name: str
    index: int  # position among the physical columns: keys this column's random stream
    type: pa.DataType
    kind: str = "random"
    min: Any = None
    max: Any = None
    length: int = _DEFAULT_STRING_LENGTH
    start: Any = None
    end: Any = None
    max_past_ms: int = 0
    null_rate: float = 0.0


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _supported(t: pa.DataType) -> bool:
    return (
        _is_number(t)
        or _is_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
    )


def _decimal_max(t: pa.DataType) -> Decimal:
    return (Decimal(10) ** (t.precision - t.scale)) - (Decimal(10) ** -t.scale)


def _number(t: pa.DataType, raw: str, key: str, table: str, integral: bool = False) -> Any:
    """An option value as a number fitting ``t`` (int, float or Decimal); ConnectorError otherwise."""
    try:
        value = Decimal(raw.strip())
        if not value.is_finite():
            raise InvalidOperation
    except InvalidOperation:
        raise ConnectorError(f"table '{table}': option '{key}' = '{raw}' is not a number") from None
    if pa.types.is_integer(t) or integral:
        if value != value.to_integral_value():
            raise ConnectorError(f"table '{table}': option '{key}' = '{raw}' must be an integer")
        number = int(value)
        if pa.types.is_integer(t):
            lo, hi = _int_range(t)
            if not lo <= number <= hi:
                raise ConnectorError(
                    f"table '{table}': option '{key}' = '{raw}' is out of range for {sql_type_name(t)}"
                )
        return number
    if pa.types.is_decimal(t):
        if abs(value) > _decimal_max(t):
            raise ConnectorError(
                f"table '{table}': option '{key}' = '{raw}' is out of range for {sql_type_name(t)}"
            )
        return value
    return float(value)


def parse_field_specs(table: TableDef, given: dict[str, str]) -> list[FieldSpec]:
    """Every physical column's generator, from the ``fields.<col>.<option>`` options."""
    columns = {c.name: c for c in table.physical_columns}
    raw: dict[str, dict[str, str]] = {}
    for key, value in given.items():
        if not key.startswith("fields."):
            continue
        rest = key[len("fields.") :]
        col, _, opt = rest.rpartition(".")
        if not col:
            raise ConnectorError(
                f"table '{table.name}': option '{key}' must be 'fields.<column>.<option>'"
            )
        if col not in columns:
            close = difflib.get_close_matches(col, list(columns), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConnectorError(
                f"table '{table.name}': option '{key}' refers to unknown column '{col}'.{hint}"
            )
        if opt not in FIELD_OPTIONS:
            close = difflib.get_close_matches(opt, FIELD_OPTIONS, n=1)
            hint = f" Did you mean 'fields.{col}.{close[0]}'?" if close else ""
            raise ConnectorError(
                f"table '{table.name}': unknown option '{key}' for column '{col}'.{hint} "
                f"Field options: {', '.join(FIELD_OPTIONS)}"
            )
        raw.setdefault(col, {})[opt] = value
    specs = []
    for index, c in enumerate(table.physical_columns):
        specs.append(_field_spec(table.name, index, c.name, c.type, raw.get(c.name, {})))
    return specs


def _field_spec(table: str, index: int, name: str, t: pa.DataType, opts: dict[str, str]) -> FieldSpec:
    def key(opt: str) -> str:
        return f"fields.{name}.{opt}"

    def reject(opt: str, why: str) -> None:
        if opt in opts:
            raise ConnectorError(f"table '{table}': option '{key(opt)}' {why} (column '{name}')")

    if not _supported(t):
        raise ConnectorError(
            f"table '{table}': datagen cannot generate column '{name}' of type {sql_type_name(t)}"
        )
    kind = opts.get("kind", "random").strip().lower()
    if kind not in ("random", "sequence"):
        raise ConnectorError(
            f"table '{table}': option '{key('kind')}' = '{opts['kind']}' must be 'random' or 'sequence'"
        )
    null_rate = 0.0
    if "null-rate" in opts:
        try:
            null_rate = float(opts["null-rate"])
        except ValueError:
            null_rate = -1.0
        if not 0.0 <= null_rate <= 1.0:
            raise ConnectorError(
                f"table '{table}': option '{key('null-rate')}' = '{opts['null-rate']}' "
                "must be a number between 0 and 1"
            )
    if kind == "sequence":
        for opt in ("min", "max", "length", "max-past"):
            reject(opt, "only applies to kind 'random'")
        if not (_is_number(t) or _is_string(t)):
            raise ConnectorError(
                f"table '{table}': option '{key('kind')}' = 'sequence' is not supported for column "
                f"'{name}' of type {sql_type_name(t)}"
            )
        for opt in ("start", "end"):
            if opt not in opts:
                raise ConnectorError(
                    f"table '{table}': sequence column '{name}' requires option '{key(opt)}'"
                )
        start = _number(t, opts["start"], key("start"), table, integral=True)
        end = _number(t, opts["end"], key("end"), table, integral=True)
        if start > end:
            raise ConnectorError(
                f"table '{table}': option '{key('start')}' = {opts['start']} is greater than "
                f"'{key('end')}' = {opts['end']}"
            )
        if pa.types.is_decimal(t) and max(abs(start), abs(end)) * 10**t.scale >= 1 << 63:
            raise ConnectorError(f"table '{table}': sequence of column '{name}' is too large for {sql_type_name(t)}")
        return FieldSpec(name, index, t, kind, start=int(start), end=int(end), null_rate=null_rate)
    for opt in ("start", "end"):
        reject(opt, "only applies to kind 'sequence'")
    if not _is_number(t):
        reject("min", f"only applies to numeric columns, not {sql_type_name(t)}")
        reject("max", f"only applies to numeric columns, not {sql_type_name(t)}")
    if not _is_string(t):
        reject("length", f"only applies to string columns, not {sql_type_name(t)}")
    if not (pa.types.is_timestamp(t) or pa.types.is_date32(t)):
        reject("max-past", f"only applies to TIMESTAMP and DATE columns, not {sql_type_name(t)}")
    lo: Any = None
    hi: Any = None
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
    elif pa.types.is_floating(t):
        lo, hi = 0.0, float(np.finfo(np.float32 if t.bit_width == 32 else np.float64).max)
    elif pa.types.is_decimal(t):
        lo, hi = Decimal(0), _decimal_max(t)
    if "min" in opts:
        lo = _number(t, opts["min"], key("min"), table)
    if "max" in opts:
        hi = _number(t, opts["max"], key("max"), table)
    if lo is not None and lo > hi:
        raise ConnectorError(
            f"table '{table}': option '{key('min')}' = {lo} is greater than '{key('max')}' = {hi}"
        )
    length = _DEFAULT_STRING_LENGTH
    if "length" in opts:
        try:
            length = int(opts["length"])
        except ValueError:
            length = -1
        if length < 0:
            raise ConnectorError(
                f"table '{table}': option '{key('length')}' = '{opts['length']}' must be a non-negative integer"
            )
    max_past = 0
    if "max-past" in opts:
        try:
            max_past = parse_duration_ms(opts["max-past"])
        except ValueError as e:
            raise ConnectorError(f"table '{table}': option '{key('max-past')}' is invalid: {e}") from None
    return FieldSpec(name, index, t, kind, lo, hi, length, max_past_ms=max_past, null_rate=null_rate)


def _validate(table: TableDef, given: dict[str, str]) -> None:
    for opt in ("rows-per-second", "number-of-rows"):
        if opt in given and int(given[opt]) < (1 if opt == "rows-per-second" else 0):
            raise ConnectorError(
                f"table '{table.name}': option '{opt}' = '{given[opt]}' must be "
                + ("positive" if opt == "rows-per-second" else "non-negative")
            )
    parse_field_specs(table, given)


# ---------------------------------------------------------------------------
# counter-based randomness


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a bijective, well-mixing hash of uint64 values."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _stream_key(seed: int, stream: int) -> np.uint64:
    k = (seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03 + 0x632BE59BD9B4E019) & _MASK64
    return _mix(np.array([k], dtype=np.uint64))[0]


def _random_u64(seed: int, stream: int, rows: np.ndarray) -> np.ndarray:
    """One uniform uint64 per row index, independent across (seed, stream)."""
    with np.errstate(over="ignore"):
        return _mix(rows * np.uint64(0x9E3779B97F4A7C15) + _stream_key(seed, stream))


def _unit_float(u: np.ndarray) -> np.ndarray:
    """uint64 -> float64 uniform in [0, 1)."""
    return (u >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _bounded_int(u: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """uint64 -> int64 uniform in [lo, hi] (modulo bias is below 2**-40 for spans under 2**24)."""
    span = hi - lo + 1
    with np.errstate(over="ignore"):
        offset = u if span == 1 << 64 else u % np.uint64(span)
        return (offset + np.uint64(lo & _MASK64)).view(np.int64)


def _decimal_array(unscaled: np.ndarray, t: pa.DataType) -> pa.Array:
    """decimal128 values from int64 unscaled values, built directly from the 16-byte layout."""
    words = np.empty((len(unscaled), 2), dtype="<i8")
    words[:, 0] = unscaled
    words[:, 1] = np.where(unscaled < 0, -1, 0)
    return pa.Array.from_buffers(t, len(unscaled), [None, pa.py_buffer(words.tobytes())])


def _hex_strings(seed: int, stream: int, rows: np.ndarray, length: int) -> pa.Array:
    """Random hex strings (like Flink's datagen) of ``length`` chars, 16 chars per hash."""
    n = len(rows)
    if length == 0:
        offsets = np.zeros(n + 1, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"")])
    chunks = math.ceil(length / 16)
    shifts = (np.arange(16, dtype=np.uint64) * np.uint64(4))[None, :]
    nibbles = np.concatenate(
        [(_random_u64(seed, stream + j, rows)[:, None] >> shifts) & np.uint64(15) for j in range(chunks)],
        axis=1,
    )[:, :length]
    data = _HEX[nibbles.astype(np.intp)].tobytes()
    offsets = np.arange(0, (n + 1) * length, length, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    ).cast(pa.string())


# ---------------------------------------------------------------------------
# the reader


def _share(total: int, index: int, parts: int) -> tuple[int, int]:
    """Subtask ``index``'s contiguous [start, end) of ``total`` items split ``parts`` ways."""
    return total * index // parts, total * (index + 1) // parts


class DataGenSource(SourceReader):
    """Generates this subtask's rows; see the module docstring for determinism."""

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        opts = ctx.options
        specs = {s.name: s for s in parse_field_specs(ctx.table, ctx.table.options)}
        self._specs = [specs[c] for c in ctx.columns]
        self._schema = ctx.schema
        p, i = ctx.parallelism, ctx.subtask_index
        self._rate = opts.get("rows-per-second") / p
        self._seed_option: int | None = opts.get("seed")
        limits: list[int] = []
        if opts.get("number-of-rows") is not None:
            lo, hi = _share(opts["number-of-rows"], i, p)
            limits.append(hi - lo)
        # Sequence columns: this subtask's contiguous part of each range.
        self._seq_start: dict[str, int] = {}
        for s in specs.values():
            if s.kind == "sequence":
                lo, hi = _share(s.end - s.start + 1, i, p)
                self._seq_start[s.name] = s.start + lo
                limits.append(hi - lo)
        self._limit: int | None = min(limits) if limits else None
        self.bounded = self._limit is not None
        self._seed: int | None = None
        self._start_ms: int | None = None
        self._rows = 0  # rows returned so far by this subtask
        self._throttle = Throttle(self._rate, ctx.batch_size, ctx.clock)

    def open(self) -> None:
        if self._seed is None:
            self._seed = self._seed_option if self._seed_option is not None else secrets.randbits(63)
        if self._start_ms is None:
            self._start_ms = self._ctx.clock.time_ms()
        self._throttle.start(self._rows)

    @property
    def finished(self) -> bool:
        return self._limit is not None and self._rows >= self._limit

    def read_batch(self) -> pa.RecordBatch | None:
        if self.finished:
            return None
        allowed = self._throttle.wait(self._rows)
        if allowed <= 0:
            return None
        n = min(allowed, self._ctx.batch_size)
        if self._limit is not None:
            n = min(n, self._limit - self._rows)
        batch = self.generate(self._rows, n)
        self._rows += n
        return batch

    def generate(self, first: int, n: int) -> pa.RecordBatch:
        """Rows ``first`` .. ``first + n - 1`` of this subtask (a pure function of the position)."""
        assert self._seed is not None and self._start_ms is not None
        local = np.arange(first, first + n, dtype=np.int64)
        rows = local.astype(np.uint64) * np.uint64(self._ctx.parallelism) + np.uint64(self._ctx.subtask_index)
        arrays = [self._column(s, local, rows) for s in self._specs]
        if not arrays:
            return pa.record_batch([pa.nulls(n)], names=["_"]).select([])
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    def _column(self, s: FieldSpec, local: np.ndarray, rows: np.ndarray) -> pa.Array:
        assert self._seed is not None
        stream = s.index * 1024
        arr = self._values(s, local, rows, stream)
        if s.null_rate > 0:
            nulls = _unit_float(_random_u64(self._seed, stream + 1, rows)) < s.null_rate
            arr = pc.if_else(pa.array(nulls), pa.scalar(None, s.type), arr)
        return arr

    def _values(self, s: FieldSpec, local: np.ndarray, rows: np.ndarray, stream: int) -> pa.Array:
        assert self._seed is not None and self._start_ms is not None
        t = s.type
        seed = self._seed
        if s.kind == "sequence":
            seq = local + self._seq_start[s.name]
            if pa.types.is_decimal(t):
                return _decimal_array(seq * 10**t.scale, t)
            if _is_string(t):
                return pc.cast(pa.array(seq), t)
            return pa.array(seq.astype(t.to_pandas_dtype()), t)
        u = _random_u64(seed, stream, rows)
        if pa.types.is_integer(t):
            return pa.array(_bounded_int(u, s.min, s.max).astype(t.to_pandas_dtype()), t)
        if pa.types.is_floating(t):
            values = s.min + _unit_float(u) * (s.max - s.min)
            return pa.array(values.astype(t.to_pandas_dtype()), t)
        if pa.types.is_decimal(t):
            scale = Decimal(10) ** t.scale
            lo = max(int((s.min * scale).to_integral_value(rounding="ROUND_CEILING")), -(1 << 63))
            hi = min(int((s.max * scale).to_integral_value(rounding="ROUND_FLOOR")), (1 << 63) - 1)
            return _decimal_array(_bounded_int(u, lo, hi), t)
        if pa.types.is_boolean(t):
            return pa.array((u & np.uint64(1)).astype(bool))
        if _is_string(t):
            return _hex_strings(seed, stream + 2, rows, s.length).cast(t)
        # DATE / TIMESTAMP: nominal emission time minus a random past.
        nominal = self._start_ms + (local * (1000.0 / self._rate)).astype(np.int64)
        past = _bounded_int(u, 0, s.max_past_ms) if s.max_past_ms else 0
        ms = nominal - past
        if pa.types.is_date32(t):
            return pa.array((ms // _MS_PER_DAY).astype(np.int32), t)
        factor = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        values = ms // 1000 if factor is None else ms * factor
        return pa.array(values, t)

    def snapshot_position(self) -> Any:
        return {"seed": self._seed, "start_ms": self._start_ms, "rows": self._rows}

    def restore_position(self, position: Any) -> None:
        self._seed = position.get("seed")
        self._start_ms = position.get("start_ms")
        self._rows = int(position.get("rows", 0))


CONNECTOR = Connector(
    "datagen",
    options=(
        Option("rows-per-second", "int", default=10000, description="rows per second over all subtasks"),
        Option("number-of-rows", "int", description="total rows to generate (the source becomes bounded)"),
        Option("seed", "int", description="seed of the random values (default: chosen at start, kept in checkpoints)"),
    ),
    create_source=DataGenSource,
    prefixes=("fields.",),
    validate_extra=_validate,
    description="generated rows: random values or sequences per column",
)
