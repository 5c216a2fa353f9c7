"""Bad input gives one clear message with its place, through the CLI, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlstream.frontend.cli import main


def run_cli(tmp_path: Path, sql: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    script = tmp_path / "job.sql"
    script.write_text(sql)
    code = main(["run", str(script)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.err


def csv_table(path: Path, extra: str = "") -> str:
    return f"""CREATE TABLE t (id INT, name STRING, price DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = ''{extra});
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("1,apple,1.5,2024-01-01 00:00:01.000\n2,pear,2.5,2024-01-01 00:00:02.000\n")
    return p


def test_syntax_error_names_line_column_and_token(tmp_path, capsys) -> None:
    code, err = run_cli(tmp_path, "SHOW TABLES;\n\nSELECT id\n  FORM t;\n", capsys)
    assert code == 1
    assert "line 4" in err and "FORM" in err


def test_unknown_column_suggests_the_closest(tmp_path, capsys, data) -> None:
    code, err = run_cli(tmp_path, csv_table(data) + "SELECT id, pricee FROM t;", capsys)
    assert code == 1
    assert "unknown column 'pricee'" in err
    assert "Did you mean 'price'" in err
    assert "line 4, column 12" in err


def test_unknown_table(tmp_path, capsys) -> None:
    code, err = run_cli(tmp_path, "SELECT * FROM nowhere;", capsys)
    assert code == 1 and "'nowhere' does not exist" in err and "line 1, column 15" in err


def test_unknown_connector_lists_the_known_ones(tmp_path, capsys) -> None:
    code, err = run_cli(tmp_path, "CREATE TABLE x (a INT) WITH ('connector' = 'kafak');", capsys)
    assert code == 1
    assert "unknown connector 'kafak'" in err and "datagen" in err and "filesystem" in err


def test_unknown_option_is_refused_at_create_table(tmp_path, capsys, data) -> None:
    code, err = run_cli(tmp_path, csv_table(data, ", 'fromat' = 'csv'"), capsys)
    assert code == 1 and "unknown option 'fromat'" in err and "format" in err


def test_type_mismatch_is_a_plan_error(tmp_path, capsys, data) -> None:
    code, err = run_cli(tmp_path, csv_table(data) + "SELECT name + 1 FROM t;", capsys)
    assert code == 1 and "type mismatch" in err and "line 4" in err


def test_insert_type_mismatch_asks_for_a_cast(tmp_path, capsys, data) -> None:
    sql = csv_table(data) + """CREATE TABLE s (a INT) WITH ('connector' = 'blackhole');
INSERT INTO s SELECT name FROM t;"""
    code, err = run_cli(tmp_path, sql, capsys)
    assert code == 1 and "add a CAST" in err


def test_malformed_csv_record_names_file_and_line(tmp_path, capsys, data) -> None:
    data.write_text(data.read_text() + "3,plum,cheap,2024-01-01 00:00:03.000\n")
    code, err = run_cli(tmp_path, csv_table(data) + "SELECT id, price FROM t;", capsys)
    assert code == 1
    assert str(data) in err and "line 3" in err and "cheap" in err and "price" in err


def test_malformed_csv_fields_are_null_when_parse_errors_are_ignored(data) -> None:
    """As in Flink's csv format: the field that does not parse is NULL, its record is kept."""
    data.write_text(data.read_text() + "3,plum,cheap,2024-01-01 00:00:03.000\n4,fig,4.0,2024-01-01 00:00:04.000\n")
    from tests.conftest import run_sql

    result = run_sql(csv_table(data, ", 'csv.ignore-parse-errors' = 'true'") + "SELECT id, price FROM t;")
    assert result.column("id").to_pylist() == [1, 2, 3, 4]
    assert result.column("price").to_pylist() == [1.5, 2.5, None, 4.0]


def test_malformed_json_record_names_file_and_line(tmp_path, capsys) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"a": 1}\n{"a": 2\n')
    sql = f"CREATE TABLE j (a INT) WITH ('connector' = 'filesystem', 'path' = '{p}', 'format' = 'json');\nSELECT a FROM j;"
    code, err = run_cli(tmp_path, sql, capsys)
    assert code == 1 and str(p) in err and "line 2" in err


def test_missing_file(tmp_path, capsys) -> None:
    missing = tmp_path / "nope.csv"
    code, err = run_cli(tmp_path, csv_table(missing) + "SELECT id FROM t;", capsys)
    assert code == 1 and "does not exist" in err and str(missing) in err


def test_missing_script(capsys) -> None:
    assert main(["run", "/nonexistent/job.sql"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_updating_result_into_append_only_sink_is_refused(tmp_path, capsys, data) -> None:
    sql = csv_table(data) + f"""CREATE TABLE out (name STRING, n BIGINT)
        WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "out"}', 'format' = 'csv', 'csv.null-literal' = '');
INSERT INTO out SELECT name, COUNT(*) FROM t GROUP BY name;"""
    code, err = run_cli(tmp_path, sql, capsys)
    assert code == 1
    assert "append-only" in err and "GroupAggregate" in err and "TUMBLE" in err


def test_aggregate_in_where_is_refused(tmp_path, capsys, data) -> None:
    code, err = run_cli(tmp_path, csv_table(data) + "SELECT id FROM t WHERE COUNT(*) > 1;", capsys)
    assert code == 1 and "HAVING" in err


def test_non_grouped_column_is_refused(tmp_path, capsys, data) -> None:
    code, err = run_cli(tmp_path, csv_table(data) + "SELECT name, id, COUNT(*) FROM t GROUP BY name;", capsys)
    assert code == 1 and "'id' must appear in GROUP BY" in err


def test_window_on_a_column_without_watermark_is_refused(tmp_path, capsys, data) -> None:
    sql = f"""CREATE TABLE n (id INT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE n, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;"""
    code, err = run_cli(tmp_path, sql, capsys)
    assert code == 1 and "time attribute" in err


def test_a_sql_error_on_a_line_with_a_secret_hides_it_and_keeps_the_caret_under_the_token(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = ("CREATE TABLE t (a INT) WITH ('connector' = 'blackhole', 'Password' = 'it''s s3cret', "
           "'sasl.jaas.config' = 'x') oops;")
    code, err = run_cli(tmp_path, sql, capsys)
    assert code == 1 and "s3cret" not in err
    quoted, caret = err.splitlines()[-2:]
    assert quoted == ("  CREATE TABLE t (a INT) WITH ('connector' = 'blackhole', 'Password' = '******', "
                      "'sasl.jaas.config' = '******') oops;")
    assert quoted[caret.index("^"):].startswith("oops")


@pytest.mark.parametrize("expression", ["+".join(["1"] * 1000), "(" * 2000 + "1" + ")" * 2000])
def test_an_expression_nested_too_deeply_is_refused_naming_the_limit(
        expression: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(tmp_path, f"SELECT {expression};", capsys)
    assert code != 0
    assert "nests expressions more than 200 levels deep" in err


def test_an_expression_nested_within_the_limit_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 90 parentheses around 90 chained additions: 180 levels
    code, err = run_cli(tmp_path, "SELECT " + "(" * 90 + "+".join(["1"] * 90) + ")" * 90 + ";", capsys)
    assert code == 0 and "Job finished" in err


def test_a_decimal_beyond_flinks_precision_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(tmp_path, "CREATE TABLE t (d DECIMAL(100, 2)) WITH ('connector' = 'datagen');", capsys)
    assert code != 0
    assert "DECIMAL(100, 2) is out of range" in err


def test_a_sink_path_that_takes_no_files_fails_before_the_job_reads_naming_the_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = run_cli(tmp_path, f"""CREATE TABLE s (x INT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
        CREATE TABLE o (x INT) WITH ('connector' = 'filesystem', 'path' = '{blocker / "out"}', 'format' = 'csv', 'csv.null-literal' = '');
        INSERT INTO o SELECT x FROM s;""", capsys)
    assert code != 0
    assert f"sink table 'o': 'path' = '{blocker / 'out'}' is not a writable directory" in err


def test_a_checkpoint_directory_that_cannot_be_made_fails_the_job_at_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = run_cli(tmp_path, f"""SET 'execution.checkpointing.interval' = '1s';
        SET 'execution.checkpointing.dir' = 'file://{blocker / "ck"}';
        CREATE TABLE s (x INT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
        SELECT x FROM s;""", capsys)
    assert code != 0
    assert f"checkpoint directory '{blocker / 'ck'}' (execution.checkpointing.dir) cannot be created" in err
