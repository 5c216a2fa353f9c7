"""The iceberg sink: one Iceberg snapshot per checkpoint, appending (see the package docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

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
from sqlstream.runtime.connectors.lakehouse import StagedLakeSink, column_names, to_target

if TYPE_CHECKING:  # pyiceberg is the optional 'iceberg' extra: imported where it is used
    from pyiceberg.table import Table

APP_ID = "sqlstream.app-id"
CHECKPOINT_ID = "sqlstream.checkpoint-id"
_COMMIT_ATTEMPTS = 25  # concurrent subtasks commit to the same table: a lost race is retried on the new state


class IcebergSink(StagedLakeSink):
    """Appends an insert-only stream; one snapshot per checkpoint and subtask."""

    def __init__(self, ctx: SinkContext) -> None:
        super().__init__(ctx, ())
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
        from pyiceberg.exceptions import CommitFailedException

        properties = {APP_ID: app, CHECKPOINT_ID: str(checkpoint_id)}
        for attempt in range(_COMMIT_ATTEMPTS):
            table = self._load()
            data = to_target(rows.columns, self._columns, table.schema().as_arrow(), self._table, self._describe())
            try:
                table.append(data, snapshot_properties=properties)
                return
            except CommitFailedException as e:
                if attempt + 1 == _COMMIT_ATTEMPTS:
                    raise ConnectorError(
                        f"table '{self._table}': committing to {self._describe()} failed {_COMMIT_ATTEMPTS} times: {e}"
                    ) from None
            except ValueError as e:
                raise ConnectorError(f"table '{self._table}': committing to {self._describe()} failed: {e}") from None
