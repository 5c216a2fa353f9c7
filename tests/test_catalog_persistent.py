"""Catalogs: permanent objects of a 'sqlstream' catalog outlive the session, temporary ones do not."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.catalog.persistent import (
    CatalogManager,
    FunctionDef,
    SqliteCatalog,
    object_from_json,
    object_to_json,
)
from sqlstream.core.errors import CatalogError, SqlError
from sqlstream.core.tables import ColumnDef, TableDef, WatermarkDef
from sqlstream.frontend.session import Session
from tests.conftest import rows

GEN = """
CREATE TABLE {name} (
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(seq * 1000, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'fields.seq.kind' = 'sequence',
        'fields.seq.start' = '1', 'fields.seq.end' = '20');
"""


def _names(session: Session, statement: str) -> list[str]:
    table = session.execute_script(statement)[-1].table
    assert table is not None
    return table.column(0).to_pylist()


def _open(path: Path) -> Session:
    s = Session()
    s.execute_script(f"CREATE CATALOG lake WITH ('type' = 'sqlstream', 'path' = '{path}'); USE CATALOG lake;")
    return s


def test_permanent_objects_persist_across_sessions_and_temporary_ones_do_not(tmp_path: Path) -> None:
    first = _open(tmp_path / "lake")
    first.execute_script(
        "CREATE DATABASE IF NOT EXISTS sales; USE sales;"
        + GEN.format(name="gen")
        + "CREATE VIEW evens AS SELECT seq, ts FROM gen WHERE seq % 2 = 0;"
        + GEN.replace("CREATE TABLE", "CREATE TEMPORARY TABLE").format(name="scratch")
        + "CREATE TEMPORARY VIEW odds AS SELECT seq FROM gen WHERE seq % 2 = 1;"
    )
    assert _names(first, "SHOW TABLES;") == ["evens", "gen", "odds", "scratch"]
    described = first.execute_script("DESCRIBE gen;")[-1].table
    evens = rows(first.execute_script("SELECT * FROM evens;")[-1].table.drop_columns(["op"]))

    second = _open(tmp_path / "lake")
    assert "sales" in _names(second, "SHOW DATABASES;")
    second.execute_script("USE sales;")
    assert _names(second, "SHOW TABLES;") == ["evens", "gen"]
    assert _names(second, "SHOW VIEWS;") == ["evens"]
    assert second.execute_script("DESCRIBE gen;")[-1].table.equals(described)
    again = rows(second.execute_script("SELECT * FROM evens;")[-1].table.drop_columns(["op"]))
    assert again == evens and len(again) == 10
    with pytest.raises(SqlError, match="'scratch' does not exist"):
        second.execute_script("SELECT * FROM scratch;")

    # dropping in one session is seen by the next
    second.execute_script("DROP VIEW evens;")
    third = _open(tmp_path / "lake")
    third.execute_script("USE sales;")
    assert _names(third, "SHOW TABLES;") == ["gen"]


def test_the_default_catalog_is_in_memory_like_flinks(tmp_path: Path) -> None:
    s = Session()
    assert _names(s, "SHOW CATALOGS;") == ["default_catalog"]
    assert _names(s, "SHOW CURRENT CATALOG;") == ["default_catalog"]
    assert _names(s, "SHOW CURRENT DATABASE;") == ["default_database"]
    s.execute_script(GEN.format(name="gen"))
    assert _names(s, "SHOW TABLES;") == ["gen"]
    assert _names(Session(), "SHOW TABLES;") == []


def test_catalog_path_defaults_under_sqlstream_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQLSTREAM_HOME", str(tmp_path / "home"))
    s = Session()
    s.execute_script("CREATE CATALOG mine WITH ('type' = 'sqlstream'); USE CATALOG mine;" + GEN.format(name="g"))
    assert (tmp_path / "home" / "catalogs" / "mine" / "catalog.sqlite").is_file()
    t = Session()
    t.execute_script("CREATE CATALOG mine WITH ('type' = 'sqlstream'); USE mine.default_database;")
    assert _names(t, "SHOW TABLES;") == ["g"]


def test_temporary_objects_shadow_permanent_ones_and_are_dropped_first(tmp_path: Path) -> None:
    s = _open(tmp_path / "c")
    s.execute_script(GEN.format(name="t"))
    s.execute_script(
        "CREATE TEMPORARY TABLE t (x INT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');"
    )
    assert s.execute_script("DESCRIBE t;")[-1].table.column("name").to_pylist() == ["x"]
    s.execute_script("DROP TABLE t;")  # the temporary one
    assert s.execute_script("DESCRIBE t;")[-1].table.column("name").to_pylist() == ["seq", "ts"]
    s.execute_script("DROP TABLE t;")
    assert _names(s, "SHOW TABLES;") == []


def test_use_and_database_statements(tmp_path: Path) -> None:
    s = _open(tmp_path / "c")
    s.execute_script("CREATE DATABASE a; CREATE DATABASE IF NOT EXISTS a; USE a;" + GEN.format(name="g"))
    assert _names(s, "SHOW CURRENT DATABASE;") == ["a"]
    with pytest.raises(CatalogError, match="already exists"):
        s.execute_script("CREATE DATABASE a;")
    s.execute_script("USE CATALOG default_catalog;")
    assert _names(s, "SHOW CURRENT DATABASE;") == ["default_database"]
    assert _names(s, "SHOW TABLES;") == []
    s.execute_script("USE lake.a;")
    assert _names(s, "SHOW TABLES;") == ["g"]
    with pytest.raises(CatalogError, match="current database"):
        s.execute_script("DROP DATABASE a;")
    s.execute_script("USE default_database;")
    with pytest.raises(CatalogError, match="not empty"):
        s.execute_script("DROP DATABASE a;")
    s.execute_script("DROP DATABASE a CASCADE; DROP DATABASE IF EXISTS a;")
    assert _names(s, "SHOW DATABASES;") == ["default_database"]
    with pytest.raises(CatalogError, match=r"database 'nope' does not exist .*default_database"):
        s.execute_script("USE nope;")
    with pytest.raises(CatalogError, match=r"catalog 'nope' does not exist .*default_catalog, lake"):
        s.execute_script("USE CATALOG nope;")
    with pytest.raises(CatalogError, match="current catalog"):
        s.execute_script("DROP CATALOG lake;")
    s.execute_script("USE CATALOG default_catalog; DROP CATALOG lake; DROP CATALOG IF EXISTS lake;")
    assert _names(s, "SHOW CATALOGS;") == ["default_catalog"]


def test_catalog_statement_errors_are_located(tmp_path: Path) -> None:
    s = Session()
    with pytest.raises(CatalogError, match="'type' must be 'sqlstream'"):
        s.execute_script("CREATE CATALOG x WITH ('type' = 'hive');")
    with pytest.raises(CatalogError, match="did you mean 'path'"):
        s.execute_script("CREATE CATALOG x WITH ('type' = 'sqlstream', 'paht' = '/tmp');")
    with pytest.raises(SqlError) as info:
        s.execute_script("SET 'a' = 'b';\nCREATE CATALOG x WITH ('type' 'sqlstream');")
    assert (info.value.line, info.value.col) == (2, 24)
    # the statements around a catalog statement keep their own positions
    with pytest.raises(SqlError) as info:
        s.execute_script("CREATE CATALOG y WITH ('type' = 'generic_in_memory');\nUSE CATALOG y;\nSELEC 1 FROM t;")
    assert info.value.line == 3
    assert _names(s, "SHOW CATALOGS;") == ["default_catalog"]  # a script that does not parse runs nothing


def test_every_column_type_and_definition_part_round_trips() -> None:
    types = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(),
             pa.binary(), pa.date32(), pa.time32("ms"), pa.timestamp("ms"), pa.timestamp("us"),
             pa.timestamp("ms", tz="UTC"), pa.decimal128(12, 3), pa.list_(pa.int32())]
    columns = tuple(ColumnDef(f"c{i}", t, i % 2 == 0) for i, t in enumerate(types))
    table = TableDef("t", columns + (ColumnDef("d", pa.int64(), True, "`c4` + 1"),),
                     {"connector": "datagen", "rows-per-second": "5"}, WatermarkDef("c11", "`c11` - INTERVAL '1' SECOND"),
                     ("c4",))
    assert object_from_json(object_to_json(table)) == table


def test_functions_persist_in_the_catalog_and_temporary_ones_do_not(tmp_path: Path) -> None:
    a = CatalogManager()
    a.register_catalog(SqliteCatalog("c", tmp_path))
    a.use_catalog("c")
    a.create_function(FunctionDef("normalize", "my_udfs.normalize"))
    a.create_function(FunctionDef("scratch", "my_udfs.scratch", temporary=True))
    assert [f.name for f in a.functions()] == ["normalize", "scratch"]
    b = CatalogManager()
    b.register_catalog(SqliteCatalog("c", tmp_path))
    b.use_catalog("c")
    assert b.functions() == [FunctionDef("normalize", "my_udfs.normalize")]
    b.drop_function("normalize")
    with pytest.raises(CatalogError, match="does not exist"):
        b.drop_function("normalize")
    assert a.get_function("NORMALIZE") is None
