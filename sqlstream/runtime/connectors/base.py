"""What every connector declares and implements.

A connector module defines one :class:`Connector`: its option schema (checked
at ``CREATE TABLE`` time, so a typo fails before the job starts), a source
factory and/or a sink factory.  Sources hand out Arrow record batches and can
report and restore their read position (for checkpoints); sinks receive
chunks and, if transactional, pre-commit on a checkpoint and commit when it
completes.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sqlstream.core.durations import parse_duration_ms
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef


@dataclass(frozen=True)
class Option:
    """One declared connector option; ``type`` is 'string', 'int', 'float', 'bool' or 'duration'."""

    key: str
    type: str = "string"
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | None = None
    description: str = ""

    def convert(self, raw: str, table: str) -> Any:
        try:
            if self.type == "int":
                return int(raw)
            if self.type == "float":
                return float(raw)
            if self.type == "bool":
                if raw.lower() not in ("true", "false"):
                    raise ValueError("expected 'true' or 'false'")
                return raw.lower() == "true"
            if self.type == "duration":
                return parse_duration_ms(raw)
        except ValueError as e:
            raise ConnectorError(
                f"table '{table}': option '{self.key}' = '{raw}' is not a valid {self.type}: {e}"
            ) from None
        if self.choices is not None and raw.lower() not in self.choices:
            raise ConnectorError(
                f"table '{table}': option '{self.key}' = '{raw}' must be one of {', '.join(self.choices)}"
            )
        return raw.lower() if self.choices is not None else raw


# rows per source batch (table.exec.batch-size).  benchmarks/nexmark/run.py --batch-size measured
# q0/q1/q5/q7 1.3-1.5x faster at 32768 than at 8192 (the fixed cost of each Arrow call is
# spread over more rows), for +15 MB peak RSS; throttled and streaming sources emit what they
# have without waiting for a batch to fill, so a larger batch adds no latency.
DEFAULT_BATCH_SIZE = 32768


@dataclass
class SourceContext:
    """What a source subtask is given: its table, the columns to read, its share of the work."""

    table: TableDef
    options: dict[str, Any]  # validated, typed
    columns: list[str]  # physical columns to produce, in this order (projection pushdown)
    subtask_index: int = 0
    parallelism: int = 1
    batch_size: int = DEFAULT_BATCH_SIZE

    @property
    def schema(self) -> pa.Schema:
        full = self.table.physical_schema
        return pa.schema([full.field(c) for c in self.columns])


@dataclass
class LookupContext:
    """What a lookup join asks of a dimension table: rows by key, these columns."""

    table: TableDef
    options: dict[str, Any]
    keys: list[str]  # the table's columns the join condition equates with the probe side
    columns: list[str]  # the columns to return, in this order


# keys (tuples in LookupContext.keys order) -> the matching rows (tuples in .columns order)
LookupFunction = Callable[[list[tuple]], dict[tuple, list[tuple]]]


@dataclass
class SinkContext:
    table: TableDef
    options: dict[str, Any]
    schema: pa.Schema  # the rows the query produces, named as the sink's columns
    subtask_index: int = 0
    parallelism: int = 1
    updating: bool = False  # the input carries -U/+U/-D rows


class SourceReader(ABC):
    """Reads one subtask's share of a table as Arrow batches."""

    bounded: bool = True

    def open(self) -> None:  # noqa: B027 - optional hook
        """Acquire files, connections; called once before the first read."""

    @abstractmethod
    def read_batch(self) -> pa.RecordBatch | None:
        """The next batch, or None if nothing is available right now (unbounded) or at the end."""

    @property
    @abstractmethod
    def finished(self) -> bool:
        """True once a bounded source has returned its last batch."""

    @property
    def current_split(self) -> str | None:
        """The split (file, partition) the last batch came from, for per-split watermarks."""
        return None

    @abstractmethod
    def snapshot_position(self) -> Any:
        """The read position (picklable); replay resumes exactly after the last batch returned."""

    @abstractmethod
    def restore_position(self, position: Any) -> None:
        """Resume from a position returned by snapshot_position (called before open)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""


class SinkWriter(ABC):
    """Writes one subtask's share of the result.

    Exactly-once sinks stage writes and make them visible only in
    :meth:`commit`, which runs after the checkpoint whose id
    :meth:`prepare_commit` received has completed.
    """

    def open(self) -> None:  # noqa: B027 - optional hook
        """Prepare for writing."""

    @abstractmethod
    def write(self, batch: pa.RecordBatch, kinds: pa.Array | None) -> None:
        """Write rows; ``kinds`` holds a RowKind per row for updating streams, else None."""

    def prepare_commit(self, checkpoint_id: int) -> Any:
        """Flush and stage what was written since the last call; return a picklable committable."""
        return None

    def commit(self, committables: list[Any]) -> None:  # noqa: B027 - optional hook
        """Make the staged writes visible (idempotent: may be called again after a restore)."""

    def abort(self, committables: list[Any]) -> None:  # noqa: B027 - optional hook
        """Discard staged writes that will never be committed."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""


@dataclass
class Connector:
    name: str
    options: tuple[Option, ...]
    create_source: Callable[[SourceContext], SourceReader] | None = None
    create_sink: Callable[[SinkContext], SinkWriter] | None = None
    create_lookup: Callable[[LookupContext], LookupFunction] | None = None  # lookup joins
    accepts_updates: bool = False  # sink understands -U/+U/-D
    # option keys matched by prefix (datagen's 'fields.<name>.kind'); checked by validate_extra
    prefixes: tuple[str, ...] = ()
    validate_extra: Callable[[TableDef, dict[str, str]], None] | None = None
    description: str = ""
    _by_key: dict[str, Option] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {o.key: o for o in self.options}
        self._by_key["connector"] = Option("connector", required=True)
        # parallelism of this table's source / sink, independent of parallelism.default (Flink)
        if self.create_source is not None:
            self._by_key.setdefault("scan.parallelism", Option("scan.parallelism", "int"))
        if self.create_sink is not None:
            self._by_key.setdefault("sink.parallelism", Option("sink.parallelism", "int"))

    def validate(self, table: TableDef) -> dict[str, Any]:
        """Check a table's WITH options against the declared schema; return them typed."""
        given = table.options
        typed: dict[str, Any] = {}
        for key, raw in given.items():
            opt = self._by_key.get(key)
            if opt is None:
                if any(key.startswith(p) for p in self.prefixes):
                    continue
                known = sorted(self._by_key)
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise ConnectorError(
                    f"table '{table.name}': unknown option '{key}' for connector '{self.name}'.{hint} "
                    f"Supported options: {', '.join(known)}"
                )
            typed[key] = opt.convert(raw, table.name)
        for key in ("scan.parallelism", "sink.parallelism"):
            if typed.get(key) is not None and typed[key] < 1:
                raise ConnectorError(f"table '{table.name}': option '{key}' must be at least 1")
        for opt in self.options:
            if opt.key not in typed:
                if opt.required:
                    raise ConnectorError(
                        f"table '{table.name}': connector '{self.name}' requires option '{opt.key}'"
                        + (f" ({opt.description})" if opt.description else "")
                    )
                typed[opt.key] = opt.default
        if self.validate_extra is not None:
            self.validate_extra(table, given)
        return typed
