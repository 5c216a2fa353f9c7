"""Records what Apache Flink gives for every case of the reference suite into its golden file.

Run it with PyFlink's Python (apache-flink 2.3.0, Java 17), from anywhere:

    /path/to/flink-venv/bin/python tests/flink_reference/record.py [--only GROUP ...] [--case NAME ...]

All cases run in one JVM (starting one takes 10-25 s), each in a fresh streaming TableEnvironment at
parallelism 1 with 'table.local-time-zone' = 'UTC', over the bounded filesystem tables of tables.sql.
The SELECT's changelog (+I/-U/+U/-D) is applied to get the final rows; the column types are those of
the resolved schema. A case whose planning or execution fails records the error instead.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import suite

os.environ["TZ"] = "UTC"  # PyFlink turns TIMESTAMP_LTZ values into Python datetimes in this zone
time.tzset()

_SET = re.compile(r"^SET\s+'([^']+)'\s*=\s*'([^']*)'$", re.IGNORECASE)
CASE_TIMEOUT_S = 120  # a job still running by then is cancelled and recorded as an error


def _python_value(v: Any) -> Any:
    from pyflink.common import Row

    if isinstance(v, Row):
        return [_python_value(x) for x in v]
    if isinstance(v, list | tuple):
        return [_python_value(x) for x in v]
    if isinstance(v, dict):
        return {_python_value(k): _python_value(x) for k, x in v.items()}
    return v


def _environment() -> Any:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "1")
    config.set("table.local-time-zone", "UTC")
    return env


_NESTED = re.compile(r"^(ARRAY|MAP|ROW|MULTISET)\b")


def _collectable(table: Any, columns: list[list[str]]) -> Any:
    """``table`` with the columns PyFlink cannot collect made collectable: TIMESTAMP_LTZ cast to
    TIMESTAMP of the same precision (the wall-clock time in 'table.local-time-zone', which is what
    the golden file holds for such a column; the test converts sqlstream's instants likewise), and
    ARRAY, MAP and ROW cast to STRING (PyFlink fails with 'Ran out of input' on a nested value whose
    elements or fields are nullable): the golden file holds Flink's text of the value, tagged
    ``{"text": ...}``, and the test renders sqlstream's value the same way."""
    ltz = re.compile(r"TIMESTAMP_LTZ\((\d)\)")
    if not any(ltz.match(t) or _NESTED.match(t) for _, t in columns):
        return table
    from pyflink.table import DataTypes
    from pyflink.table.expressions import col

    exprs = []
    for name, t in columns:
        m = ltz.match(t)
        if m:
            exprs.append(col(name).cast(DataTypes.TIMESTAMP(int(m.group(1)))).alias(name))
        elif _NESTED.match(t):
            exprs.append(col(name).cast(DataTypes.STRING()).alias(name))
        else:
            exprs.append(col(name))
    return table.select(*exprs)


def _error(e: BaseException) -> str:
    """The first line of the Java exception that explains the failure (the deepest cause)."""
    text = str(e)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line for line in lines if line.startswith(("Caused by:", ": "))]  # py4j puts the Java one after ": "
    line = causes[-1] if causes else (lines[0] if lines else type(e).__name__)
    return line.removeprefix("Caused by: ").removeprefix(": ")[:300]


def run_case(case: suite.Case) -> dict[str, Any]:
    """Flink's answer for one case: columns and final rows, or the error."""
    env = _environment()
    for ddl in suite.tables_ddl():
        env.execute_sql(ddl)
    tmp = Path(tempfile.mkdtemp(prefix="flinkref-")) if "{tmp}" in case.sql else None  # sink tables
    *setup, query = case.statements(tmp)
    entry: dict[str, Any] = {"sql": case.sql}
    try:
        for statement in setup:
            if m := _SET.match(statement):  # the SQL client's SET; TableEnvironment takes it as config
                env.get_config().set(m.group(1), m.group(2))
            else:
                env.execute_sql(statement).wait()
        table = env.sql_query(query)
        schema = table._j_table.getResolvedSchema()
        columns = [[str(c.getName()), str(c.getDataType())] for c in schema.getColumns()]
        result = _collectable(table, columns).execute()
        client = result.get_job_client()
        timer = threading.Timer(CASE_TIMEOUT_S, lambda: client.cancel()) if client else None
        if timer:
            timer.start()
        live: Counter[str] = Counter()
        values: dict[str, list[Any]] = {}
        try:
            with result.collect() as rows:
                nested = [bool(_NESTED.match(t)) for _, t in columns]
                for row in rows:
                    encoded = [suite.encode(suite.Text(v) if flag and v is not None else _python_value(v))
                               for v, flag in zip(row, nested, strict=True)]
                    key = repr(encoded)
                    kind = str(row.get_row_kind())
                    if kind in ("+I", "+U", "INSERT", "UPDATE_AFTER"):
                        live[key] += 1
                        values[key] = encoded
                    else:
                        if live[key] == 0:
                            raise AssertionError(f"Flink retracted a row it never emitted: {kind} {encoded}")
                        live[key] -= 1
        finally:
            if timer:
                timer.cancel()
        final = [values[k] for k, n in live.items() for _ in range(n)]
        entry["columns"] = columns
        entry["rows"] = sorted(final, key=repr)
    except Exception as e:  # noqa: BLE001 - Flink's refusal or failure is the recorded answer
        entry["error"] = _error(e)
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=[], help="record only these groups (case file stems)")
    parser.add_argument("--case", nargs="*", default=[], help="record only these case names")
    args = parser.parse_args()
    groups = args.only or suite.groups()
    start = time.time()
    for group in groups:
        golden = suite.load_golden(group)
        cases = suite.load_group(group)
        names = {c.name for c in cases}
        for stale in set(golden) - names:
            del golden[stale]
        for case in cases:
            if args.case and case.name not in args.case:
                continue
            t0 = time.time()
            golden[case.name] = run_case(case)
            outcome = golden[case.name].get("error") or f"{len(golden[case.name]['rows'])} rows"
            print(f"{case.id}: {outcome} ({time.time() - t0:.1f} s)", flush=True)
            suite.save_golden(group, golden)
    print(f"recorded in {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
