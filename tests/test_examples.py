"""Every script in sql-examples/ runs through the CLI and prints the right answer (DuckDB checks it)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from sqlstream.frontend.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "sql-examples"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory where the examples' relative paths resolve and their output stays."""
    (tmp_path / "sql-examples").symlink_to(EXAMPLES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SQLSTREAM_HOME", str(tmp_path / "home"))
    return tmp_path


def run_example(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["run", f"sql-examples/{name}"]) == 0
    captured = capsys.readouterr()
    assert "[ERROR]" not in captured.err
    return captured.out


def tableau_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")][1:] for line in out.splitlines() if line.startswith("| +I |")]


def duck(query: str) -> list[tuple]:
    return sorted(duckdb.sql(query).fetchall())


def test_tumbling_count_over_datagen(workdir: Path, capsys) -> None:
    out = run_example("tumbling_count_datagen.sql", capsys)
    rows = [m.groups() for m in re.finditer(r"^\+I\[(.+?), (.+?), (\d+), (\d+)\]$", out, re.M)]
    assert sum(int(n) for *_, n in rows) == 400  # every generated click counted once
    starts = {dt.datetime.fromisoformat(s) for s, *_ in rows}
    assert len(starts) == 10 and all(s.second % 10 == 0 for s in starts)
    assert {int(u) for _, _, u, _ in rows} <= {1, 2, 3}


def test_hopping_average(workdir: Path, capsys) -> None:
    got = sorted((r[0], r[2], float(r[3]), int(r[4])) for r in tableau_rows(run_example("hopping_average.sql", capsys)))
    expected = duck("""
        WITH r AS (SELECT column0 AS sensor, column1 AS t, epoch_ms(column2::TIMESTAMP) AS ms
                   FROM read_csv('sql-examples/data/sensors.csv', header = false)),
             w AS (SELECT *, (ms // 20000) * 20000 - j * 20000 AS ws FROM r, range(3) x(j))
        SELECT strftime(epoch_ms(ws), '%Y-%m-%d %H:%M:%S.000'), sensor, AVG(t), COUNT(*)
        FROM w GROUP BY ws, sensor""")
    assert [(w, s, n) for w, s, _, n in got] == [(w, s, n) for w, s, _, n in expected]
    # ROUND(..., 2) is half-up on the decimal value, as in Flink: within half a cent of the mean
    assert all(abs(a - b) <= 0.005 + 1e-9 for (_, _, a, _), (_, _, b, _) in zip(got, expected, strict=True))


def test_session_windows(workdir: Path, capsys) -> None:
    got = sorted((r[0], r[1], r[2], int(r[3]), int(r[4])) for r in tableau_rows(run_example("session_windows.sql", capsys)))
    expected = duck("""
        WITH c AS (SELECT "user" AS u, page, epoch_ms(ts::TIMESTAMP) AS ms FROM read_json('sql-examples/data/clicks.jsonl')),
             f AS (SELECT *, CASE WHEN ms - lag(ms) OVER (PARTITION BY u ORDER BY ms) < 30000 THEN 0 ELSE 1 END AS n FROM c),
             s AS (SELECT *, SUM(n) OVER (PARTITION BY u ORDER BY ms) AS sid FROM f)
        SELECT strftime(epoch_ms(MIN(ms)), '%Y-%m-%d %H:%M:%S.000'), strftime(epoch_ms(MAX(ms) + 30000), '%Y-%m-%d %H:%M:%S.000'),
               u, COUNT(*), COUNT(DISTINCT page) FROM s GROUP BY u, sid""")
    assert got == expected


def test_changelog_group_by(workdir: Path, capsys) -> None:
    out = run_example("changelog_group_by.sql", capsys)
    final: dict[str, tuple[int, int]] = {}
    for kind, cat, n, items in re.findall(r"^totals> ([+-][IUD])\[(\w+), (\d+), (\d+)\]$", out, re.M):
        if kind in ("+I", "+U"):
            final[cat] = (int(n), int(items))
        else:
            assert final.pop(cat) == (int(n), int(items))  # a retraction names the row it replaces
    assert "-U[" in out and "+U[" in out
    expected = duck("""SELECT column1, COUNT(*), SUM(column2) FROM read_csv('sql-examples/data/orders.csv', header = false)
                       WHERE column2 > 0 GROUP BY column1""")
    assert sorted((c, n, i) for c, (n, i) in final.items()) == expected


def test_etl_to_parquet(workdir: Path, capsys) -> None:
    run_example("etl_to_parquet.sql", capsys)
    files = sorted((workdir / "out" / "big_orders").glob("part-*.parquet"))
    assert files, "the sink committed no file"
    got = sorted(tuple(r.values()) for f in files for r in pq.read_table(f).to_pylist())
    expected = duck("""SELECT column0, UPPER(column1), column2 * column3, strftime(column4, '%Y-%m-%d')
                       FROM read_csv('sql-examples/data/orders.csv', header = false)
                       WHERE column2 * column3 > 200 AND column1 <> 'garden'""")
    assert [(a, b, round(c, 6), d) for a, b, c, d in got] == [(a, b, round(c, 6), d) for a, b, c, d in expected]


def test_every_example_is_covered() -> None:
    covered = {"tumbling_count_datagen.sql", "hopping_average.sql", "session_windows.sql",
               "changelog_group_by.sql", "etl_to_parquet.sql"}
    assert {p.name for p in EXAMPLES.glob("*.sql")} <= covered
