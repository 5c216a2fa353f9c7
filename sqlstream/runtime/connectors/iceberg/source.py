"""The iceberg source: a bounded scan of one snapshot of the table (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SourceContext
from sqlstream.runtime.connectors.iceberg.catalog import catalog, describe, load
from sqlstream.runtime.connectors.iceberg.options import IcebergOptions
from sqlstream.runtime.connectors.lakehouse import LakeScan, column_names


class IcebergSource(LakeScan):
    """Reads this subtask's share (every n-th data file, in path order) of one snapshot."""

    def __init__(self, ctx: SourceContext) -> None:
        super().__init__(ctx)
        self._options = IcebergOptions.from_options(ctx.options, ctx.table.name)

    def _scan(self, version: int | None) -> tuple[int | None, list[str], Iterator[pa.RecordBatch]]:
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan

        table = load(catalog(self._options, self._table), self._options, self._table)
        what = describe(self._options, self._table)
        if version is None:
            version = self._options.snapshot_id
        as_of = self._options.as_of_timestamp
        if version is None and as_of is not None:
            snapshot = table.snapshot_as_of_timestamp(as_of)
            if snapshot is None:
                raise ConnectorError(f"table '{self._table}': {what} has no snapshot at or before {as_of} ms")
            version = snapshot.snapshot_id
        elif version is None:
            current = table.current_snapshot()
            version = None if current is None else current.snapshot_id
        elif table.snapshot_by_id(version) is None:
            raise ConnectorError(f"table '{self._table}': {what} has no snapshot {version}")
        schema = table.schema() if version is None else table.scan(snapshot_id=version).projection()
        available = [f.name for f in schema.fields]
        names = column_names(self._ctx.columns, available, self._table, what)
        if version is None:  # no snapshot yet: the table is empty
            return None, names, iter(())
        scan = table.scan(snapshot_id=version, selected_fields=tuple(dict.fromkeys(names)) or tuple(available[:1]))
        tasks = sorted(scan.plan_files(), key=lambda t: t.file.file_path)
        mine = tasks[self._ctx.subtask_index::self._ctx.parallelism]
        arrow = ArrowScan(table.metadata, table.io, scan.projection(), AlwaysTrue())
        return version, names, arrow.to_record_batches(mine)
