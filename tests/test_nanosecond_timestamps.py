"""TIMESTAMP(9) values reach users whole, with or without pandas beside pyarrow.

Python's datetime stops at microseconds and pyarrow gives a nanosecond value to Python only through
pandas, which sqlstream does not depend on (and keeps pyarrow from loading: core.pandas_deferral).
"""

from __future__ import annotations

import datetime as dt
import io

import pyarrow as pa

from sqlstream import EnvironmentSettings, TableEnvironment
from sqlstream.core.expressions import Cast, Literal
from sqlstream.core.types import parse_type
from sqlstream.frontend.tableau import TableauPrinter
from sqlstream.planner.optimizer.constant_folding import fold

NANOS = "2024-01-01 00:00:00.123456789"


def test_the_sql_client_table_prints_all_nine_digits() -> None:
    out = io.StringIO()
    column = pa.array([1704067200123456789, None], pa.timestamp("ns"))
    printer = TableauPrinter(pa.schema([("t", column.type)]), out)
    printer.write(pa.record_batch([column], names=["t"]), None)
    assert f"| {NANOS} |" in out.getvalue()
    assert "<NULL>" in out.getvalue()


def test_collect_gives_a_datetime_cut_to_microseconds_as_pyflink() -> None:
    for settings in (EnvironmentSettings.in_batch_mode(), EnvironmentSettings.in_streaming_mode()):
        env = TableEnvironment.create(settings)
        result = env.execute_sql(f"SELECT CAST(s AS TIMESTAMP(9)) AS t FROM (VALUES ('{NANOS}')) AS v(s)")
        with result.collect() as rows:
            assert [r[0] for r in rows] == [dt.datetime(2024, 1, 1, 0, 0, 0, 123456)]


def test_a_constant_with_nanoseconds_is_left_to_run_time_not_folded_into_a_python_value() -> None:
    cast = Cast(Literal(NANOS, pa.string()), parse_type("TIMESTAMP(9)"))
    assert fold(cast) == cast
    micros = Cast(Literal("2024-01-01 00:00:00.123456", pa.string()), parse_type("TIMESTAMP(9)"))
    assert isinstance(fold(micros), Literal)
