"""Window properties through the plan: cascaded window aggregations and window joins after them.

Nexmark q5 (a window aggregation of a window aggregation, joined with it) and
q8 (a join of two window aggregations on their windows) must be planned with
state that the watermark empties, and give DuckDB's batch answer row for row
on out-of-order input, at any parallelism, batch size and state backend.
The operators themselves are driven directly where the test needs to look at
their state, feed late rows, or move a savepoint between backends.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.aggregates import AggCall
from sqlstream.core.expressions import Call, ColumnRef, Literal
from sqlstream.core.sql.script import parse_one
from sqlstream.core.windows import WindowSpec
from sqlstream.frontend.session import Session
from sqlstream.planner.joins import analyze
from sqlstream.planner.logical import Join, WindowAggregate
from sqlstream.planner.optimizer import optimize
from sqlstream.planner.physical import Lowering
from sqlstream.planner.planner import dataflow, insert_plan, select_plan
from sqlstream.runtime.elements import MAX_WATERMARK
from sqlstream.runtime.hashing import key_group_range, key_groups, subtask_for_key_groups
from sqlstream.runtime.operators.base import Operator
from sqlstream.runtime.operators.window_agg import WindowAggOperator
from sqlstream.runtime.operators.window_join import WindowJoinOperator
from sqlstream.runtime.state.base import StateBackend
from tests.conftest import duckdb_rows, rows, run_sql
from tests.harness import OperatorHarness, Snapshot, planned_state

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
NEXMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "nexmark"
MAX_PARALLELISM = 128


def _shuffled(events: list[tuple], rng: random.Random, disorder_ms: int) -> list[tuple]:
    """Events (time last) in arrival order: each moved back by up to ``disorder_ms``."""
    keyed = sorted(((e[-1] + dt.timedelta(milliseconds=rng.randint(0, disorder_ms)), i, e) for i, e in enumerate(events)))
    return [e for _, _, e in keyed]


def _csv(table: pa.Table, path: Path) -> None:
    with path.open("w") as f:
        for r in table.to_pylist():
            f.write(",".join(
                v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if isinstance(v, dt.datetime) else ("" if v is None else str(v))
                for v in r.values()) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, pa.Table]]:
    """Bids, persons and auctions, out of order by less than the watermark delay (nothing is late)."""
    rng = random.Random(11)
    tmp = tmp_path_factory.mktemp("cascade")
    bids = _shuffled([(rng.choice([0, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7]), rng.randint(1, 500),
                       BASE + dt.timedelta(milliseconds=i * 75)) for i in range(800)], rng, 1500)
    persons = _shuffled([(rng.choice([*range(25), None]), f"p{rng.randint(0, 2)}",
                          BASE + dt.timedelta(milliseconds=i * 190)) for i in range(320)], rng, 1500)
    auctions = _shuffled([(rng.choice([*range(30), None]), BASE + dt.timedelta(milliseconds=i * 170))
                          for i in range(350)], rng, 1500)
    tables = {
        "bid": pa.table({"auction": pa.array([b[0] for b in bids], pa.int64()),
                         "price": pa.array([b[1] for b in bids], pa.int64()),
                         "ts": pa.array([b[2] for b in bids], pa.timestamp("ms"))}),
        "person": pa.table({"id": pa.array([p[0] for p in persons], pa.int64()),
                            "name": pa.array([p[1] for p in persons], pa.string()),
                            "ts": pa.array([p[2] for p in persons], pa.timestamp("ms"))}),
        "auction": pa.table({"seller": pa.array([a[0] for a in auctions], pa.int64()),
                             "ts": pa.array([a[1] for a in auctions], pa.timestamp("ms"))}),
    }
    columns = {"bid": "auction BIGINT, price BIGINT", "person": "id BIGINT, name STRING", "auction": "seller BIGINT"}
    ddl = ""
    for name, table in tables.items():
        _csv(table, tmp / f"{name}.csv")
        ddl += f"""CREATE TABLE {name} ({columns[name]}, ts TIMESTAMP(3),
            WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
            WITH ('connector' = 'filesystem', 'path' = '{tmp / f"{name}.csv"}', 'format' = 'csv', 'csv.null-literal' = '');
"""
    return ddl, tables


def _settings(parallelism: int, backend: str, batch_size: int = 19) -> str:
    return (f"SET 'parallelism.default' = '{parallelism}'; SET 'state.backend.type' = '{backend}'; "
            f"SET 'table.exec.batch-size' = '{batch_size}';\n")


RUNS = [(1, "hashmap"), (2, "hashmap"), (1, "rocksdb"), (2, "rocksdb")]
EPOCH = "epoch_ms(CAST(ts AS TIMESTAMP))"  # DuckDB cannot take epoch_ms of TIMESTAMP_MS

# q5's shape on a smaller scale: hot items per 4 s window sliding by 1 s
Q5 = """
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime
FROM (
  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
    GROUP BY auction, window_start, window_end
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn"""

DUCK_HOP_COUNTS = f"""
  counts AS (
    SELECT auction, COUNT(*) AS num, ws, ws + 4000 AS we
    FROM (SELECT auction, ({EPOCH} // 1000) * 1000 - j * 1000 AS ws FROM bid, range(0, 4) r(j))
    GROUP BY ALL)"""

DUCK_Q5 = f"""
WITH {DUCK_HOP_COUNTS},
  maxes AS (SELECT MAX(num) AS maxn, ws, we FROM counts GROUP BY ws, we)
SELECT c.auction, c.num, epoch_ms(c.ws) FROM counts c JOIN maxes m ON c.ws = m.ws AND c.we = m.we AND c.num >= m.maxn"""


def _q8(kind: str = "JOIN", right_size: int = 5) -> str:
    """q8's shape: persons and sellers active in the same 5 s window."""
    return f"""
SELECT P.id, P.name, P.starttime, A.seller, A.starttime AS astart
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(ts), INTERVAL '5' SECOND))
  GROUP BY id, name, window_start, window_end
) P
{kind} (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(ts), INTERVAL '{right_size}' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"""


def _duck_q8(kind: str = "JOIN") -> str:
    return f"""
WITH P AS (SELECT id, name, ({EPOCH} // 5000) * 5000 AS ws FROM person GROUP BY ALL),
     A AS (SELECT seller, ({EPOCH} // 5000) * 5000 AS ws FROM auction GROUP BY ALL)
SELECT P.id, P.name, epoch_ms(P.ws), A.seller, epoch_ms(A.ws) FROM P {kind} A ON P.id = A.seller AND P.ws = A.ws"""


# ---------------------------------------------------------------- results against DuckDB


@pytest.mark.parametrize(("parallelism", "backend"), RUNS)
def test_q5_shaped_cascaded_aggregation_and_window_join_match_duckdb(data, parallelism: int, backend: str) -> None:
    ddl, tables = data
    expected = duckdb_rows(DUCK_Q5, **tables)
    assert rows(run_sql(_settings(parallelism, backend) + ddl + Q5 + ";")) == expected
    assert len(expected) > 60  # every window has a winner, ties give several


@pytest.mark.parametrize(("parallelism", "backend"), RUNS)
def test_q8_shaped_window_join_of_window_aggregations_matches_duckdb(data, parallelism: int, backend: str) -> None:
    ddl, tables = data
    expected = duckdb_rows(_duck_q8(), **tables)
    assert rows(run_sql(_settings(parallelism, backend) + ddl + _q8() + ";")) == expected
    assert len(expected) > 20


@pytest.mark.parametrize("kind", ["LEFT JOIN", "RIGHT JOIN", "FULL OUTER JOIN"])
@pytest.mark.parametrize(("parallelism", "backend"), [(2, "hashmap"), (1, "rocksdb")])
def test_outer_window_join_after_window_aggregations_matches_duckdb(data, kind: str, parallelism: int,
                                                                    backend: str) -> None:
    ddl, tables = data
    got = run_sql(_settings(parallelism, backend, 23) + ddl + _q8(kind) + ";")
    expected = duckdb_rows(_duck_q8(kind), **tables)
    assert rows(got) == expected
    padded = [r for r in expected if None in (r[0], r[3])]
    assert padded  # NULL ids never match, so every outer kind pads some rows


@pytest.mark.parametrize(("parallelism", "backend"), [(2, "hashmap"), (2, "rocksdb")])
def test_cascaded_aggregation_with_extra_keys_and_window_time_matches_duckdb(data, parallelism: int,
                                                                            backend: str) -> None:
    ddl, tables = data
    got = run_sql(_settings(parallelism, backend) + ddl + """
        SELECT s, e, wt, bucket, SUM(num) AS total, MAX(top) AS top, COUNT(*) AS auctions
        FROM (
          SELECT auction % 3 AS bucket, COUNT(*) AS num, MAX(price) AS top,
                 window_start AS s, window_end AS e, window_time AS wt
          FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
          GROUP BY auction, window_start, window_end, window_time
        )
        GROUP BY s, e, wt, bucket;""")
    expected = duckdb_rows(f"""
        WITH counts AS (
          SELECT auction, COUNT(*) AS num, MAX(price) AS top, ws, ws + 4000 AS we
          FROM (SELECT auction, price, ({EPOCH} // 1000) * 1000 - j * 1000 AS ws FROM bid, range(0, 4) r(j))
          GROUP BY ALL)
        SELECT epoch_ms(ws), epoch_ms(we), epoch_ms(we - 1), auction % 3, SUM(num), MAX(top), COUNT(*)
        FROM counts GROUP BY ALL""", **tables)
    assert rows(got) == expected


def test_where_on_window_columns_before_grouping_aggregates_the_tvf_rows_cascaded(data) -> None:
    ddl, tables = data
    query = """
        SELECT window_start, auction, COUNT(*) AS n, SUM(price) AS s
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
        WHERE window_start >= TIMESTAMP '2024-03-01 12:00:20' AND auction <> 2
        GROUP BY window_start, window_end, auction"""
    session = Session()
    session.execute_script(ddl)
    plan = optimize(select_plan(session.catalog, parse_one(query)))
    assert [n.input_window is not None for n in _nodes(plan) if isinstance(n, WindowAggregate)] == [True]
    expected = duckdb_rows(f"""
        SELECT epoch_ms(ws), auction, COUNT(*), SUM(price)
        FROM (SELECT auction, price, ({EPOCH} // 1000) * 1000 - j * 1000 AS ws FROM bid, range(0, 4) r(j))
        WHERE ws >= {_ms(dt.datetime(2024, 3, 1, 12, 0, 20))} AND auction <> 2 GROUP BY ALL""", **tables)
    assert rows(run_sql(_settings(2, "hashmap") + ddl + query + ";")) == expected


# ---------------------------------------------------------------- plans


def _nexmark_plan(query: str) -> tuple[Any, list[str]]:
    """The optimized logical plan and the physical node names of a Nexmark query."""
    session = Session()
    values = {"${EVENTS_NUM}": "1000", "${TPS}": "1000", "${RATE_LIMITED}": "false"}
    ddl = (NEXMARK / "ddl.sql").read_text()
    for k, v in values.items():
        ddl = ddl.replace(k, v)
    create, insert = (NEXMARK / f"{query}.sql").read_text().split("INSERT INTO", 1)
    session.execute_script(ddl + create)
    (optimized,), flow = dataflow([insert_plan(session.catalog, parse_one("INSERT INTO" + insert))])
    return optimized, [n.name for n in flow.nodes]


def _nodes(node):
    yield node
    for i in node.inputs:
        yield from _nodes(i)


def test_nexmark_q5_plans_a_window_join_over_a_window_aggregate_and_a_cascaded_one() -> None:
    plan, names = _nexmark_plan("q5")
    assert names.count("WindowJoin") == 1 and names.count("WindowAggregate") == 3
    assert "Join" not in names and "GroupAggregate" not in names
    cascaded = [n for n in _nodes(plan) if isinstance(n, WindowAggregate) and n.input_window is not None]
    assert len(cascaded) == 1 and cascaded[0].window.kind == "HOP"
    assert not plan.updating


def test_nexmark_q8_plans_a_window_join_of_two_window_aggregates() -> None:
    plan, names = _nexmark_plan("q8")
    assert names.count("WindowJoin") == 1 and names.count("WindowAggregate") == 2
    assert "Join" not in names
    join = next(n for n in _nodes(plan) if isinstance(n, Join))
    spec = analyze(join)
    assert spec.window is not None and len(spec.left_keys) == 1  # P.id = A.seller; the window columns are not keys


def test_explain_names_the_window_join_and_the_cascaded_window_aggregate(data) -> None:
    ddl, _ = data
    text = Session().execute_script(ddl + "EXPLAIN " + Q5 + ";")[-1].message
    optimized = text.split("== Optimized Logical Plan ==")[1]
    assert "WindowJoin(INNER" in optimized and "WindowAggregate(cascaded, HOP(" in optimized
    assert "window=HOP(slide=1000ms, size=4000ms) on window_start" in optimized
    assert "WindowJoin: INNER" in text.split("== Physical Dataflow ==")[1]


def test_a_join_of_windows_of_different_specs_stays_a_regular_join(data) -> None:
    ddl, _ = data
    session = Session()
    session.execute_script(ddl)
    for query in (_q8(right_size=10), _q8().replace("TUMBLE(TABLE auction, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
                                                    "HOP(TABLE auction, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
                                                    "INTERVAL '10' SECOND)")):
        plan = optimize(select_plan(session.catalog, parse_one(query)))
        join = next(n for n in _nodes(plan) if isinstance(n, Join))
        assert analyze(join).window is None
        assert len(analyze(join).left_keys) == 3  # id and both window columns are plain equi keys


def test_grouping_by_only_the_window_start_of_a_windowed_input_is_a_regular_aggregation(data) -> None:
    ddl, _ = data
    session = Session()
    session.execute_script(ddl)
    plan = optimize(select_plan(session.catalog, parse_one("""
        SELECT s, COUNT(*) FROM (
          SELECT seller, window_start AS s, window_end AS e
          FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(ts), INTERVAL '5' SECOND))
          GROUP BY seller, window_start, window_end) GROUP BY s""")))
    assert plan.updating
    assert not [n for n in _nodes(plan) if isinstance(n, WindowAggregate) and n.input_window is not None]


# ---------------------------------------------------------------- operators: state, late rows, savepoints

TS = pa.timestamp("ms")
SIDE = pa.schema([("k", pa.int64()), ("ws", TS), ("we", TS), ("v", pa.int64())])
JOINED = pa.schema([*SIDE, *[pa.field(f"r_{f.name}", f.type) for f in SIDE]])
WINDOW_MS = 1000
TUMBLE = WindowSpec("TUMBLE", 0, size_ms=WINDOW_MS)


def _window_rows(rng: np.random.Generator, window: int, n: int) -> pa.RecordBatch:
    """``n`` rows of one window, keys 0..5 (and NULL), values 0..99."""
    keys = pa.array(rng.integers(0, 7, n)).to_pylist()
    start = window * WINDOW_MS
    return pa.record_batch([
        pa.array([None if k == 6 else k for k in keys], pa.int64()),
        pa.array(np.full(n, start)).cast(TS), pa.array(np.full(n, start + WINDOW_MS)).cast(TS),
        pa.array(rng.integers(0, 100, n)),
    ], schema=SIDE)


def _stream(seed: int, windows: int = 12) -> list[tuple]:
    """Batches of both sides, each window's rows arriving over two steps, with watermarks in between."""
    rng = np.random.default_rng(seed)
    events: list[tuple] = []
    for w in range(windows):
        for side in (0, 1):
            events.append(("batch", side, _window_rows(rng, w, int(rng.integers(1, 9)))))
            early = int(rng.integers(0, 5))
            if w + 1 < windows and early:
                events.append(("batch", side, _window_rows(rng, w + 1, early)))
        events.append(("watermark", (w + 1) * WINDOW_MS - 1))
    return events


def _join_operator(kind: str = "INNER", backend: str = "hashmap") -> WindowJoinOperator:
    """ON l.k = r.k AND l.we = r.we (and l.ws = r.ws) AND l.v + r.v > 60."""
    total = Call("+", (ColumnRef(3, "v", pa.int64()), ColumnRef(7, "r_v", pa.int64())), pa.int64())
    residual = Call(">", (total, Literal(60, pa.int64())), pa.bool_())
    return WindowJoinOperator(kind, (0,), (0,), residual, (2, 2), SIDE, SIDE, JOINED, planned_state(backend)[1])


def _expected_join(events: list[tuple], kind: str) -> list[tuple]:
    """The same window join, computed naively over the rows that were on time."""
    sides: list[list[tuple]] = [[], []]
    for e in events:
        if e[0] == "batch":
            sides[e[1]] += [tuple(r.values()) for r in e[2].to_pylist()]
    out = []
    for lr in sides[0]:
        matches = [rr for rr in sides[1] if lr[0] is not None and lr[0] == rr[0] and lr[2] == rr[2] and lr[3] + rr[3] > 60]
        out += [lr + rr for rr in matches]
        if not matches and kind in ("LEFT", "FULL"):
            out.append(lr + (None,) * 4)
    if kind in ("RIGHT", "FULL"):
        for rr in sides[1]:
            if not any(lr[0] is not None and lr[0] == rr[0] and lr[2] == rr[2] and lr[3] + rr[3] > 60 for lr in sides[0]):
                out.append((None,) * 4 + rr)
    return out


def _open(op: Operator, backend: str, tmp: Path, **kwargs: Any) -> OperatorHarness:
    inputs = 2 if isinstance(op, WindowJoinOperator) else 1
    return OperatorHarness(op, backend, tmp=tmp, max_parallelism=MAX_PARALLELISM, inputs=inputs, **kwargs)


def _drive(op: OperatorHarness, events: list[tuple]) -> list[tuple]:
    op.take()
    for e in events:
        op.process_batch(e[2], input_index=e[1]) if e[0] == "batch" else op.watermark(e[1])
    return [tuple(row) for _, *row in op.take()]


def _columnar_rows(backend: StateBackend) -> int:
    return sum(t.num_rows for st in backend.columnar_states.values() for t in st.tables)


def _sorted(rows_: list[tuple]) -> list[tuple]:
    return sorted(rows_, key=lambda r: tuple((x is None, x) for x in r))


@pytest.mark.parametrize("backend_kind", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("kind", ["INNER", "LEFT", "FULL"])
def test_window_join_state_is_empty_once_the_watermark_passes(backend_kind: str, kind: str, tmp_path: Path) -> None:
    events = _stream(seed=1)
    op = _open(_join_operator(kind, backend_kind), backend_kind, tmp_path)
    backend, join = op.state, op.operator
    out: list[tuple] = []
    pending_peak = 0
    for i, e in enumerate(events):
        out += _drive(op, [e])
        if e[0] == "watermark":
            # only the next window's early rows wait: state never holds a fired window
            waiting = sum(x[2].num_rows for x in events[:i] if x[0] == "batch" and x[2].column(2)[0].value > e[1] + 1)
            assert join.state_rows() == waiting
            pending_peak = max(pending_peak, join.state_rows())
    assert pending_peak > 0
    out += _drive(op, [("watermark", MAX_WATERMARK)])
    assert join.state_rows() == 0 and backend.num_entries() == 0 and _columnar_rows(backend) == 0
    assert _sorted(out) == _sorted(_expected_join(events, kind))
    op.close()


@pytest.mark.parametrize("backend_kind", ["hashmap", "rocksdb"])
def test_window_join_drops_and_counts_rows_of_fired_windows(backend_kind: str, tmp_path: Path) -> None:
    events = _stream(seed=2, windows=6)
    op = _open(_join_operator("FULL", backend_kind), backend_kind, tmp_path)
    backend = op.state
    out = _drive(op, events[:-1])
    late = _window_rows(np.random.default_rng(9), 2, 7)  # window 2 fired long ago
    out += _drive(op, [("batch", 0, late), ("batch", 1, late), events[-1], ("watermark", MAX_WATERMARK)])
    assert op.metrics.late_records_dropped == 14
    assert _sorted(out) == _sorted(_expected_join(events, "FULL"))  # the late rows left no trace
    assert backend.num_entries() == 0 and _columnar_rows(backend) == 0
    op.close()


def _cascade_operator(backend: str = "hashmap") -> WindowAggOperator:
    """GROUP BY window_start, window_end, k over rows whose windows were assigned upstream."""
    aggs = [AggCall("SUM", 3, False, pa.int64(), "s"), AggCall("COUNT", None, False, pa.int64(), "n")]
    schema = pa.schema([("window_start", TS), ("window_end", TS), ("k", pa.int64()), ("s", pa.int64()), ("n", pa.int64())])
    # as the planner lowers it: the columnar form on hashmap, its rows form on rocksdb
    columnar = Lowering({"state.backend.type": backend}).window_agg_columnar(aggs, [pa.int64()])
    return WindowAggOperator(TUMBLE, ["window_start", "window_end", 0], aggs, schema, input_window=(1, 2),
                             columnar=columnar)


def _expected_cascade(events: list[tuple]) -> list[tuple]:
    groups: dict[tuple, list[int]] = {}
    for e in events:
        if e[0] == "batch" and e[1] == 0:
            for k, ws, we, v in (tuple(r.values()) for r in e[2].to_pylist()):
                acc = groups.setdefault((ws, we, k), [0, 0])
                acc[0] += v
                acc[1] += 1
    return [(*key, s, n) for key, (s, n) in groups.items()]


def _waiting_ends(backend: StateBackend) -> set[int]:
    """The window ends of everything an operator holds, in any form of its state (the rocksdb
    rows form's entries are read through its savepoint view)."""
    ends = {key[0] for st in backend.states.values() if getattr(st, "canonical", True) for _, key, _ in st.items()}
    for st in backend.columnar_states.values():
        table = st.frozen()
        ends |= set() if table is None else set(table.column("$end").to_pylist())
    return ends


@pytest.mark.parametrize("backend_kind", ["hashmap", "rocksdb"])
def test_cascaded_window_aggregation_fires_once_per_window_and_forgets_it(backend_kind: str, tmp_path: Path) -> None:
    events = [e for e in _stream(seed=3) if e[0] == "watermark" or e[1] == 0]
    op = _open(_cascade_operator(backend_kind), backend_kind, tmp_path)
    backend = op.state
    out: list[tuple] = []
    for e in events:
        fired = _drive(op, [e])
        if e[0] == "watermark":
            assert all(_ms(r[1]) - 1 <= e[1] for r in fired)
            assert all(end - 1 > e[1] for end in _waiting_ends(backend))  # no fired window is kept
        out += fired
    assert len({r[1] for r in out}) == 12  # each of the 12 windows fired when the watermark passed it
    late = _window_rows(np.random.default_rng(5), 3, 4)
    out += _drive(op, [("batch", 0, late), ("watermark", MAX_WATERMARK)])
    assert op.metrics.late_records_dropped == 4
    assert backend.num_entries() == 0 and _columnar_rows(backend) == 0
    assert _sorted(out) == _sorted(_expected_cascade(events))
    op.close()


def _ms(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)


def _route(events: list[tuple], partition: tuple[int, ...], parallelism: int) -> list[list[tuple]]:
    """Each subtask's share of the events: batches split by key group, watermarks to all."""
    shares: list[list[tuple]] = [[] for _ in range(parallelism)]
    for e in events:
        if e[0] != "batch":
            for share in shares:
                share.append(e)
            continue
        groups = key_groups([e[2].column(k) for k in partition], MAX_PARALLELISM)
        subtask = subtask_for_key_groups(groups, parallelism, MAX_PARALLELISM)
        for i in range(parallelism):
            part = e[2].filter(pa.array(subtask == i))
            if part.num_rows:
                shares[i].append((e[0], e[1], part))
    return shares


OPERATORS: dict[str, tuple[Callable[[str], Operator], Callable[[list[tuple]], list[tuple]], bool]] = {
    "window join": (lambda backend: _join_operator("FULL", backend), lambda ev: _expected_join(ev, "FULL"), True),
    "cascaded window aggregation": (_cascade_operator, _expected_cascade, False),
}


@pytest.mark.parametrize("operator", list(OPERATORS))
@pytest.mark.parametrize(("first", "second"), [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("hashmap", "hashmap"),
                                               ("rocksdb", "rocksdb")])
def test_savepoint_moves_between_backends_and_rescales(operator: str, first: str, second: str, tmp_path: Path) -> None:
    make, expected, two_sides = OPERATORS[operator]
    events = [e for e in _stream(seed=4) if two_sides or e[0] == "watermark" or e[1] == 0]
    cut = len(events) // 2
    while events[cut - 1][0] != "batch":  # stop with rows of open windows in state
        cut += 1
    op = _open(make(first), first, tmp_path)
    out = _drive(op, events[:cut])
    assert op.state.num_entries() + _columnar_rows(op.state) > 0
    savepoint: Snapshot = op.snapshot()
    op.close()
    # resume at parallelism 2 on the other backend: each subtask takes its key groups (and, as
    # these operators keep only event time in operator state, the old subtask's operator state)
    for i, share in enumerate(_route(events[cut:], (0,), 2)):
        resumed = _open(make(second), second, tmp_path, key_groups=key_group_range(i, 2, MAX_PARALLELISM),
                        restore=savepoint)
        out += _drive(resumed, [*share, ("watermark", MAX_WATERMARK)])
        assert resumed.state.num_entries() == 0 and _columnar_rows(resumed.state) == 0
        resumed.close()
    assert _sorted(out) == _sorted(expected(events))
