"""Aggregates over an updating input, as Flink's retractable aggregate functions run them.

MIN/MAX keep a count per value (MaxWithRetractAggFunction), COUNT/SUM/AVG(DISTINCT) a count per
distinct value (Flink's distinct map view), FIRST_VALUE/LAST_VALUE/LISTAGG their values in arrival
order (a retraction removes the value's first occurrence), the statistics sums of x and x^2, and an
aggregate UDF its own ``retract``.  The operator's final rows must equal the aggregates recomputed
from the rows still live, batch after batch, and its state must survive savepoints onto the other
backend and another parallelism, and checkpoints taken while it goes on.  (Flink's own answers on
SQL queries are in tests/flink_reference/cases/retract.sql.)
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.errors import PlanError
from sqlstream.core.functions import udfs
from sqlstream.runtime.elements import RowKind
from sqlstream.runtime.operators.group_agg import GroupAggOperator
from tests.conftest import apply_changelog, in_key_groups, rows, run_sql
from tests.harness import OperatorHarness, Snapshot, planned_state, restored_into_halves
from tests.udf_samples import SumOfSquaresWithRetract

INSERT, U_BEFORE, U_AFTER, DELETE = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
DEC = pa.decimal128(10, 2)
INPUT = pa.schema([("k", pa.int32()), ("i", pa.int64()), ("s", pa.string()), ("d", DEC), ("f", pa.float64()),
                   ("t", pa.timestamp("ms"))])
KEYS = [0]
UDF = "SUM_SQ_RETRACT"
AGGS = [
    AggCall("MAX", 1, False, pa.int64(), "max_i"), AggCall("MIN", 1, False, pa.int64(), "min_i"),
    AggCall("MAX", 2, False, pa.string(), "max_s"), AggCall("MIN", 2, True, pa.string(), "min_s"),
    AggCall("MAX", 3, False, DEC, "max_d"), AggCall("MIN", 5, False, pa.timestamp("ms"), "min_t"),
    AggCall("MAX", 4, False, pa.float64(), "max_f"),
    AggCall("COUNT", 1, True, pa.int64(), "cd_i"), AggCall("COUNT", 2, True, pa.int64(), "cd_s"),
    AggCall("SUM", 1, True, pa.int64(), "sd_i"), AggCall("AVG", 3, True, pa.decimal128(38, 6), "ad_d"),
    AggCall("SUM", 4, True, pa.float64(), "sd_f"),
    AggCall("FIRST_VALUE", 2, False, pa.string(), "fv_s"), AggCall("LAST_VALUE", 1, False, pa.int64(), "lv_i"),
    AggCall("LISTAGG", 2, False, pa.string(), "la_s", separator="|"),
    AggCall("VAR_POP", 1, False, pa.int64(), "vp_i"),
    AggCall(UDF, 1, False, pa.int64(), "udf_i"),
]
Batch = tuple[pa.RecordBatch, list[int]]


@pytest.fixture(autouse=True)
def _udf() -> Iterator[None]:
    udfs.register(UDF, SumOfSquaresWithRetract())
    yield
    udfs.unregister(UDF)


def _row(rng: random.Random, keys: int) -> tuple:
    """A row whose values repeat often (so counts per value go up and down), NULLs among them."""
    return (rng.choice([None, *range(keys)]), rng.choice([None, *range(-4, 8)]),
            rng.choice([None, "", "a", "b", "zz", "ü", "Äpfel"]),
            rng.choice([None, Decimal("-1.50"), Decimal("0.00"), Decimal("2.25"), Decimal("99999999.99")]),
            rng.choice([None, -1.25, 0.0, 2.5, 1e10]),
            rng.choice([None, *(dt.datetime(2024, 3, 1) + dt.timedelta(seconds=j) for j in range(5))]))


def _batch(rows_: list[tuple]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows_], f.type) for i, f in enumerate(INPUT)],
                                      schema=INPUT)


def _changelog_input(seed: int, batches: int = 40, keys: int = 6) -> list[Batch]:
    """Inserts, deletes of live rows and -U/+U pairs replacing one, as an upstream aggregate emits."""
    rng = random.Random(seed)
    live: list[tuple] = []
    out: list[Batch] = []
    for _ in range(batches):
        rows_, kinds = [], []
        for _ in range(rng.randint(0, 30)):
            action = rng.random()
            if action < 0.45 or not live:
                row = _row(rng, keys)
                live.append(row)
                rows_.append(row)
                kinds.append(rng.choice([INSERT, U_AFTER]))
            elif action < 0.75:
                row = live.pop(rng.randrange(len(live)))
                rows_.append(row)
                kinds.append(rng.choice([DELETE, U_BEFORE]))
            else:
                i = rng.randrange(len(live))
                old, new = live[i], (live[i][0], *_row(rng, keys)[1:])
                live[i] = new
                rows_ += [old, new]
                kinds += [U_BEFORE, U_AFTER]
        out.append((_batch(rows_), kinds))
    return out


def _expected(inputs: list[Batch]) -> list[tuple]:
    """The final rows recomputed from scratch: per key the rows still live, and the values of
    FIRST_VALUE/LAST_VALUE/LISTAGG in arrival order, a retraction taking the first occurrence out."""
    live: dict[Any, list[tuple]] = {}
    arrivals: dict[tuple[Any, int], list[Any]] = {}
    for batch, kinds in inputs:
        for kind, row in zip(kinds, zip(*(c.to_pylist() for c in batch.columns), strict=True), strict=True):
            rows_ = live.setdefault(row[0], [])
            add = kind in (INSERT, U_AFTER)
            rows_.append(row) if add else rows_.remove(row)
            for col in (1, 2):
                seq = arrivals.setdefault((row[0], col), [])
                if row[col] is not None:
                    seq.append(row[col]) if add else seq.remove(row[col])
    out = []
    for k, rows_ in live.items():
        if not rows_:
            continue
        col = {c: [r[c] for r in rows_ if r[c] is not None] for c in range(1, 6)}

        def extreme(pick: Any, values: list[Any]) -> Any:
            return pick(values) if values else None

        distinct_d = set(col[3])
        with localcontext() as ctx:
            ctx.prec = 80
            avg_d = (sum(distinct_d) / len(distinct_d)).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP) \
                if distinct_d else None
        ints = col[1]
        var_pop = None if not ints else int(Fraction(sum(x * x for x in ints)) / len(ints)
                                              - Fraction(sum(ints), len(ints)) ** 2)
        strings, longs = arrivals[(k, 2)], arrivals[(k, 1)]
        out.append((k, extreme(max, col[1]), extreme(min, col[1]), extreme(max, col[2]), extreme(min, col[2]),
                    extreme(max, col[3]), extreme(min, col[5]), extreme(max, col[4]),
                    len(set(col[1])), len(set(col[2])), sum(set(col[1])) if col[1] else None, avg_d,
                    sum(set(col[4])) if col[4] else None,
                    strings[0] if strings else None, longs[-1] if longs else None,
                    "|".join(strings) if strings else None, var_pop, sum(x * x for x in ints)))
    return out


def _schema() -> pa.Schema:
    return pa.schema([INPUT.field(0), *(pa.field(a.name, a.type) for a in AGGS)])


def _operator() -> GroupAggOperator:
    return GroupAggOperator(KEYS, AGGS, _schema(), True, *planned_state("rocksdb", None, False))


def _run(h: OperatorHarness, inputs: list[Batch]) -> list[tuple]:
    h.take()
    for batch, kinds in inputs:
        h.process_batch(batch, kinds)
    return h.take()


def _final(changes: list[tuple]) -> list[tuple]:
    table = pa.table({"op": [int(c[0]) for c in changes],
                      **{f.name: pa.array([c[i + 1] for c in changes], f.type) for i, f in enumerate(_schema())}})
    final = apply_changelog(table)
    return _sorted(list(zip(*(c.to_pylist() for c in final.columns), strict=True)))


def _sorted(rows_: list[tuple]) -> list[tuple]:
    return sorted(rows_, key=lambda r: repr(r[0]))


def _close(actual: list[tuple], expected: list[tuple]) -> None:
    """Rows equal, the float sum compared to 9 digits (summed in another order)."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a[:12] == e[:12] and a[13:] == e[13:], (a, e)
        assert (a[12] is None) == (e[12] is None) and (a[12] is None or a[12] == pytest.approx(e[12], rel=1e-9))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_final_rows_are_the_aggregates_of_the_rows_still_live(backend: str, seed: int, tmp_path: Path) -> None:
    inputs = _changelog_input(seed)
    h = OperatorHarness(_operator(), backend, tmp=tmp_path)
    assert h.operator.columnar is None  # MIN/MAX and DISTINCT over retractions: the per-key form
    changes = _run(h, inputs)
    assert any(c[0] == DELETE for c in changes) and any(c[0] == U_BEFORE for c in changes)
    _close(_final(changes), _sorted(_expected(inputs)))


def _mine(inputs: list[Batch], groups: range) -> list[Batch]:
    """The rows of ``groups``' key groups, as the hash exchange routes them."""
    out = []
    for batch, kinds in inputs:
        mask = in_key_groups(batch, KEYS, groups)
        out.append((batch.filter(pa.array(mask)), np.array(kinds)[mask].tolist()))
    return out


@pytest.mark.parametrize(("first", "second"),
                         [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("hashmap", "hashmap"), ("rocksdb", "rocksdb")])
def test_state_moves_through_a_savepoint_to_another_backend_and_parallelism(first: str, second: str,
                                                                           tmp_path: Path) -> None:
    inputs = _changelog_input(7, batches=50, keys=40)
    before, after = inputs[:25], inputs[25:]
    old = OperatorHarness(_operator(), first, tmp=tmp_path)
    _run(old, before)
    for groups, new in restored_into_halves(old.snapshot(), _operator, second, tmp=tmp_path):
        # a subtask that ran from the start on the rows of its key groups emits the same changes
        reference = OperatorHarness(_operator(), "rocksdb", tmp=tmp_path, key_groups=groups)
        _run(reference, _mine(before, groups))
        want = _run(reference, _mine(after, groups))
        assert len(want) > 20 and _run(new, _mine(after, groups)) == want


def test_a_checkpoint_is_not_changed_by_later_batches(tmp_path: Path) -> None:
    """The counts per value are copied before a change: a checkpoint written after more batches
    holds the state as it was when taken."""
    inputs = _changelog_input(11, batches=40)
    h = OperatorHarness(_operator(), "hashmap", tmp=tmp_path)
    _run(h, inputs[:20])
    write = h.state.snapshot_all(1)
    continued = _run(h, inputs[20:])
    directory = tmp_path / "chk"
    directory.mkdir()
    restored = OperatorHarness(_operator(), "hashmap", tmp=tmp_path, restore=Snapshot(write(directory), None))
    assert continued and _run(restored, inputs[20:]) == continued


def test_the_maximum_comes_back_to_the_next_value_when_retracted(tmp_path: Path) -> None:
    aggs = [AggCall("MAX", 1, False, pa.int64(), "mx"), AggCall("MIN", 1, False, pa.int64(), "mn")]
    schema = pa.schema([INPUT.field(0), pa.field("mx", pa.int64()), pa.field("mn", pa.int64())])
    h = OperatorHarness(GroupAggOperator(KEYS, aggs, schema, True), "rocksdb", tmp=tmp_path)

    def rows_(*values: int) -> pa.RecordBatch:
        return _batch([(1, v, None, None, None, None) for v in values])

    h.process_batch(rows_(5, 9, 9, 2), [INSERT] * 4)
    h.process_batch(rows_(9), [DELETE])  # one 9 is left
    h.process_batch(rows_(9, 2), [DELETE, U_BEFORE])  # 5 is the only value left
    h.process_batch(rows_(7, 7), [INSERT, DELETE])  # added and taken back in one batch: no change
    h.process_batch(rows_(5), [DELETE])
    assert h.changelog() == [(INSERT, 1, 9, 2), (U_BEFORE, 1, 9, 2), (U_AFTER, 1, 5, 5), (DELETE, 1, 5, 5)]


T = "1,x,10\n2,y,20\n2,,25\n3,z,30\n,w,40\n1,xx,\n2,y2,60\n1,,7\n3,z,31\n"


def _ddl(tmp_path: Path) -> str:
    (tmp_path / "t.csv").write_text(T)
    return (f"CREATE TABLE t (k INT, s STRING, v INT) WITH ('connector' = 'filesystem', "
            f"'path' = '{tmp_path / 't.csv'}', 'format' = 'csv', 'csv.null-literal' = '');\n")


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_an_aggregate_udf_with_retract_aggregates_an_updating_input(backend: str, tmp_path: Path) -> None:
    script = (_ddl(tmp_path) + "CREATE TEMPORARY FUNCTION sq AS 'tests.udf_samples.SumOfSquaresWithRetract';\n"
              "SELECT n, sq(k) AS q FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) GROUP BY n;")
    # counts: k=1 -> 3, k=2 -> 3, k=3 -> 2, k=NULL -> 1 (NULL is skipped by the UDF)
    assert sorted(rows(run_sql(script, {"state.backend.type": backend})), key=repr) == [(1, 0), (2, 9), (3, 5)]


def test_an_aggregate_udf_without_retract_is_refused_over_an_updating_input(tmp_path: Path) -> None:
    script = (_ddl(tmp_path) + "CREATE TEMPORARY FUNCTION sq AS 'tests.udf_samples.SumOfSquares';\n"
              "SELECT n, sq(k) AS q FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) GROUP BY n;")
    with pytest.raises(PlanError, match=r"SQ\(\$0\) over an updating input .* SQ \(SumOfSquares\) does not "
                                        r"implement retract"):
        run_sql(script)
