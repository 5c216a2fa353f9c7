"""Never silently wrong: every clause is carried out or refused at plan time, by name.

Refusals name the construct; OPTIONS hints, CREATE TABLE ... LIKE, ORDER BY/LIMIT after a set
operation and the SET keys take effect; misspelt keys get a did-you-mean.  The LIKE merge results
and error texts were recorded from Flink 2.3 (PyFlink).
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from pathlib import Path

import pytest

from sqlstream.core import config
from sqlstream.core.errors import ConnectorError, PlanError, SqlStreamError
from sqlstream.frontend.session import Session, show_create
from sqlstream.frontend.table_api import TableEnvironment

SOURCE = Path(__file__).resolve().parent.parent / "sqlstream"


@pytest.fixture
def session(tmp_path: Path) -> Session:
    (tmp_path / "a.csv").write_text("".join(f"{i},n{i},2024-01-01 00:00:0{i}.000\n" for i in range(5)))
    (tmp_path / "b.csv").write_text("100,x,2024-01-01 00:00:00.000\n")
    s = Session()
    s.execute_script(f"""
        CREATE TABLE t (a INT, b STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
            WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "a.csv"}', 'format' = 'csv');
        CREATE TABLE base (id INT, name STRING, ts TIMESTAMP(3), c AS id + 1, PRIMARY KEY (id) NOT ENFORCED,
            WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
            WITH ('connector' = 'datagen', 'number-of-rows' = '3');
        CREATE VIEW v AS SELECT a FROM t;""")
    return s


def _rows(session: Session, sql: str) -> list[tuple]:
    table = session.execute_script(sql)[-1].table
    assert table is not None
    return sorted(tuple(r.values())[:-1] for r in table.to_pylist())


def _refused(session: Session, sql: str, *fragments: str) -> str:
    with pytest.raises((PlanError, ConnectorError)) as e:
        session.execute_script(sql)
    message = str(e.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------------------------------- refusals

@pytest.mark.parametrize(("sql", "named"), [
    ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY a ORDER BY ts MEASURES A.b AS x ALL ROWS PER MATCH "
     "PATTERN (A B) DEFINE A AS a > 1) AS T", "ALL ROWS PER MATCH is not supported"),
    ("SELECT a, ROW_NUMBER() OVER (PARTITION BY b ORDER BY ts) AS rn FROM t QUALIFY rn = 1", "QUALIFY"),
    ("SELECT * FROM t TABLESAMPLE BERNOULLI(10)", "TABLESAMPLE"),
    ("SELECT * FROM t PIVOT (SUM(a) FOR b IN ('n1', 'n2'))", "PIVOT"),
    ("SELECT * FROM t, LATERAL TABLE(f(a)) AS T(x)", "unknown table function 'F'"),
    ("SELECT * FROM t, LATERAL (SELECT a FROM t) AS s", "LATERAL subqueries"),
    ("SELECT a FROM t FOR SYSTEM_TIME AS OF ts", "FOR SYSTEM_TIME AS OF is only supported on the right side of a JOIN"),
    ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", "WITH RECURSIVE"),
    ("SELECT DISTINCT ON (a) a FROM t", "DISTINCT ON"),
    ("SELECT /*+ BROADCAST(t) */ a FROM t", "query hints are not supported yet: BROADCAST"),
    ("SELECT * FROM t /*+ LOOKUP('table' = 't') */", "table hint 'LOOKUP' is not supported"),
    ("SELECT * FROM v /*+ OPTIONS('path' = 'x') */", "view 'v' cannot be enriched with new options"),
    ("SELECT a FROM t UNION ALL SELECT a FROM t LIMIT 2 OFFSET 1", "OFFSET after a UNION"),
    ("SELECT b, COUNT(*) FROM t GROUP BY b WITH ROLLUP", "WITH ROLLUP is not Flink SQL; write GROUP BY ROLLUP"),
    ("SELECT b, COUNT(*) FROM t GROUP BY ALL", "GROUP BY ALL"),
    ("SELECT SUM(a) OVER (PARTITION BY b ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW "
     "EXCLUDE CURRENT ROW) FROM t", "EXCLUDE in a window frame"),
])
def test_unsupported_clauses_are_refused_by_name(session: Session, sql: str, named: str) -> None:
    _refused(session, sql, named)


def test_match_recognize_matches_rather_than_returning_the_whole_input(session: Session) -> None:
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.a AS x PATTERN (A) "
           "DEFINE A AS A.a > 3) AS m")
    assert _rows(session, sql) == [(4,)]
    session.execute_script(f"CREATE VIEW w AS {sql}")
    assert _rows(session, "SELECT x + 1 FROM w") == [(5,)]


def test_insert_overwrite_is_refused_in_streaming_mode(session: Session, tmp_path: Path) -> None:
    session.execute_script(f"CREATE TABLE out (a INT) WITH ('connector' = 'filesystem', "
                           f"'path' = '{tmp_path / 'out'}', 'format' = 'csv');")
    _refused(session, "INSERT OVERWRITE out SELECT a FROM t", "INSERT OVERWRITE is not supported in streaming mode")
    _refused(session, "INSERT INTO out PARTITION (a = 1) SELECT a FROM t", "is not partitioned")


def test_partitioned_by_is_refused_where_the_connector_has_no_partitions(session: Session) -> None:
    _refused(session, "CREATE TABLE p (a INT, b STRING) PARTITIONED BY (b) WITH ('connector' = 'datagen')",
             "connector 'datagen' has no partitions")
    assert session.catalog.get("p") is None


def test_batch_runtime_mode_is_refused(session: Session) -> None:
    _refused(session, "SET 'execution.runtime-mode' = 'batch'", "execution.runtime-mode 'batch' is not supported")
    session.execute_script("SET 'execution.runtime-mode' = 'streaming'")


# ---------------------------------------------------------------------------------------- OPTIONS hints

def test_options_hint_overrides_the_tables_options_for_one_query(session: Session, tmp_path: Path) -> None:
    hinted = f"SELECT a, b FROM t /*+ OPTIONS('path' = '{tmp_path / 'b.csv'}') */"
    assert _rows(session, hinted) == [(100, "x")]
    assert len(_rows(session, "SELECT a, b FROM t")) == 5  # the catalog's table is unchanged
    assert _rows(session, "SELECT COUNT(*) FROM base /*+ OPTIONS('number-of-rows' = '7') */")[-1] == (7,)


def test_options_hint_on_a_join_side_and_with_an_alias(session: Session, tmp_path: Path) -> None:
    sql = (f"SELECT x.a AS xa, y.a AS ya FROM t AS x JOIN t /*+ OPTIONS('path' = '{tmp_path / 'b.csv'}') */ AS y "
           "ON x.a + 100 = y.a")
    assert _rows(session, sql) == [(0, 100)]


def test_options_hint_is_validated_like_create_table(session: Session) -> None:
    _refused(session, "SELECT * FROM t /*+ OPTIONS('nope' = '1') */", "unknown option 'nope'")


def test_options_hint_on_an_insert_target(session: Session, tmp_path: Path) -> None:
    session.execute_script(f"""
        CREATE TABLE out (a INT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'o1'}', 'format' = 'csv');
        INSERT INTO out /*+ OPTIONS('path' = '{tmp_path / 'o2'}') */ SELECT a FROM t;""")
    assert not (tmp_path / "o1").exists()
    written = "".join(p.read_text() for p in (tmp_path / "o2").rglob("*") if p.is_file())
    assert sorted(written.split()) == ["0", "1", "2", "3", "4"]


def test_options_hints_can_be_disabled(session: Session) -> None:
    session.execute_script("SET 'table.dynamic-table-options.enabled' = 'false'")
    _refused(session, "SELECT * FROM base /*+ OPTIONS('number-of-rows' = '1') */",
             "'table.dynamic-table-options.enabled' is set to true")


def test_hints_survive_a_view_definition(session: Session, tmp_path: Path) -> None:
    session.execute_script(f"CREATE VIEW hv AS SELECT a FROM t /*+ OPTIONS('path' = '{tmp_path / 'b.csv'}') */")
    assert _rows(session, "SELECT * FROM hv") == [(100,)]


# ---------------------------------------------------------------------------------------- LIKE

def _show(session: Session, name: str) -> str:
    return " ".join(show_create(session.catalog.require(name)).split())


def test_like_without_options_copies_everything(session: Session) -> None:
    # Flink: INCLUDING ALL OVERWRITING OPTIONS; columns of the source first, then the new ones
    session.execute_script("CREATE TABLE d (x INT) WITH ('number-of-rows' = '5') LIKE base")
    table = session.catalog.require("d")
    assert [c.name for c in table.columns] == ["id", "name", "ts", "c", "x"]
    assert table.primary_key == ("id",)
    assert table.watermark is not None and table.watermark.column == "ts"
    assert table.options == {"connector": "datagen", "number-of-rows": "5"}
    assert _rows(session, "SELECT COUNT(*) FROM d")[-1] == (5,)


@pytest.mark.parametrize(("sql", "columns", "options", "key", "watermark"), [
    ("CREATE TABLE d (x INT) WITH ('connector' = 'blackhole') LIKE base (EXCLUDING ALL)",
     ["id", "name", "ts", "x"], {"connector": "blackhole"}, (), None),
    ("CREATE TABLE d LIKE base (INCLUDING OPTIONS EXCLUDING ALL)",
     ["id", "name", "ts"], {"connector": "datagen", "number-of-rows": "3"}, (), None),
    ("CREATE TABLE d LIKE base (EXCLUDING GENERATED)",
     ["id", "name", "ts"], {"connector": "datagen", "number-of-rows": "3"}, ("id",), "ts - INTERVAL '1' SECOND"),
    ("CREATE TABLE d (c AS id * 2) LIKE base (OVERWRITING GENERATED)",
     ["id", "name", "ts", "c"], {"connector": "datagen", "number-of-rows": "3"}, ("id",), "ts - INTERVAL '1' SECOND"),
    ("CREATE TABLE d (WATERMARK FOR ts AS ts) LIKE base (OVERWRITING WATERMARKS)",
     ["id", "name", "ts", "c"], {"connector": "datagen", "number-of-rows": "3"}, ("id",), "ts"),
    ("CREATE TABLE d (x INT) WITH ('connector' = 'blackhole') LIKE base (EXCLUDING OPTIONS)",
     ["id", "name", "ts", "c", "x"], {"connector": "blackhole"}, ("id",), "ts - INTERVAL '1' SECOND"),
])
def test_like_options_merge_as_flink_does(session: Session, sql: str, columns: list[str], options: dict,
                                          key: tuple, watermark: str | None) -> None:
    session.execute_script(sql)
    table = session.catalog.require("d")
    assert [c.name for c in table.columns] == columns
    assert table.options == options
    assert table.primary_key == key
    assert (table.watermark.expression if table.watermark else None) == watermark
    if "OVERWRITING GENERATED" in sql:
        assert table.column("c").computed == "id * 2"


@pytest.mark.parametrize(("sql", "message"), [
    ("CREATE TABLE d WITH ('number-of-rows' = '5') LIKE base (INCLUDING OPTIONS)",
     "There already exists an option ['number-of-rows' -> '3'] in the base table. You might want to specify "
     "EXCLUDING OPTIONS or OVERWRITING OPTIONS."),
    ("CREATE TABLE d (id INT) LIKE base", "A column named 'id' already exists in the base table."),
    ("CREATE TABLE d (c AS id * 2) LIKE base", "A generated column named 'c' already exists in the base table. "
     "You might want to specify EXCLUDING GENERATED or OVERWRITING GENERATED."),
    ("CREATE TABLE d (PRIMARY KEY (name) NOT ENFORCED) LIKE base",
     "The base table already has a primary key. You might want to specify EXCLUDING CONSTRAINTS."),
    ("CREATE TABLE d (WATERMARK FOR ts AS ts) LIKE base",
     "There already exists a watermark spec for column 'ts' in the base table. You might want to specify "
     "EXCLUDING WATERMARKS or OVERWRITING WATERMARKS."),
    ("CREATE TABLE d LIKE base (OVERWRITING ALL)", "Illegal merging strategy 'OVERWRITING' for 'ALL' option."),
    ("CREATE TABLE d LIKE base (OVERWRITING CONSTRAINTS)",
     "Illegal merging strategy 'OVERWRITING' for 'CONSTRAINTS' option."),
    ("CREATE TABLE d LIKE base (INCLUDING OPTIONS INCLUDING OPTIONS)",
     "Each like option feature can be declared only once."),
    ("CREATE TABLE d LIKE nope", "Source table 'nope' of the LIKE clause not found in the catalog"),
    ("CREATE TABLE d LIKE v", "Source table 'v' of the LIKE clause can not be a VIEW"),
])
def test_like_conflicts_fail_with_flinks_messages(session: Session, sql: str, message: str) -> None:
    _refused(session, sql, message)
    assert session.catalog.get("d") is None


def test_like_options_clause_parses_and_prints_back(session: Session) -> None:
    from sqlstream.core.sql import dialect
    from sqlstream.core.sql.script import parse_one

    sql = "CREATE TABLE d (x INT) WITH ('a' = 'b') LIKE base (EXCLUDING ALL INCLUDING OPTIONS)"
    assert parse_one(sql).sql(dialect=dialect.Flink) == sql
    with pytest.raises(SqlStreamError, match="expected one of ALL, CONSTRAINTS"):
        parse_one("CREATE TABLE d LIKE base (INCLUDING EVERYTHING)")


# ---------------------------------------------------------------------------------------- set operations

def test_order_by_and_limit_after_union_apply_to_the_whole_union(session: Session) -> None:
    rows = _rows(session, "SELECT a, ts FROM t UNION ALL SELECT a, ts FROM t ORDER BY ts LIMIT 3")
    assert [r[0] for r in rows] == [0, 0, 1]


def test_column_aliases_on_a_table_rename_its_columns(session: Session) -> None:
    assert _rows(session, "SELECT x.c FROM t AS x (c, d, e) WHERE c > 3") == [(4,)]
    _refused(session, "SELECT a FROM t AS x (c, d, e)", "unknown column 'a'")
    _refused(session, "SELECT c FROM t AS x (c, d)", "alias lists 2 columns but the query has 3")


# ---------------------------------------------------------------------------------------- SET keys

def test_misspelt_key_is_refused_with_did_you_mean(session: Session) -> None:
    _refused(session, "SET 'execution.checkpointing.intervall' = '1 s'",
             "unknown configuration key 'execution.checkpointing.intervall'; "
             "did you mean 'execution.checkpointing.interval'?")
    assert "execution.checkpointing.intervall" not in session.config


@pytest.mark.parametrize(("key", "value", "message"), [
    ("state.backend.type", "foo", "'foo' is not one of hashmap, rocksdb"),
    ("pipeline.max-parallelism", "0", "must be at least 1"),
    ("state.checkpoints.num-retained", "two", "'two' is not an integer"),
    ("execution.checkpointing.interval", "soon", "'soon' is not a duration"),
    ("table.exec.sink.not-null-enforcer", "IGNORE", "'IGNORE' is not one of ERROR, DROP"),
    ("restart-strategy.type", "failure-rate", "restart strategy 'failure-rate' is not supported"),
    ("table.local-time-zone", "+08:00", "'+08:00' is not a supported zone"),  # Flink wants 'GMT+08:00'
    ("table.local-time-zone", "UTC+8", "'UTC+8' is not a supported zone"),
    ("table.local-time-zone", "EST", "'EST' is not a supported zone"),  # Flink refuses short ids
    ("table.local-time-zone", "Mars/Olympus", "'Mars/Olympus' is not a known zone"),
])
def test_bad_values_are_refused(session: Session, key: str, value: str, message: str) -> None:
    _refused(session, f"SET '{key}' = '{value}'", f"invalid value for '{key}'", message)
    assert key not in session.config


def test_keys_without_effect_are_accepted_with_a_warning(session: Session) -> None:
    result = session.execute_script("SET 'table.exec.mini-batch.enabled' = 'true'")[0]
    assert "[WARNING] 'table.exec.mini-batch.enabled' has no effect in sqlstream" in result.message
    result = session.execute_script("SET 'parallelism.default' = '2'")[0]
    assert "WARNING" not in result.message and session.config["parallelism.default"] == "2"


def test_table_api_config_validates_keys_too() -> None:
    env = TableEnvironment.create(streaming=True)
    with pytest.raises(PlanError, match="did you mean 'parallelism.default'"):
        env.get_config().set("parallelism.defualt", "2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.get_config().set("table.exec.mini-batch.size", "100")
    assert any("has no effect" in str(w.message) for w in caught)


def test_savepoint_path_key_restores_the_next_job(session: Session, tmp_path: Path) -> None:
    session.execute_script(f"SET 'execution.savepoint.path' = '{tmp_path / 'missing'}'")
    with pytest.raises(SqlStreamError, match="missing"):
        session.execute_script("SELECT a FROM t")


def test_every_registered_key_is_read_by_the_engine() -> None:
    """A key in the registry that no code reads would be accepted and silently ignored."""
    code = "\n".join(p.read_text() for p in SOURCE.rglob("*.py") if p.name != "config.py")
    unread = [k for k, spec in config.KEYS.items()
              if not spec.fixed and not re.search(rf"[\"']{re.escape(k)}[\"']", code)]
    assert unread == []


# ---------------------------------------------------------------------------------------- CREATE TABLE

def test_named_primary_key_constraint_takes_effect(session: Session) -> None:
    # the form Flink's SHOW CREATE TABLE writes
    session.execute_script("CREATE TABLE k (a INT NOT NULL, b INT, CONSTRAINT pk PRIMARY KEY (a) NOT ENFORCED) "
                           "WITH ('connector' = 'blackhole')")
    assert session.catalog.require("k").primary_key == ("a",)


@pytest.mark.parametrize(("sql", "named"), [
    ("CREATE TABLE k (a INT DEFAULT 1) WITH ('connector' = 'blackhole')", "column constraint 'DEFAULT 1'"),
    ("CREATE TABLE k (a INT CHECK (a > 0)) WITH ('connector' = 'blackhole')", "column constraint 'CHECK"),
    ("CREATE TABLE k (a INT, UNIQUE (a)) WITH ('connector' = 'blackhole')", "'UNIQUE (a)' is not supported"),
    ("CREATE TABLE k (a INT, PRIMARY KEY (a)) WITH ('connector' = 'blackhole')",
     "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint"),
    ("CREATE OR REPLACE TABLE k (a INT) WITH ('connector' = 'blackhole')", "CREATE OR REPLACE TABLE"),
])
def test_unsupported_table_clauses_are_refused(session: Session, sql: str, named: str) -> None:
    _refused(session, sql, named)
    assert session.catalog.get("k") is None


def test_registry_defaults_are_the_engines() -> None:
    from sqlstream.core.state_backends import DEFAULT_STATE_BACKEND
    from sqlstream.runtime.connectors.base import DEFAULT_BATCH_SIZE
    from sqlstream.runtime.hashing import DEFAULT_MAX_PARALLELISM

    assert config.KEYS["table.exec.batch-size"].default == str(DEFAULT_BATCH_SIZE)
    assert config.KEYS["pipeline.max-parallelism"].default == str(DEFAULT_MAX_PARALLELISM)
    assert config.KEYS["state.backend.type"].default == DEFAULT_STATE_BACKEND


# ---------------------------------------------------------------------------------------- meta statements

def test_show_like_filters_the_names(session: Session) -> None:
    def names(sql: str) -> list[str]:
        table = session.execute_script(sql)[-1].table
        assert table is not None
        return table.column(0).to_pylist()

    assert names("SHOW TABLES LIKE 'b%'") == ["base"]
    assert names("SHOW TABLES LIKE '_'") == ["t", "v"]
    assert names("SHOW VIEWS LIKE 'v'") == ["v"]
    assert names("SHOW FUNCTIONS LIKE 'TO\\_TIMESTAMP%'") == ["TO_TIMESTAMP", "TO_TIMESTAMP_LTZ"]
    assert names("SHOW DATABASES LIKE 'nothing%'") == []
    _refused(session, "SHOW TABLES FROM other_db", "SHOW TABLES FROM <database> is not supported yet")


def test_drop_cascade_and_view_options_are_refused(session: Session) -> None:
    _refused(session, "DROP TABLE t CASCADE", "DROP TABLE takes no CASCADE")
    assert session.catalog.get("t") is not None
    _refused(session, "CREATE VIEW w WITH ('k' = 'v') AS SELECT a FROM t", "CREATE VIEW takes no WITH options")


def test_windows_on_an_ltz_time_attribute_align_in_the_session_zone(session: Session, tmp_path: Path) -> None:
    # Flink aligns them in the session zone: a day starts at Tokyo midnight (15:00 UTC) and the
    # bounds are TIMESTAMP wall-clock time; 2024-01-01 14:00 and 16:00 UTC fall on two Tokyo days
    (tmp_path / "ms.csv").write_text("1704117600000\n1704124800000\n")
    session.execute_script(f"""
        CREATE TABLE l (a BIGINT, lt AS TO_TIMESTAMP_LTZ(a, 3), WATERMARK FOR lt AS lt)
            WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "ms.csv"}', 'format' = 'csv');
        SET 'table.local-time-zone' = 'Asia/Tokyo'""")
    tvf = _rows(session, "SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(lt), "
                "INTERVAL '1' DAY)) GROUP BY window_start, window_end")
    legacy = _rows(session, "SELECT TUMBLE_START(lt, INTERVAL '1' DAY) AS s, TUMBLE_END(lt, INTERVAL '1' DAY) AS e, "
                   "COUNT(*) AS c FROM l GROUP BY TUMBLE(lt, INTERVAL '1' DAY)")
    days = [(dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2), 1), (dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 3), 1)]
    assert tvf == legacy == days
    # windows on a TIMESTAMP time attribute do not depend on the zone
    rows = _rows(session, "SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
                 "INTERVAL '1' DAY)) GROUP BY window_start, window_end")
    assert rows == [(dt.datetime(2024, 1, 1), 5)]
