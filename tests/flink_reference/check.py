"""sqlstream's side of the reference suite: each case run on a fresh Session over the suite's tables,
its answer put in the golden file's form and compared with Flink's (used by the test and triage.py)."""

from __future__ import annotations

import datetime as dt
import re
import tempfile
import threading
import zoneinfo
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from sqlstream.catalog.persistent import parse_statements
from sqlstream.core.sql.script import Statement
from sqlstream.core.types import sql_type_name
from sqlstream.frontend.session import Session
from tests.conftest import apply_changelog
from tests.flink_reference import suite

CASE_TIMEOUT_S = 5  # a job that hangs is cancelled and reported, not left to block the suite
_TIME_ZONE = re.compile(r"^SET\s+'table\.local-time-zone'\s*=\s*'([^']*)'$", re.IGNORECASE)


@cache
def golden(group: str) -> dict[str, dict[str, Any]]:
    return suite.load_golden(group)


@cache
def table_statements() -> list[Statement]:
    """The suite's CREATE TABLEs parsed once (parsing is most of a small case's time), then
    executed by each case's fresh Session."""
    return parse_statements("".join(f"{s};\n" for s in suite.tables_ddl()))


def sqlstream_answer(case: suite.Case, parallelism: int) -> dict[str, Any]:
    """sqlstream's answer in the golden file's form: column names and types and final rows, or error."""
    with tempfile.TemporaryDirectory(prefix="flinkref-") as tmp:  # for the sink tables of {tmp}
        return _answer(case, parallelism, Path(tmp))


def _answer(case: suite.Case, parallelism: int, tmp: Path) -> dict[str, Any]:
    session = Session()
    session.config["parallelism.default"] = str(parallelism)
    statements = case.statements(tmp)
    for statement in table_statements():
        session.execute_statement(statement.node)
    timer = threading.Timer(CASE_TIMEOUT_S, lambda: session.current_executor and session.current_executor.cancel())
    timer.start()
    try:
        results = session.execute_script("".join(f"{s};\n" for s in statements))
    except Exception as e:  # noqa: BLE001 - compared with Flink's refusal
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    finally:
        timer.cancel()
    if any(r.job is not None and r.job.cancelled for r in results):
        return {"error": f"timed out: the job was still running after {CASE_TIMEOUT_S} s and was cancelled"}
    table = results[-1].table
    assert table is not None, f"{case.id}: the last statement must be a query"
    table = apply_changelog(table)
    zone = ([m.group(1) for s in statements if (m := _TIME_ZONE.match(s))] or ["UTC"])[-1]  # the last SET wins
    columns = [[f.name, sql_type_name(f.type)] for f in table.schema]
    rows = list(zip(*(_values(c, f.type, zone) for c, f in zip(table.columns, table.schema, strict=True)),
                    strict=True)) if table.num_columns else []
    # nested values also as plain values, for golden files that hold them so (PyFlink collects
    # an ARRAY whose elements are NOT NULL, e.g. JSON_QUERY's RETURNING ARRAY<STRING>)
    plain = list(zip(*(c.to_pylist() for c in table.columns), strict=True)) if table.num_columns else []
    return {"columns": columns, "rows": [[suite.encode(v) for v in r] for r in rows],
            "plain_rows": [[suite.encode(v) for v in r] for r in plain]}


def _values(column: pa.ChunkedArray, t: pa.DataType, zone: str) -> list[Any]:
    """A column's Python values; TIMESTAMP_LTZ instants as wall-clock time in the session's zone, as
    Flink shows them (and as the recorder collected them); ARRAY, MAP and ROW values as the text
    Flink's CAST to STRING gives (which is what the recorder could collect of them)."""
    values = column.to_pylist()
    if pa.types.is_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        return [None if v is None else suite.Text(flink_text(v, t)) for v in values]
    if pa.types.is_timestamp(t) and t.tz:
        tz = zoneinfo.ZoneInfo(zone)
        return [v.replace(tzinfo=v.tzinfo or dt.UTC).astimezone(tz).replace(tzinfo=None) if v else v for v in values]
    return values


def flink_text(value: Any, t: pa.DataType) -> str:
    """Flink's CAST(value AS STRING) of a (nested) value: [a, NULL], {k=v, ...}, (f1, f2)."""
    if value is None:
        return "NULL"
    if pa.types.is_list(t):
        return "[" + ", ".join(flink_text(v, t.value_type) for v in value) + "]"
    if pa.types.is_map(t):
        return "{" + ", ".join(f"{flink_text(k, t.key_type)}={flink_text(v, t.item_type)}" for k, v in value) + "}"
    if pa.types.is_struct(t):
        return "(" + ", ".join(flink_text(value[f.name], f.type) for f in t) + ")"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def _map_order(row: list[Any], maps: list[bool]) -> list[Any]:
    """MAP (and MULTISET) columns' text with its entries sorted: a map's order is Flink's hash order
    of its keys (a map read from JSON is a hash map of BinaryStringData), sqlstream's the order
    written."""
    return [{"text": _sorted_entries(v["text"])} if flag and isinstance(v, dict) and "text" in v else v
            for v, flag in zip(row, maps, strict=False)]


def _sorted_entries(text: str) -> str:
    """'{b=2, a=1}' as '{a=1, b=2}' (entries split at the top level only)."""
    body, entries, depth, start = text[1:-1], [], 0, 0
    for i, ch in enumerate(body):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if depth == 0 and body.startswith(", ", i):
            entries.append(body[start:i])
            start = i + 2
    if body:
        entries.append(body[start:])
    return "{" + ", ".join(sorted(entries)) + "}"


def _single_precision(row: list[Any], single: list[bool]) -> list[Any]:
    """FLOAT values to the 7 significant digits a 4-byte float holds: PyFlink hands Flink's FLOAT
    over as the shortest decimal text (0.1), Arrow's float32 as its exact binary value (0.100000001)."""
    return [float(f"{v:.7g}") if flag and isinstance(v, float) else v for v, flag in zip(row, single, strict=False)]


def compare(case: suite.Case, parallelism: int) -> str | None:
    """Why sqlstream's answer differs from Flink's recorded one, or None if it agrees."""
    expected = golden(case.group).get(case.name)
    if expected is None or expected["sql"] != case.sql:
        return f"no golden answer for this text of {case.id}: re-record it with tests/flink_reference/record.py"
    actual = sqlstream_answer(case, parallelism)
    if "error" in expected:
        if "error" not in actual:
            return f"Flink fails ({expected['error']}), sqlstream gives {len(actual['rows'])} rows"
        return None
    if "error" in actual:
        return f"sqlstream fails: {actual['error']}"
    problems = []
    flink_types = [suite.normalize_type(t) for _, t in expected["columns"]]
    ours = [t for _, t in actual["columns"]]
    if flink_types != ours:
        problems.append(f"column types differ: Flink {flink_types}, sqlstream {ours}")
    single = [t == "FLOAT" for t in flink_types]
    maps = [t.startswith(("MAP<", "MULTISET<")) for t in flink_types]
    # a nested column is compared as text where the golden file holds its text (see record.py), else
    # as its plain values
    plain = [t.startswith(("ARRAY<", "MAP<", "MULTISET<", "ROW<"))
             and not any(isinstance(r[k], dict) and "text" in r[k] for r in expected["rows"] if k < len(r))
             for k, t in enumerate(ours)]
    actual = {**actual, "rows": [[p if flag else t for t, p, flag in zip(row, values, plain, strict=False)]
                                 for row, values in zip(actual["rows"], actual["plain_rows"], strict=True)]}
    want, got = (suite.canonical_rows([_map_order(_single_precision(r, single), maps) for r in answer["rows"]])
                 for answer in (expected, actual))
    if want != got:
        missing = [tuple(v for _, v in r) for r in want if r not in got][:3]
        extra = [tuple(v for _, v in r) for r in got if r not in want][:3]
        problems.append(f"rows differ ({len(want)} from Flink, {len(got)} from sqlstream): "
                        f"missing {missing}, extra {extra}")
    return "; ".join(problems) or None
