"""The print and blackhole sinks."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.runtime.connectors.base import SinkContext, SinkWriter
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.elements import RowKind

COLUMNS = {"id": "INT", "name": "STRING", "ts": "TIMESTAMP(3)", "price": "DOUBLE",
           "amount": "DECIMAL(6, 2)", "ok": "BOOLEAN", "tags": "ARRAY<STRING>"}


def sink(name: str, options: dict[str, str] | None = None, subtask: int = 0,
         parallelism: int = 1) -> SinkWriter:
    cols = tuple(ColumnDef(n, parse_type(t)) for n, t in COLUMNS.items())
    t = TableDef("out", cols, {"connector": name, **(options or {})})
    connector = get_connector(name)
    writer = connector.create_sink(SinkContext(t, connector.validate(t), t.physical_schema,
                                               subtask, parallelism, updating=True))
    writer.open()
    return writer


def batch() -> pa.RecordBatch:
    schema = pa.schema([(n, parse_type(t)) for n, t in COLUMNS.items()])
    return pa.RecordBatch.from_pylist(
        [
            {"id": 1, "name": "abc", "ts": dt.datetime(2024, 1, 1, 0, 0, 5), "price": 2.0,
             "amount": Decimal("1.50"), "ok": True, "tags": ["x", None]},
            {"id": None, "name": None, "ts": None, "price": None, "amount": None, "ok": None,
             "tags": None},
        ],
        schema=schema,
    )


def test_print_insert_rows(capsys: pytest.CaptureFixture[str]) -> None:
    sink("print").write(batch(), None)
    out = capsys.readouterr()
    assert out.out == (
        "+I[1, abc, 2024-01-01 00:00:05.000, 2.0, 1.50, true, [x, null]]\n"
        "+I[null, null, null, null, null, null, null]\n"
    )
    assert out.err == ""


def test_print_row_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    kinds = pa.array([RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER], pa.int8())
    sink("print").write(batch(), kinds)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("-U[1, abc, ")
    assert lines[1].startswith("+U[null, ")
    sink("print").write(batch().slice(0, 1), pa.array([RowKind.DELETE], pa.int8()))
    assert capsys.readouterr().out.startswith("-D[1, abc")


def test_print_identifier_and_subtask_prefixes(capsys: pytest.CaptureFixture[str]) -> None:
    one = batch().slice(0, 1)
    sink("print", {"print-identifier": "totals"}).write(one, None)
    assert capsys.readouterr().out.startswith("totals> +I[1, abc")
    sink("print", {"print-identifier": "totals"}, subtask=1, parallelism=3).write(one, None)
    assert capsys.readouterr().out.startswith("totals:2> +I[1, abc")
    sink("print", subtask=0, parallelism=2).write(one, pa.array([RowKind.UPDATE_AFTER], pa.int8()))
    assert capsys.readouterr().out.startswith("1> +U[1, abc")


def test_print_to_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    sink("print", {"standard-error": "true"}).write(batch().slice(0, 1), None)
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("+I[1, abc")


def test_print_options_are_validated() -> None:
    assert get_connector("print").accepts_updates
    with pytest.raises(ConnectorError, match="Did you mean 'print-identifier'"):
        sink("print", {"print-identifer": "x"})
    with pytest.raises(ConnectorError, match="'standard-error' = 'yes' is not a valid bool"):
        sink("print", {"standard-error": "yes"})


def test_blackhole_counts_and_discards(capsys: pytest.CaptureFixture[str]) -> None:
    writer = sink("blackhole")
    writer.write(batch(), None)
    writer.write(batch(), pa.array([RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER], pa.int8()))
    assert writer.rows_written == 4  # type: ignore[attr-defined]
    assert writer.prepare_commit(1) is None
    writer.close()
    assert capsys.readouterr().out == ""
    assert get_connector("blackhole").accepts_updates
    with pytest.raises(ConnectorError, match="unknown option 'path' for connector 'blackhole'"):
        sink("blackhole", {"path": "/tmp"})
