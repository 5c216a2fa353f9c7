"""Arrow rows numbered in the order they were added: the storage of the vectorized keyed operators.

The columnar GROUP BY (key values by slot, COUNT(DISTINCT) values) and the
columnar Top-N (kept rows) address their rows by number from numpy index
structures; this keeps them as few Arrow tables and gathers them cheaply.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# tables stop merging at this size: a merge then copies at most this many rows (not the whole
# store, which doubled it for a moment), and a row is copied at most log2(this / batch) times
MAX_TABLE_ROWS = 1 << 18


class NumberedRows:
    """Arrow rows numbered 0, 1, ... in the order they were added: tables over consecutive ranges
    of numbers, merged like a binary counter up to ``MAX_TABLE_ROWS`` (each at least as large as
    the next: few tables, each row copied O(log n) times), and gathered table by table (one take
    over many chunks costs several times more)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.tables: list[pa.Table] = []
        self.starts: list[int] = []
        self.count = 0

    def append(self, table: pa.Table) -> None:
        """Add rows, numbered from ``count`` on (a large table in pieces of ``MAX_TABLE_ROWS``)."""
        for lo in range(0, table.num_rows, MAX_TABLE_ROWS):
            piece = table.slice(lo, MAX_TABLE_ROWS).combine_chunks()
            self.tables.append(piece)
            self.starts.append(self.count)
            self.count += piece.num_rows
            while (len(self.tables) >= 2 and self.tables[-2].num_rows <= self.tables[-1].num_rows
                   and self.tables[-2].num_rows + self.tables[-1].num_rows <= MAX_TABLE_ROWS):
                self.starts.pop()
                _merge_last_two(self.tables)

    def view(self) -> NumberedRows:
        """The rows now, whatever is added later (tables are never changed in place)."""
        rows = NumberedRows(self.schema)
        rows.tables, rows.starts, rows.count = list(self.tables), list(self.starts), self.count
        return rows

    def all(self) -> pa.Table:
        """Every row, in order, as one table."""
        if len(self.tables) == 1:
            return self.tables[0]
        return pa.concat_tables(self.tables).combine_chunks() if self.tables else self.schema.empty_table()

    def reset(self, table: pa.Table) -> None:
        """Keep only these rows, numbered from 0 (compaction)."""
        self.tables, self.starts, self.count = [], [], 0
        if table.num_rows:
            self.append(table)

    def filter(self, mask: np.ndarray) -> pa.Table:
        """The rows whose numbers are set in ``mask`` (one flag per number), in order, as one chunk
        per stored table: filtered table by table and not combined, so that gathering every live
        row (a snapshot, a compaction) holds one copy of them, not two or three."""
        parts = [table.filter(pa.array(mask[start:start + table.num_rows]))
                 for table, start in zip(self.tables, self.starts, strict=True)]
        parts = [t for t in parts if t.num_rows]
        return pa.concat_tables(parts) if parts else self.schema.empty_table()

    def take(self, ids: np.ndarray) -> pa.Table:
        """The rows with these numbers, in their order."""
        starts = np.array(self.starts, np.int64)
        table_of = np.searchsorted(starts, ids, side="right") - 1
        # ids grouped by table already (ascending, as most callers gather) need no reordering,
        # which would copy every gathered row twice more
        grouped = len(ids) < 2 or bool(np.all(table_of[1:] >= table_of[:-1]))
        order = None if grouped else np.argsort(table_of, kind="stable")
        ordered, tables_of = (ids, table_of) if order is None else (ids[order], table_of[order])
        bounds = np.searchsorted(tables_of, np.arange(len(starts) + 1))
        parts = [table.take(pa.array(ordered[lo:hi] - start))
                 for table, start, lo, hi in zip(self.tables, starts, bounds[:-1], bounds[1:], strict=True)
                 if hi > lo]
        if not parts:
            return self.schema.empty_table()
        if len(parts) == 1:  # all from one table: in their order already
            return parts[0]
        gathered = pa.concat_tables(parts).combine_chunks()
        if order is None:
            return gathered
        inverse = np.empty(len(order), np.int64)
        inverse[order] = np.arange(len(order))
        return gathered.take(pa.array(inverse))


def _merge_last_two(tables: list[pa.Table]) -> None:
    """Replace the last two tables by one (one chunk per column), built column by column, each
    source column let go once copied: the merge holds one column of the two twice, not both
    tables.  The tables are popped here so that no caller frame keeps them; a snapshot view may
    (then it frees nothing)."""
    second = tables.pop()
    first = tables.pop()
    schema = first.schema
    columns: list[list[pa.Array] | None] = [[*a.chunks, *b.chunks]
                                            for a, b in zip(first.columns, second.columns, strict=True)]
    del first, second
    merged = []
    for i, field in enumerate(schema):
        chunks = columns[i]
        columns[i] = None
        merged.append(pa.concat_arrays(chunks) if chunks else pa.array([], field.type))
        del chunks
    tables.append(pa.Table.from_arrays(merged, schema=schema))
