"""The delta source: a bounded scan of one version of the table (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import SourceContext
from sqlstream.runtime.connectors.delta.options import DeltaOptions
from sqlstream.runtime.connectors.lakehouse import LakeScan, column_names


class DeltaSource(LakeScan):
    """Reads this subtask's share (every n-th data file, in path order) of one version of the table."""

    def __init__(self, ctx: SourceContext) -> None:
        super().__init__(ctx)
        self._options = DeltaOptions.from_options(ctx.options, ctx.table.name)

    def _scan(self, version: int | None) -> tuple[int | None, list[str], Iterator[pa.RecordBatch]]:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        path = self._options.table_path
        if version is None:
            version = self._options.version_as_of
        as_of = self._options.as_of_time(self._table) if version is None else None
        try:
            dt = DeltaTable(path, version=version)
            if as_of is not None:
                dt.load_as_version(as_of)
            dataset = dt.to_pyarrow_dataset()
        except TableNotFoundError:
            raise ConnectorError(f"table '{self._table}': Delta table '{path}' does not exist") from None
        except DeltaError as e:
            raise ConnectorError(f"table '{self._table}': cannot read Delta table '{path}': {e}") from None
        names = column_names(self._ctx.columns, dataset.schema.names, self._table, f"Delta table '{path}'")
        fragments = sorted(dataset.get_fragments(), key=lambda f: f.path)
        mine = fragments[self._ctx.subtask_index::self._ctx.parallelism]
        read = sorted(set(names)) or dataset.schema.names[:1]

        def batches() -> Iterator[pa.RecordBatch]:
            for fragment in mine:
                yield from fragment.to_batches(columns=read, schema=dataset.schema)

        return dt.version(), names, batches()
