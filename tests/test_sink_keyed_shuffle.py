"""Flink's ``table.exec.sink.keyed-shuffle``: rows into a sink with a PRIMARY KEY are shuffled by that key.

When a sink runs at another parallelism than its input ('sink.parallelism'), a forward edge would deal
the rows round-robin to the sink's subtasks, so one key's changes would be written by several
subtasks whose commits (or Kafka producers) race: the table could end with a key's older value.  Flink (AUTO, the
default) inserts a hash exchange by the primary key there; FORCE does so whenever the sink has more
than one subtask, NONE never.  The jobs here write real Iceberg and Delta tables and read them back,
and an upsert-kafka topic on a real broker (tansu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from sqlstream.catalog.persistent import parse_statements
from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.planner import planner
from sqlstream.runtime.graph import build_chains
from tests.conftest import rows
from tests.test_connector_upsert_kafka import messages, new_topic

pytest_plugins = ("tests.kafka_broker",)

# 40 rows in order, one per batch, read by one source subtask: in every block of four, key 2g is
# written at positions 0 and 3 and key 2g+1 at positions 1 and 2, so dealt round-robin to two sink
# subtasks the last change of 2g and that of 2g+1 land on different subtasks, each behind an older
# change of the same key on the other one: whichever subtask commits last, some key ends wrong.
N = 40
SOURCE = f"""SET 'parallelism.default' = '2';
SET 'table.exec.batch-size' = '1';
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'scan.parallelism' = '1',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{N - 1}');"""
INSERT = """INSERT INTO lake SELECT seq / 4 * 2 + CASE WHEN seq % 4 IN (0, 3) THEN 0 ELSE 1 END, seq FROM gen;"""
EXPECTED = sorted([(2 * g, 4 * g + 3) for g in range(N // 4)] + [(2 * g + 1, 4 * g + 2) for g in range(N // 4)])


def iceberg_options(tmp: Path) -> str:
    return (f"'connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'sql', "
            f"'uri' = 'sqlite:///{tmp}/catalog.db', 'warehouse' = '{tmp / 'warehouse'}', 'write.upsert.enabled' = 'true'")


def iceberg_rows(tmp: Path) -> list[tuple]:
    table = SqlCatalog("lake", uri=f"sqlite:///{tmp}/catalog.db").load_table("default_database.lake")
    return sorted(rows(table.scan().to_arrow()))


def physical_plan(script: str, query: str) -> str:
    session = Session()
    session.execute_script(script)
    result = session.execute_script(f"EXPLAIN {query}")[-1]
    return result.message.split("== Physical Dataflow ==")[1]


def sink_edge(plan: str) -> str:
    line = next(line for line in plan.splitlines() if " Sink: " in line)
    return line[line.rindex("(") + 1:line.rindex(" <- ")]


TABLES = """SET 'parallelism.default' = '2';
CREATE TABLE src (a INT, b INT, v INT) WITH ('connector' = 'datagen');
CREATE TABLE wider (a INT, b INT, v INT, PRIMARY KEY (b) NOT ENFORCED)
  WITH ('connector' = 'print', 'sink.parallelism' = '3');
CREATE TABLE same (a INT, b INT, v INT, PRIMARY KEY (b) NOT ENFORCED) WITH ('connector' = 'print');
CREATE TABLE single (a INT, b INT, v INT, PRIMARY KEY (b) NOT ENFORCED)
  WITH ('connector' = 'print', 'sink.parallelism' = '1');
CREATE TABLE nokey (a INT, b INT, v INT) WITH ('connector' = 'print', 'sink.parallelism' = '3');"""


@pytest.mark.parametrize(("mode", "table", "edge"), [
    ("AUTO", "wider", "hash[$1]"),  # the sink's parallelism (3) differs from its input's (2)
    ("AUTO", "same", "forward"),  # equal parallelism: each subtask forwards its own rows, in order
    ("AUTO", "nokey", "forward"),  # no primary key: nothing to keep together
    ("NONE", "wider", "forward"),
    ("FORCE", "same", "hash[$1]"),
    ("FORCE", "single", "forward"),  # one sink subtask receives every row in order anyway
    ("force", "wider", "hash[$1]"),  # Flink's enum values, in any case
])
def test_the_explain_shows_the_exchange_by_primary_key_the_mode_asks_for(mode: str, table: str, edge: str) -> None:
    plan = physical_plan(f"{TABLES} SET 'table.exec.sink.keyed-shuffle' = '{mode}';",
                         f"INSERT INTO {table} SELECT * FROM src;")
    assert sink_edge(plan) == edge


def test_the_default_mode_is_auto() -> None:
    assert sink_edge(physical_plan(TABLES, "INSERT INTO wider SELECT * FROM src;")) == "hash[$1]"
    assert sink_edge(physical_plan(TABLES, "INSERT INTO same SELECT * FROM src;")) == "forward"


def test_an_unknown_mode_is_refused_naming_flinks_values() -> None:
    with pytest.raises(PlanError, match="'table.exec.sink.keyed-shuffle': 'SOMETIMES' is not one of AUTO, NONE, FORCE"):
        Session().execute_script("SET 'table.exec.sink.keyed-shuffle' = 'SOMETIMES';")


def test_a_shuffled_sink_keeps_its_inputs_parallelism_under_force() -> None:
    """FORCE at equal parallelism: the hash exchange must not move the sink to parallelism.default."""
    script = TABLES.replace("CREATE TABLE src (a INT, b INT, v INT) WITH ('connector' = 'datagen');",
                            "CREATE TABLE src (a INT, b INT, v INT) WITH ('connector' = 'datagen', "
                            "'scan.parallelism' = '3');")
    session = Session()
    session.execute_script(f"{script} SET 'table.exec.sink.keyed-shuffle' = 'FORCE';")
    insert = parse_statements("INSERT INTO same SELECT * FROM src")[0].node
    _, flow = planner.dataflow([planner.insert_plan(session.catalog, insert, session.config)], session.config)
    sink_chain = next(c for c in build_chains(flow, 2) if c.head.sink is not None)
    assert [i.mode for i in sink_chain.inputs] == ["hash"]
    assert sink_chain.parallelism == 3


@pytest.mark.parametrize("kind", ["iceberg", "delta"])
def test_each_keys_last_change_wins_when_the_sink_runs_wider_than_its_input(kind: str, tmp_path: Path) -> None:
    options = iceberg_options(tmp_path) if kind == "iceberg" else f"'connector' = 'delta', 'table-path' = '{tmp_path / 'd'}'"
    Session().execute_script(f"""{SOURCE}
        CREATE TABLE lake (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({options}, 'sink.parallelism' = '2');
        {INSERT}""")
    got = iceberg_rows(tmp_path) if kind == "iceberg" else sorted(rows(DeltaTable(str(tmp_path / "d")).to_pyarrow_table()))
    assert got == EXPECTED


def test_without_the_shuffle_one_keys_changes_race_across_sink_subtasks(tmp_path: Path) -> None:
    """NONE takes effect: the rows are dealt round-robin, and the Delta table ends with some key's older value."""
    Session().execute_script(f"""{SOURCE} SET 'table.exec.sink.keyed-shuffle' = 'NONE';
        CREATE TABLE lake (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED)
          WITH ('connector' = 'delta', 'table-path' = '{tmp_path / 'd'}', 'sink.parallelism' = '2');
        {INSERT}""")
    assert sorted(rows(DeltaTable(str(tmp_path / "d")).to_pyarrow_table())) != EXPECTED


def test_iceberg_keys_its_rows_by_the_primary_key_itself(tmp_path: Path) -> None:
    """As Iceberg's FlinkSink keys rows by the equality fields: at equal parallelism and with NONE too, so two
    sink subtasks never upsert one key in one checkpoint (which left two rows of a key in the table)."""
    table = f"""CREATE TABLE lake (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ({iceberg_options(tmp_path)});
        CREATE TABLE gen2 (seq BIGINT) WITH ('connector' = 'datagen', 'fields.seq.kind' = 'sequence',
          'fields.seq.start' = '0', 'fields.seq.end' = '399');"""
    settings = "SET 'parallelism.default' = '2'; SET 'table.exec.sink.keyed-shuffle' = 'NONE';"
    query = "INSERT INTO lake SELECT seq % 7, seq FROM gen2;"
    assert sink_edge(physical_plan(settings + table, query)) == "hash[$0]"
    Session().execute_script(f"{settings} SET 'table.exec.batch-size' = '10'; "
                             f"SET 'execution.checkpointing.interval' = '20ms'; {table} {query}")
    got = iceberg_rows(tmp_path)
    assert [k for k, _ in got] == list(range(7))  # one row per key
    assert all(v % 7 == k for k, v in got)


def test_upsert_kafka_gets_each_keys_changes_from_one_producer_in_order(kafka_broker: str) -> None:
    """Two sink subtasks producing one key's changes to its partition would interleave them at random; shuffled
    by the key, one subtask writes them in order, and the topic's last message per key is the last change."""
    topic = new_topic(kafka_broker, 2)
    Session().execute_script(f"""{SOURCE}
        CREATE TABLE lake (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
          'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}', 'key.format' = 'json',
          'value.format' = 'json', 'sink.parallelism' = '2');
        {INSERT}""")
    last: dict[int, int] = {}
    for key, value in messages(kafka_broker, topic):  # partition by partition, each in offset order
        assert key is not None and value is not None
        last[json.loads(key)["k"]] = json.loads(value)["v"]
    assert sorted(last.items()) == EXPECTED
