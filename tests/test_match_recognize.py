"""MATCH_RECOGNIZE: the planner's refusals, and the NFA's partial matches across a savepoint.

Flink's answers for the supported forms are pinned by the reference group
tests/flink_reference/cases/match_recognize.sql; these tests pin what that group cannot: the
operator's partial matches (rows mid-pattern) survive a snapshot restored on another backend,
and every construct not carried out is refused at plan time by name.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from sqlstream.core.errors import PlanError, SqlError
from sqlstream.core.sql.script import parse_one
from sqlstream.frontend.session import Session
from sqlstream.planner.planner import dataflow, select_plan
from tests.harness import OperatorHarness

DDL = ("CREATE TABLE t (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
       "WITH ('connector' = 'datagen')")
QUERY = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
         "MEASURES FIRST(A.v) AS a, LAST(B.v) AS b, C.v AS c, COUNT(B.v) AS n, MATCH_ROWTIME() AS mt "
         "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) "
         "DEFINE B AS B.v > LAST(B.v, 1) OR (LAST(B.v, 1) IS NULL AND B.v > A.v), C AS C.v < LAST(B.v)) AS r")


def _session() -> Session:
    session = Session()
    session.execute_script(DDL)
    return session


def _plan(sql: str) -> str:
    return _session().execute_script(f"EXPLAIN {sql};")[0].message


def _node():  # noqa: ANN202 - a planned PhysicalNode
    _, flow = dataflow([select_plan(_session().catalog, parse_one(QUERY))], {})
    return next(n for n in flow.nodes if n.name == "MatchRecognize")


def _batch(rows: list[tuple[int, int, int]]) -> pa.RecordBatch:
    k, v, t = zip(*rows, strict=True)
    schema = pa.schema([("k", pa.int32()), ("v", pa.int32()), ("ts", pa.timestamp("ms"))])
    return pa.record_batch([pa.array(k, pa.int32()), pa.array(v, pa.int32()), pa.array(t, pa.timestamp("ms"))],
                           schema=schema)


# key 1 rises 1 -> 2 -> 5 and falls to 3; key 2 rises 10 -> 11 -> 12 and falls to 4 later
FIRST = [(1, 1, 1000), (2, 10, 1500), (1, 2, 2000), (2, 11, 2500), (1, 5, 3000)]
SECOND = [(2, 12, 3500), (1, 3, 4000), (2, 4, 4500), (1, 9, 5000)]
EXPECTED = sorted([(1, 1, 5, 3, 2, dt.datetime(1970, 1, 1, 0, 0, 4)),
                   (2, 10, 12, 4, 2, dt.datetime(1970, 1, 1, 0, 0, 4, 500000))])


def _rows(harness: OperatorHarness) -> list[tuple]:
    return [r[1:] for r in harness.take()]


def test_matches_complete_across_firings() -> None:
    harness = OperatorHarness(_node())
    harness.process_batch(_batch(FIRST))
    harness.watermark(3000)
    assert _rows(harness) == []  # every key is mid-pattern
    harness.process_batch(_batch(SECOND))
    harness.watermark(5000)
    assert sorted(_rows(harness)) == EXPECTED
    # key 2 has no open match left and keeps no state; key 1's row at 5000 started a new one
    open_matches = {key: value[3] for _, key, value in harness.operator.nfa.items()}
    assert open_matches == {(1,): ((4, 0, 1, (0,)),)}


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_partial_matches_survive_a_savepoint_restored_on_another_backend(backend: str) -> None:
    old = OperatorHarness(_node())
    old.process_batch(_batch(FIRST))
    old.watermark(3000)
    old.process_batch(_batch(SECOND[:1]))  # waiting for the watermark, in keyed state too
    assert _rows(old) == []
    restored = OperatorHarness(_node(), backend, restore=old.snapshot())
    restored.process_batch(_batch(SECOND[1:]))
    restored.watermark(5000)
    assert sorted(_rows(restored)) == EXPECTED


def test_late_rows_are_dropped() -> None:
    harness = OperatorHarness(_node())
    harness.process_batch(_batch(FIRST))
    harness.watermark(3000)
    harness.process_batch(_batch([(1, 3, 2500)]))  # behind the watermark: would complete key 1's match
    harness.watermark(6000)
    assert _rows(harness) == []


WITHIN = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS a, C.v AS c "
          "ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+? C) WITHIN INTERVAL '2' SECOND "
          "DEFINE A AS A.v IN (1, 2), B AS B.v > 0, C AS C.v = 9 AND A.v = 2) AS r")


def _within_node():  # noqa: ANN202 - a planned PhysicalNode
    _, flow = dataflow([select_plan(_session().catalog, parse_one(WITHIN))], {})
    return next(n for n in flow.nodes if n.name == "MatchRecognize")


@pytest.mark.parametrize("restored", [False, True])
def test_within_times_out_a_key_no_row_reaches_any_more(restored: bool) -> None:
    """Flink's CepOperator visits a key with partial matches at every watermark, so WITHIN drops
    them although the key gets no more rows, and a completed match they held back is emitted."""
    harness = OperatorHarness(_within_node())
    # key 1: the match started at 1000 (A.v = 1) cannot end in C, so it stays open on B rows; the
    # one started at 1500 (A.v = 2) completes at 2200 but waits for the earlier one to close
    harness.process_batch(_batch([(1, 1, 1000), (1, 2, 1500), (1, 5, 2000), (1, 9, 2200), (2, 1, 2600)]))
    harness.watermark(2600)
    assert _rows(harness) == []
    if restored:
        harness = OperatorHarness(_within_node(), "rocksdb", restore=harness.snapshot())
    harness.watermark(2999)  # key 1's partial match started at 1000 is 1999 ms old: open
    assert _rows(harness) == []
    harness.watermark(3000)  # ... now it times out: the match it held back comes out
    assert _rows(harness) == [(1, 2, 9)]
    assert [key for _, key, _ in harness.operator.nfa.items()] == [(2,)]
    harness.watermark(4600)  # key 2's partial match (A at 2600) times out: no state is left
    assert list(harness.operator.nfa.items()) == [] and harness.state.num_entries() == 0


def test_order_by_a_proctime_column_matches_on_the_wall_clock() -> None:
    """Flink's MATCH_RECOGNIZE runs in processing time when ordered by a PROCTIME() column: the
    column becomes the time attribute, stamped as rows arrive (results: reference case
    match_recognize.proctime_order)."""
    plan = _plan("SELECT * FROM (SELECT k, v, PROCTIME() AS pt FROM t) MATCH_RECOGNIZE (PARTITION BY k ORDER BY pt "
                 "MEASURES A.v AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.v > A.v) AS r")
    assert "MatchRecognize(partition=[$0], order=$2, pattern=[A B]" in plan
    assert "WatermarkAssigner(proctime=pt, watermark=$2:pt)" in plan


def test_match_proctime_is_a_processing_time_attribute() -> None:
    """Flink: MATCH_PROCTIME() returns a proctime attribute for later time-based operations."""
    session = _session()
    session.execute_script("CREATE VIEW m AS SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES "
                           "A.v AS a, MATCH_PROCTIME() AS pt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.v > A.v) "
                           "AS r;")
    plan = session.execute_script("EXPLAIN SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE m, "
                                  "DESCRIPTOR(pt), INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end;")[0].message
    assert "WatermarkAssigner(proctime=pt, watermark=$2:pt)" in plan


def test_explain_shows_the_pattern_and_skip() -> None:
    plan = _plan(QUERY)
    assert "MatchRecognize(partition=[$0], order=$2, pattern=[A B+ C]" in plan
    assert "skip=PAST LAST ROW" in plan


def test_explain_shows_within_in_milliseconds() -> None:
    plan = _plan("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS a ONE ROW PER MATCH "
                 "PATTERN (A B) WITHIN INTERVAL '1:30' MINUTE TO SECOND DEFINE B AS B.v > A.v) AS r")
    assert "pattern=[A B], within=90000ms" in plan


_MR = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {m} ONE ROW PER MATCH {rest}) AS r"


@pytest.mark.parametrize(("sql", "message"), [
    (_MR.format(m="Z.v AS z", rest="PATTERN (A B) DEFINE A AS A.v > 1"), "Z in Z.v is not a variable of the PATTERN"),
    # Flink ignores the DEFINE of a name the PATTERN lacks, but validates it
    (_MR.format(m="A.v AS a", rest="PATTERN (A B) DEFINE Z AS Z.nope > 1"), "nope"),
    ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY v MEASURES A.v AS a PATTERN (A B) "
     "DEFINE A AS A.v > 1) AS r", "must be ordered by the input's time attribute"),
    ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts DESC MEASURES A.v AS a PATTERN (A B) "
     "DEFINE A AS A.v > 1) AS r", "must be ordered by the input's time attribute"),
    ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS a ALL ROWS PER MATCH "
     "PATTERN (A B) DEFINE A AS A.v > 1) AS r", "ALL ROWS PER MATCH is not supported"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A | B C) DEFINE A AS A.v > 1"), r"alternation \(\|\) in PATTERN"),
    (_MR.format(m="A.v AS a", rest="PATTERN ((A B)+ C) DEFINE A AS A.v > 1"), "grouping with parentheses"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A?? B) DEFINE A AS A.v > 1"), "Reluctant optional variables"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B*?) DEFINE A AS A.v > 1"), "may match no row"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B+) DEFINE A AS A.v > 1"), "Greedy quantifiers are not allowed"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A+ B* C) DEFINE A AS A.v > 1"),
     "B may match no row right after the greedy A: Optional pattern cannot be preceded by greedy pattern"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B) DEFINE B AS B.v > PREV(B.v)"), "physical offsets"),
    (_MR.format(m="CLASSIFIER() AS c", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "CLASSIFIER in MEASURES"),
    (_MR.format(m="MATCH_NUMBER() AS c", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "MATCH_NUMBER in MEASURES"),
    (_MR.format(m="RUNNING LAST(B.v) AS b", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "RUNNING in MEASURES"),
    (_MR.format(m="PREV(B.v) AS b", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "cannot use PREV/NEXT in MEASURES"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B) DEFINE B AS B.v > NEXT(B.v, 1)"), "physical offsets"),
    (_MR.format(m="LAST(A.v, -1) AS a", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "integer of 0 or more"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A{,2} B) DEFINE A AS A.v > 1"), r"quantifier A\{,2\} is not supported"),
    (_MR.format(m="A.v AS a", rest="PATTERN (PERMUTE(A, B) C) DEFINE A AS A.v > 1"), "PERMUTE in PATTERN"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A {- B -} C) DEFINE A AS A.v > 1"), "exclusion"),
    (_MR.format(m="MATCH_ROWTIME(v) AS t", rest="PATTERN (A B) DEFINE B AS B.v > 1"),
     "MATCH_ROWTIME requires argument to be a row time attribute type, but is 'INT'"),
    (_MR.format(m="A.v AS a, B.v AS a", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "two measures are named a"),
    (_MR.format(m="A.v AS k", rest="PATTERN (A B) DEFINE B AS B.v > 1"), "ambiguously defined"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B) SUBSET AB = (A, B), AB = (B) DEFINE B AS B.v > 1"),
     "SUBSET AB: the name is taken"),
    (_MR.format(m="LAST(AZ.v) AS p", rest="PATTERN (A B) SUBSET AZ = (A, Z) DEFINE B AS B.v > 1"),
     "SUBSET AZ names Z, which is not a variable"),
    (_MR.format(m="A.v AS a", rest="PATTERN (A B C) SUBSET AB = (A, B) DEFINE C AS C.v > LAST(AB.v)"),
     "SUBSET variable AB in LAST.* cannot be read in DEFINE"),
    (_MR.format(m="SUM(B.v) AS s", rest="PATTERN (A B) DEFINE B AS B.v > SUM(DISTINCT A.v)"), r"SUM\(DISTINCT"),
    (_MR.format(m="A.v AS a", rest="AFTER MATCH SKIP TO FIRST Q PATTERN (A B) DEFINE B AS B.v > 1"),
     "unknown pattern variable Q"),
    ("SELECT * FROM (SELECT k, v, MAX(ts) AS ts FROM t GROUP BY k, v) MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
     "MEASURES A.v AS a PATTERN (A B) DEFINE B AS B.v > 1) AS r", "updating"),
])
def test_refusals_name_the_construct(sql: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        _plan(sql)


def test_an_empty_pattern_is_a_located_syntax_error() -> None:
    with pytest.raises(SqlError, match=r"column 116 near 'DEFINE': MATCH_RECOGNIZE: the PATTERN is empty"):
        _plan(_MR.format(m="A.v AS a", rest="PATTERN () DEFINE B AS B.v > 1"))
