"""Flink's STATE_TTL query hint: per-input state TTLs for a query block's regular joins and group
aggregation, in place of table.exec.state.ttl (planner.hints)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import PlanError
from sqlstream.core.physical import GroupAggConfig, RegularJoinConfig
from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.planner import dataflow, select_plan
from sqlstream.runtime.clock import ManualClock
from sqlstream.runtime.operators.join import RegularJoinOperator
from tests.harness import OperatorHarness

DAY, HOUR = 86_400_000, 3_600_000


@pytest.fixture
def session(tmp_path: Path) -> Session:
    s = Session()
    for name in ("orders", "users"):
        (tmp_path / f"{name}.csv").write_text("1,2\n")
    s.execute_script(f"""
        CREATE TABLE orders (order_id INT, user_id INT)
          WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "orders.csv"}', 'format' = 'csv');
        CREATE TABLE users (user_id INT, score INT)
          WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "users.csv"}', 'format' = 'csv');
        CREATE VIEW big_users AS SELECT * FROM users WHERE score > 10;""")
    return s


def _configs(session: Session, sql: str, settings: dict[str, str] | None = None) -> list:
    root = select_plan(session.catalog, parse_one(sql), settings)
    _, flow = dataflow([root], settings)
    return [n.config for n in flow.nodes]


def _one(configs: list, kind: type):
    found = [c for c in configs if isinstance(c, kind)]
    assert len(found) == 1
    return found[0]


def test_join_sides_take_the_ttl_of_the_alias_or_table_naming_them(session: Session) -> None:
    sql = ("SELECT /*+ STATE_TTL('o' = '1d', 'users' = '2h') */ o.order_id FROM orders AS o "
           "JOIN users ON o.user_id = users.user_id")
    assert _one(_configs(session, sql), RegularJoinConfig).state_ttl_ms == (DAY, 2 * HOUR)


def test_a_side_without_a_key_keeps_the_session_ttl(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('u' = '1h') */ * FROM orders JOIN users AS u ON orders.user_id = u.user_id"
    config = _one(_configs(session, sql, {"table.exec.state.ttl": "5 min"}), RegularJoinConfig)
    assert config.state_ttl_ms == (300_000, HOUR)


def test_a_hinted_zero_keeps_state_forever_whatever_the_session_ttl(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('orders' = '0') */ user_id, COUNT(*) FROM orders GROUP BY user_id"
    config = _one(_configs(session, sql, {"table.exec.state.ttl": "1 h"}), GroupAggConfig)
    assert config.state_ttl_ms is None


def test_group_aggregation_takes_the_ttl_of_its_input(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('orders' = '90 s') */ user_id, COUNT(*) FROM orders GROUP BY user_id"
    assert _one(_configs(session, sql), GroupAggConfig).state_ttl_ms == 90_000
    distinct = "SELECT /*+ STATE_TTL('orders' = '1 min') */ DISTINCT user_id FROM orders"
    assert _one(_configs(session, distinct), GroupAggConfig).state_ttl_ms == 60_000


def test_views_and_subquery_aliases_are_hint_keys(session: Session) -> None:
    sql = ("SELECT /*+ STATE_TTL('b' = '1h', 'big_users' = '3h') */ b.order_id FROM "
           "(SELECT * FROM orders) AS b JOIN big_users ON b.user_id = big_users.user_id")
    assert _one(_configs(session, sql), RegularJoinConfig).state_ttl_ms == (HOUR, 3 * HOUR)


def test_a_hint_only_reaches_its_own_query_block(session: Session) -> None:
    # the inner block's aggregation keeps its hint; the outer join's sides keep theirs
    sql = ("SELECT /*+ STATE_TTL('agg' = '1d') */ agg.user_id FROM (SELECT /*+ STATE_TTL('orders' = '1h') */ "
           "user_id, COUNT(*) AS n FROM orders GROUP BY user_id) AS agg JOIN users ON agg.user_id = users.user_id")
    configs = _configs(session, sql, {"table.exec.state.ttl": "5 min"})
    assert _one(configs, GroupAggConfig).state_ttl_ms == HOUR
    assert _one(configs, RegularJoinConfig).state_ttl_ms == (DAY, 300_000)


def test_a_key_naming_no_input_is_refused_as_in_flink(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('foo' = '1d') */ * FROM orders JOIN users ON orders.user_id = users.user_id"
    with pytest.raises(PlanError, match=r"cannot match the name of input tables or views: `foo` in `state_ttl`"):
        _configs(session, sql)


def test_a_malformed_duration_is_refused_naming_it(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('orders' = 'soon') */ user_id, COUNT(*) FROM orders GROUP BY user_id"
    with pytest.raises(PlanError, match=r"STATE_TTL\('orders' = 'soon'\)"):
        _configs(session, sql)


def test_hints_sqlstream_does_not_apply_are_still_refused(session: Session) -> None:
    sql = "SELECT /*+ STATE_TTL('orders' = '1d'), BROADCAST(users) */ * FROM orders JOIN users ON TRUE"
    with pytest.raises(PlanError, match="BROADCAST"):
        _configs(session, sql)


@pytest.mark.parametrize("columnar", [False, True], ids=["per-key", "columnar"])
def test_each_join_side_expires_after_its_own_ttl(columnar: bool) -> None:
    left = pa.schema([("k", pa.int32()), ("a", pa.int32())])
    right = pa.schema([("k", pa.int32()), ("b", pa.int32())])
    out = pa.schema(list(left) + list(right))
    clock = ManualClock()
    op = OperatorHarness(RegularJoinOperator("INNER", (0,), (0,), None, left, right, out, append_only=True,
                                             state_ttl_ms=(100, None), columnar=columnar), "hashmap", clock, inputs=2)
    op.process_batch(pa.record_batch([pa.array([1], pa.int32()), pa.array([7], pa.int32())], schema=left), input_index=0)
    op.process_batch(pa.record_batch([pa.array([1], pa.int32()), pa.array([8], pa.int32())], schema=right), input_index=1)
    assert [tuple(r) for _, *r in op.take()] == [(1, 7, 1, 8)]
    clock.advance(100)
    # the left row has expired: a new right row finds nothing; the right row never expires
    op.process_batch(pa.record_batch([pa.array([1], pa.int32()), pa.array([9], pa.int32())], schema=right), input_index=1)
    assert op.take() == []
    clock.advance(10_000_000)
    op.process_batch(pa.record_batch([pa.array([1], pa.int32()), pa.array([6], pa.int32())], schema=left), input_index=0)
    assert sorted(tuple(r) for _, *r in op.take()) == [(1, 6, 1, 8), (1, 6, 1, 9)]
