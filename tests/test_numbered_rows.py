"""NumberedRows: rows gathered by number, whatever order or table layout they are asked in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.runtime.operators import numbered_rows
from sqlstream.runtime.operators.numbered_rows import NumberedRows

SCHEMA = pa.schema([("n", pa.int64()), ("s", pa.string())])


def _rows(sizes: list[int]) -> NumberedRows:
    """Numbers 0.. appended in tables of these sizes, each row's string naming its number."""
    rows, start = NumberedRows(SCHEMA), 0
    for size in sizes:
        numbers = np.arange(start, start + size)
        rows.append(pa.table({"n": numbers, "s": [f"row {i}" * (i % 3) for i in numbers]}, schema=SCHEMA))
        start += size
    return rows


def test_merged_tables_keep_every_row_under_its_number() -> None:
    rows = _rows([5, 0, 3, 3, 8, 1, 1, 20, 2])
    assert len(rows.tables) < 9  # merged like a binary counter
    assert all(t.column(c).num_chunks == 1 for t in rows.tables for c in range(2))
    assert rows.all().column("n").to_pylist() == list(range(43))
    assert rows.all().column("s").to_pylist() == [f"row {i}" * (i % 3) for i in range(43)]


def test_take_returns_rows_in_the_order_asked_ascending_or_not() -> None:
    rows = _rows([16, 8, 4, 2, 1])
    rng = np.random.default_rng(0)
    for ids in (np.arange(31), np.sort(rng.choice(31, 12, replace=False)), rng.permutation(31)[:17],
                np.array([30, 0, 30, 5]), np.array([], np.int64)):
        got = rows.take(ids)
        assert got.column("n").to_pylist() == ids.tolist()
        assert got.column("s").to_pylist() == [f"row {i}" * (i % 3) for i in ids]


def test_filter_keeps_the_flagged_rows_in_order() -> None:
    rows = _rows([16, 8, 4, 2, 1])
    mask = np.random.default_rng(1).random(31) < 0.4
    assert rows.filter(mask).column("n").to_pylist() == np.flatnonzero(mask).tolist()
    assert rows.filter(np.zeros(31, bool)).num_rows == 0


def test_tables_stop_merging_at_the_cap_and_a_large_append_is_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numbered_rows, "MAX_TABLE_ROWS", 16)
    rows = _rows([5, 7, 3, 40, 6, 6, 6, 6, 9, 1])
    sizes = [t.num_rows for t in rows.tables]
    assert max(sizes) == 16 and sum(sizes) == 89
    assert sizes[2:5] == [16, 16, 8]  # the 40 rows in pieces of the cap
    assert len(sizes) < 12  # of the 12 pieces appended, small neighbours merged
    ids = np.random.default_rng(2).permutation(89)
    assert rows.take(ids).column("n").to_pylist() == ids.tolist()
    assert rows.all().column("s").to_pylist() == [f"row {i}" * (i % 3) for i in range(89)]
