"""The delta sink: one Delta commit per checkpoint, an append or a MERGE by key (see the package docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SinkContext
from sqlstream.runtime.connectors.delta.options import DeltaOptions
from sqlstream.runtime.connectors.lakehouse import (
    KIND_COLUMN,
    StagedLakeSink,
    column_names,
    last_row_per_key,
    to_target,
)
from sqlstream.runtime.elements import RowKind

if TYPE_CHECKING:  # deltalake is the optional 'delta' extra: imported where it is used
    from deltalake import CommitProperties, DeltaTable

_MAX_COMMIT_RETRIES = 25  # concurrent subtasks commit to the same log; appends never conflict
_MERGE_ATTEMPTS = 25


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaSink(StagedLakeSink):
    """Appends (no PRIMARY KEY) or merges by the PRIMARY KEY; one Delta version per checkpoint and subtask."""

    def __init__(self, ctx: SinkContext) -> None:
        super().__init__(ctx, tuple(ctx.table.primary_key))
        self._path = DeltaOptions.from_options(ctx.options, ctx.table.name).table_path
        self._columns: list[str] = []  # the Delta columns written, in ctx.schema order

    def _describe(self) -> str:
        return f"Delta table '{self._path}'"

    def _open_table(self) -> str:
        from deltalake import DeltaTable

        try:
            dt = DeltaTable.create(self._path, schema=self._ctx.schema, mode="ignore")
        except Exception as e:  # noqa: BLE001 - delta-rs raises a bare Exception for what it cannot store
            if not DeltaTable.is_deltatable(self._path):
                raise ConnectorError(f"table '{self._table}': cannot create {self._describe()}: {e}") from None
            dt = DeltaTable(self._path)  # another sink subtask created it first
        target = pa.schema(dt.schema().to_arrow())
        self._columns = column_names(self._ctx.schema.names, target.names, self._table, self._describe())
        return dt.table_uri

    def _load(self) -> DeltaTable:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self._path)
        except TableNotFoundError:
            raise ConnectorError(f"table '{self._table}': {self._describe()} does not exist") from None

    def _committed_checkpoint(self, app: str) -> int | None:
        return self._load().transaction_version(app)

    def _commit_rows(self, rows: pa.Table, app: str, checkpoint_id: int) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError, DeltaError

        props = CommitProperties(
            custom_metadata={"sqlstream.app-id": app, "sqlstream.checkpoint-id": str(checkpoint_id)},
            max_commit_retries=_MAX_COMMIT_RETRIES,
            app_transactions=[Transaction(app, checkpoint_id)],
        )
        for attempt in range(_MERGE_ATTEMPTS):
            try:
                if self._keys:
                    self._merge(rows, props)
                else:
                    target = pa.schema(self._load().schema().to_arrow())
                    data = to_target(rows.columns, self._columns, target, self._table, self._describe())
                    write_deltalake(self._path, data, mode="append", commit_properties=props)
                return
            except CommitFailedError as e:
                # a MERGE conflicts with any concurrent commit (delta-rs retries only appends): run it
                # again on the new version; the failed attempt committed nothing
                if attempt + 1 == _MERGE_ATTEMPTS:
                    raise ConnectorError(
                        f"table '{self._table}': committing to {self._describe()} failed {_MERGE_ATTEMPTS} times: {e}"
                    ) from None
            except DeltaError as e:
                raise ConnectorError(f"table '{self._table}': committing to {self._describe()} failed: {e}") from None

    def _merge(self, rows: pa.Table, props: CommitProperties) -> None:
        """MERGE the checkpoint's last change per key: -D deletes the key's row, +I/+U insert or replace it."""
        dt = self._load()
        target = pa.schema(dt.schema().to_arrow())
        changes = last_row_per_key(rows, list(self._ctx.schema.names[i] for i in self._key_indexes()))
        data = to_target(changes.columns[:-1], self._columns, target, self._table, self._describe())
        source = data.append_column(KIND_COLUMN, changes[KIND_COLUMN])
        keys = [self._columns[i] for i in self._key_indexes()]
        on = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in keys)
        deleted = f"s.{_quoted(KIND_COLUMN)} = {int(RowKind.DELETE)}"
        kept = f"s.{_quoted(KIND_COLUMN)} <> {int(RowKind.DELETE)}"
        values = {_quoted(c): f"s.{_quoted(c)}" for c in self._columns}
        (
            dt.merge(source, on, source_alias="s", target_alias="t", commit_properties=props)
            .when_matched_delete(deleted)
            .when_matched_update(values, kept)
            .when_not_matched_insert(values, kept)
            .execute()
        )
