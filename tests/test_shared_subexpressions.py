"""A Calc evaluates a subexpression repeated in its filter and projection once a batch (as Flink's
generated code reuses a common expression), with the rows and errors of evaluating each place."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
import sqlglot

import sqlstream.core.sql.dialect  # noqa: F401  (registers read="flink")
from sqlstream.core import functions
from sqlstream.core.evaluator import Projector, as_array, compile_expr
from sqlstream.core.expressions import Expr
from sqlstream.planner.expr_binder import ExprBinder
from sqlstream.planner.scope import Scope
from sqlstream.runtime.connectors.nexmark import NexmarkConfig, generate
from sqlstream.runtime.operators.calc import CalcOperator
from tests.harness import OperatorHarness

Q21_WHERE = ("REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL "
             "OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')")
Q21_CHANNEL_ID = ("CASE WHEN lower(channel) = 'apple' THEN '0' WHEN lower(channel) = 'google' THEN '1' "
                  "WHEN lower(channel) = 'facebook' THEN '2' WHEN lower(channel) = 'baidu' THEN '3' "
                  "ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) END")


def bind(sql: str, schema: pa.Schema) -> Expr:
    return ExprBinder(Scope.of(schema), zone="UTC").bind(sqlglot.parse_one(f"SELECT {sql}", read="flink").expressions[0])


def run_calc(where: str | None, select: list[str], batch: pa.RecordBatch) -> list[tuple]:
    op = OperatorHarness(CalcOperator(bind(where, batch.schema) if where else None,
                                      [bind(s, batch.schema) for s in select], [f"c{i}" for i in range(len(select))]),
                         "hashmap")
    op.process_batch(batch)
    return [tuple(r) for _, *r in op.take()]


def each_place_alone(where: str, select: list[str], batch: pa.RecordBatch) -> list[tuple]:
    """The same Calc with every expression compiled on its own (nothing shared)."""
    mask = as_array(compile_expr(bind(where, batch.schema))(batch), batch.num_rows, pa.bool_())
    kept = batch.filter(mask)
    columns = [as_array(compile_expr(e)(kept), kept.num_rows, e.type).to_pylist()
               for e in (bind(s, batch.schema) for s in select)]
    return list(zip(*columns, strict=True))


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the LOWER and REGEXP_EXTRACT kernels run (the real kernels, counted)."""
    calls = {"LOWER": 0, "REGEXP_EXTRACT": 0}
    for name in calls:
        fn = functions.REGISTRY[name]

        def counted(*args: object, _kernel=fn.kernel, _name=name, **kwargs: object) -> object:
            calls[_name] += 1
            return _kernel(*args, **kwargs)

        monkeypatch.setitem(functions.REGISTRY, name, dataclasses.replace(fn, kernel=counted))
    return calls


def test_q21_runs_lower_and_regexp_extract_once_a_batch_with_the_rows_of_each_place_alone(
        kernel_calls: dict[str, int]) -> None:
    bids = generate(NexmarkConfig(), "bid", np.arange(20_000)).select(["auction", "channel", "url"])
    select = ["auction", "channel", Q21_CHANNEL_ID]
    expected = each_place_alone(Q21_WHERE, select, bids)
    kernel_calls.update(LOWER=0, REGEXP_EXTRACT=0)
    assert run_calc(Q21_WHERE, select, bids) == expected
    assert kernel_calls == {"LOWER": 1, "REGEXP_EXTRACT": 1}
    assert 0 < len(expected) < bids.num_rows  # the filter drops rows, so the carried values are cut


def test_a_branch_that_fails_on_rows_it_does_not_take_still_runs_on_only_its_rows() -> None:
    # 10 / i is repeated but fails on i = 0, which both CASEs guard against: each CASE falls back
    # to its branches on the rows that take them, and the shared value of one batch is not reused
    # for another
    batch = pa.record_batch([pa.array([0, 2, 5, 20, 0, 1], pa.int32())], names=["i"])
    where = "CASE WHEN i <> 0 THEN 10 / i > 1 ELSE FALSE END"
    assert run_calc(where, ["i", "CASE WHEN i <> 0 THEN 10 / i ELSE -1 END"], batch) == [(2, 5), (5, 2), (1, 10)]


def test_per_site_functions_are_not_shared() -> None:
    batch = pa.record_batch([pa.array(np.arange(1000))], names=["x"])
    projector = Projector([bind("RAND()", batch.schema), bind("RAND()", batch.schema)], ["a", "b"])
    out = projector(batch)
    assert out.column(0).to_pylist() != out.column(1).to_pylist()
