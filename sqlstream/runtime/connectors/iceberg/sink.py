"""The iceberg sink: one Iceberg commit per checkpoint, appending or applying changes by key (see the package
docstring)."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext
from sqlstream.runtime.connectors.iceberg.catalog import (
    catalog,
    create,
    describe,
    iceberg_schema,
    load,
)
from sqlstream.runtime.connectors.iceberg.options import IcebergOptions
from sqlstream.runtime.connectors.lakehouse import (
    KIND_COLUMN,
    StagedLakeSink,
    column_names,
    last_row_per_key,
    to_target,
)
from sqlstream.runtime.elements import RowKind

if TYPE_CHECKING:  # pyiceberg is the optional 'iceberg' extra: imported where it is used
    from pyiceberg.table import Table

APP_ID = "sqlstream.app-id"
CHECKPOINT_ID = "sqlstream.checkpoint-id"
# one table commit may make several snapshots (a delete, an overwrite, an append): they share this id
COMMIT_ID = "sqlstream.commit-id"
_COMMIT_ATTEMPTS = 25  # concurrent subtasks commit to the same table: a lost race is retried on the new state


class IcebergSink(StagedLakeSink):
    """Appends, or applies a changelog by the PRIMARY KEY; one commit per checkpoint and subtask."""

    def __init__(self, ctx: SinkContext) -> None:
        super().__init__(ctx, tuple(ctx.table.primary_key))
        self._options = IcebergOptions.from_options(ctx.options, ctx.table.name)
        self._catalog = catalog(self._options, ctx.table.name)
        self._columns: list[str] = []

    def _describe(self) -> str:
        return describe(self._options, self._table)

    def _open_table(self) -> str:
        schema = iceberg_schema(self._ctx.schema, tuple(self._ctx.table.primary_key))
        table = create(self._catalog, self._options, self._table, schema)
        names = [f.name for f in table.schema().fields]
        self._columns = column_names(self._ctx.schema.names, names, self._table, self._describe())
        return table.location()

    def _load(self) -> Table:
        return load(self._catalog, self._options, self._table)

    def _committed_checkpoint(self, app: str) -> int | None:
        ids = [int(s.summary[CHECKPOINT_ID]) for s in self._load().metadata.snapshots
               if s.summary is not None and s.summary.get(APP_ID) == app]
        return max(ids, default=None)

    def _commit_rows(self, rows: pa.Table, app: str, checkpoint_id: int) -> None:
        """Append the rows, or (updates, or 'write.upsert.enabled') apply them by key in one transaction."""
        properties = {APP_ID: app, CHECKPOINT_ID: str(checkpoint_id), COMMIT_ID: uuid.uuid4().hex}
        if self._keys and KIND_COLUMN not in rows.column_names:
            # staged by an earlier version, which appended to every iceberg table: inserts
            kinds = pa.repeat(pa.scalar(int(RowKind.INSERT), pa.int8()), rows.num_rows)
            rows = rows.append_column(KIND_COLUMN, kinds)
        if self._keys and (self._options.upsert_enabled or pc.any(pc.not_equal(rows[KIND_COLUMN],
                                                                                 int(RowKind.INSERT))).as_py()):
            self._retried(lambda table: self._apply_changes(table, rows, properties))
            return
        columns = rows.columns[:-1] if self._keys else rows.columns

        def append(table: Table) -> None:
            data = to_target(columns, self._columns, table.schema().as_arrow(), self._table, self._describe())
            table.append(data, snapshot_properties=properties)

        self._retried(append)

    def _apply_changes(self, table: Table, rows: pa.Table, properties: dict[str, str]) -> None:
        """The checkpoint's last change per key: a -D deletes the key's rows, a +I/+U replaces them.

        pyiceberg writes no equality deletes: the transaction deletes the keys' rows copy-on-write (data
        files holding them are rewritten without them), then upserts (pyiceberg's Table.upsert, also
        copy-on-write), so its snapshots, each tagged with the app and checkpoint ids, land together or not.
        """
        from pyiceberg.table.upsert_util import create_match_filter

        keys = [self._columns[i] for i in self._key_indexes()]
        changes = last_row_per_key(rows, [self._ctx.schema.names[i] for i in self._key_indexes()])
        data = to_target(changes.columns[:-1], self._columns, table.schema().as_arrow(), self._table, self._describe())
        deleted = pc.equal(changes[KIND_COLUMN], int(RowKind.DELETE))
        gone = data.filter(deleted).select(keys)
        kept = data.filter(pc.invert(deleted))
        with warnings.catch_warnings():
            # deleting a key the table does not hold (inserted and deleted before it was committed) is fine
            warnings.filterwarnings("ignore", message="Delete operation did not match any records")
            with table.transaction() as tx:
                if gone.num_rows:
                    tx.delete(create_match_filter(gone, keys), snapshot_properties=properties)
                if kept.num_rows:
                    tx.upsert(kept, join_cols=keys, snapshot_properties=properties)

    def _retried(self, commit: Callable[[Table], None]) -> None:
        """``commit`` on the table's current state, again after losing a race with another subtask's commit.

        A lost race is a CommitFailedException, or, for a delete or overwrite, pyiceberg's conflict check
        (ValidationException: data files another commit added since the transaction began may hold rows its
        filter matches); either way nothing was committed, and the next attempt starts from the new state.
        """
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        for attempt in range(_COMMIT_ATTEMPTS):
            try:
                commit(self._load())
                return
            except (CommitFailedException, ValidationException) as e:
                if attempt + 1 == _COMMIT_ATTEMPTS:
                    raise ConnectorError(
                        f"table '{self._table}': committing to {self._describe()} failed {_COMMIT_ATTEMPTS} times: {e}"
                    ) from None
            except ValueError as e:
                raise ConnectorError(f"table '{self._table}': committing to {self._describe()} failed: {e}") from None
