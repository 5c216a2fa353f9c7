"""Arrow rows numbered in the order they were added: the storage of the vectorized keyed operators.

The columnar GROUP BY (key values by slot, COUNT(DISTINCT) values) and the
columnar Top-N (kept rows) address their rows by number from numpy index
structures; this keeps them as few Arrow tables and gathers them cheaply.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class NumberedRows:
    """Arrow rows numbered 0, 1, ... in the order they were added: tables over consecutive ranges
    of numbers, merged like a binary counter (each at least as large as the next: few tables, each
    row copied O(log n) times), and gathered table by table (one take over many chunks costs
    several times more)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.tables: list[pa.Table] = []
        self.starts: list[int] = []
        self.count = 0

    def append(self, table: pa.Table) -> None:
        """Add rows, numbered from ``count`` on."""
        self.tables.append(table.combine_chunks())
        self.starts.append(self.count)
        self.count += table.num_rows
        while len(self.tables) >= 2 and self.tables[-2].num_rows <= self.tables[-1].num_rows:
            last = self.tables.pop()
            self.starts.pop()
            self.tables[-1] = pa.concat_tables([self.tables[-1], last]).combine_chunks()

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

    def take(self, ids: np.ndarray) -> pa.Table:
        """The rows with these numbers, in their order."""
        starts = np.array(self.starts, np.int64)
        table_of = np.searchsorted(starts, ids, side="right") - 1
        order = np.argsort(table_of, kind="stable")
        bounds = np.searchsorted(table_of[order], np.arange(len(starts) + 1))
        parts = [table.take(pa.array(ids[order[lo:hi]] - start))
                 for table, start, lo, hi in zip(self.tables, starts, bounds[:-1], bounds[1:], strict=True)
                 if hi > lo]
        if not parts:
            return self.schema.empty_table()
        if len(parts) == 1:  # all from one table: in their order already
            return parts[0]
        gathered = pa.concat_tables(parts).combine_chunks()
        inverse = np.empty(len(order), np.int64)
        inverse[order] = np.arange(len(order))
        return gathered.take(pa.array(inverse))
