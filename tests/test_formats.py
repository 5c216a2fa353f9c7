"""Formats: round trips, projection, per-message use, and malformed-record handling."""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError, DataError
from sqlstream.core.types import parse_type
from sqlstream.runtime.formats import create_format

UTC = dt.UTC

SCHEMA = pa.schema(
    [
        ("id", parse_type("INT")),
        ("name", parse_type("STRING")),
        ("price", parse_type("DOUBLE")),
        ("ts", parse_type("TIMESTAMP(3)")),
        ("amount", parse_type("DECIMAL(10, 2)")),
        ("ok", parse_type("BOOLEAN")),
        ("ltz", parse_type("TIMESTAMP_LTZ(3)")),
        ("day", parse_type("DATE")),
        ("small", parse_type("TINYINT")),
        ("us", parse_type("TIMESTAMP(6)")),
    ]
)


def sample_batch() -> pa.RecordBatch:
    rows = [
        {
            "id": 1, "name": "plain", "price": 1.5, "ts": dt.datetime(2024, 1, 1, 0, 0, 5),
            "amount": Decimal("12.30"), "ok": True, "ltz": dt.datetime(2024, 1, 1, 8, tzinfo=UTC),
            "day": dt.date(2024, 1, 2), "small": -3, "us": dt.datetime(2024, 1, 1, 0, 0, 5, 123456),
        },
        {
            "id": None, "name": None, "price": None, "ts": None, "amount": None, "ok": None,
            "ltz": None, "day": None, "small": None, "us": None,
        },
        {
            "id": 3, "name": "", "price": -0.25, "ts": dt.datetime(2024, 2, 29, 23, 59, 59, 999000),
            "amount": Decimal("-0.05"), "ok": False, "ltz": dt.datetime(1970, 1, 1, tzinfo=UTC),
            "day": dt.date(1999, 12, 31), "small": 127, "us": None,
        },
        {
            "id": 4, "name": 'quote " comma , newline \n tab \t back \\ end', "price": 1e300,
            "ts": None, "amount": Decimal("99999999.99"), "ok": None, "ltz": None, "day": None,
            "small": None, "us": None,
        },
        {
            "id": 5, "name": "  spaced  ", "price": 0.1, "ts": None, "amount": None, "ok": True,
            "ltz": None, "day": None, "small": 0, "us": None,
        },
    ]
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


# Flink's csv format reads no NULL back without 'csv.null-literal'; a literal that
# differs from '' also keeps the empty strings apart from NULL.
CSV_NULL = {"csv.null-literal": "\\N"}


def write_read(tmp_path: Path, fmt: str, batch: pa.RecordBatch, options: dict | None = None,
               columns: list[str] | None = None) -> tuple[Path, pa.Table]:
    if fmt == "csv" and not options:
        options = CSV_NULL
    f = create_format(fmt, batch.schema, options or {}, None, "t")
    path = tmp_path / f"data.{f.extension}"
    w = f.open_writer(str(path), batch.schema)
    w.write(batch.slice(0, 2))
    w.write(batch.slice(2))
    w.close()
    reader = create_format(fmt, batch.schema, options or {}, columns, "t")
    return path, pa.Table.from_batches(list(reader.read_file(str(path))), schema=reader.output_schema)


@pytest.mark.parametrize(
    ("fmt", "options"),
    [
        ("csv", CSV_NULL),
        ("csv", {"csv.field-delimiter": "\\t", "csv.quote-character": "'", "csv.null-literal": "-"}),
        ("csv", {"csv.null-literal": "NULL", "csv.field-delimiter": "|"}),
        ("json", {}),
        ("json", {"json.timestamp-format.standard": "iso-8601"}),
        ("parquet", {}),
    ],
)
def test_round_trip(tmp_path: Path, fmt: str, options: dict) -> None:
    batch = sample_batch()
    _, table = write_read(tmp_path, fmt, batch, options)
    assert table.equals(pa.Table.from_batches([batch]))


def test_csv_text_layout(tmp_path: Path) -> None:
    f = create_format("csv", SCHEMA, {}, None, "t")
    lines = f.encode(sample_batch()).decode().split("\n")
    assert lines[0] == (
        "1,plain,1.5,2024-01-01 00:00:05.000,12.30,true,2024-01-01 08:00:00.000Z,2024-01-02,-3,"
        "2024-01-01 00:00:05.123456"
    )
    assert lines[1] == ",,,,,,,,,"  # NULLs are empty fields
    assert lines[2].startswith("3,,")  # an empty string is an empty field too, as Flink writes it


@pytest.mark.parametrize(
    ("values", "options", "expected"),
    [
        (["a", "b"], {}, ["a", "b"]),  # nothing to quote: the byte scan skips the per-row quoting
        (["a", "b,c"], {}, ["a", '"b,c"']),
        (["x", 'say "hi"'], {}, ["x", '"say ""hi"""']),
        (["x", "two\nlines", "cr\r"], {}, ["x", '"two\nlines"', '"cr\r"']),
        ([" lead", "trail\t", "in side", "\fform"], {}, ['" lead"', '"trail\t"', "in side", '"\fform"']),
        (["a\u00a0", "\u00a0b"], {}, ["a\u00a0", "\u00a0b"]),  # no-break space is not RE2's \\s
        (["x", "a§b", "a;b"], {"csv.field-delimiter": "§"}, ["x", '"a§b"', "a;b"]),
        (["x", "it's"], {"csv.quote-character": "'"}, ["x", "'it''s'"]),
        ([None, "a,b", None], {"csv.null-literal": "N"}, ["N", '"a,b"', "N"]),
    ],
)
def test_csv_quotes_exactly_the_values_that_need_it(values: list, options: dict, expected: list) -> None:
    schema = pa.schema([("s", pa.string())])
    f = create_format("csv", schema, options, None, "t")
    batch = pa.RecordBatch.from_pylist([{"s": v} for v in values], schema=schema)
    assert f.encode_lines(batch).to_pylist() == expected
    # a slice whose neighbours (outside it) hold a delimiter still quotes nothing inside
    padded = pa.RecordBatch.from_pylist([{"s": "p,q"}, {"s": "plain"}, {"s": "r,s"}], schema=schema)
    assert f.encode_lines(padded.slice(1, 1)).to_pylist() == ["plain"]


def test_json_text_layout() -> None:
    f = create_format("json", SCHEMA, {}, ["id", "name", "ts"], "t")
    batch = sample_batch().select(["id", "name", "ts"])
    assert f.encode_messages(batch)[0] == b'{"id":1,"name":"plain","ts":"2024-01-01 00:00:05.000"}'
    iso = create_format("json", SCHEMA, {"json.timestamp-format.standard": "iso-8601"}, None, "t")
    assert b'"ts":"2024-01-01T00:00:05.000"' in iso.encode_messages(sample_batch())[0]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_projection(tmp_path: Path, fmt: str) -> None:
    batch = sample_batch()
    _, table = write_read(tmp_path, fmt, batch, columns=["ts", "id"])
    assert table.schema.names == ["ts", "id"]
    assert table.column("id").to_pylist() == [1, None, 3, 4, 5]
    assert table.column("ts").to_pylist()[0] == dt.datetime(2024, 1, 1, 0, 0, 5)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_projection_of_no_columns_keeps_row_count(tmp_path: Path, fmt: str) -> None:
    _, table = write_read(tmp_path, fmt, sample_batch(), columns=[])
    assert table.num_columns == 0 and table.num_rows == 5


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_messages_round_trip(fmt: str) -> None:
    f = create_format(fmt, SCHEMA, CSV_NULL if fmt == "csv" else {}, None, "t")
    batch = sample_batch()
    messages = f.encode_messages(batch)
    assert len(messages) == batch.num_rows and all(isinstance(m, bytes) for m in messages)
    decoded = f.decode_messages(messages, lambda i: f"partition 0 offset {i}")
    assert decoded.equals(batch)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_messages_skip_blank_and_name_the_bad_one(fmt: str) -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    good = b"1,x" if fmt == "csv" else b'{"a": 1, "b": "x"}'
    bad = b"oops,y" if fmt == "csv" else b'{"a": "oops", "b": "y"}'
    f = create_format(fmt, schema, {}, None, "t")
    assert f.decode_messages([good, b"", good], lambda i: f"offset {i}").num_rows == 2
    with pytest.raises(DataError, match="offset 12"):
        f.decode_messages([good, bad], lambda i: f"offset {i + 11}")
    lenient = create_format(fmt, schema, {"format.ignore-parse-errors": True}, None, "t")
    out = lenient.decode_messages([good, bad, good], lambda i: f"offset {i}")
    # Flink's csv format nulls the field that does not parse and keeps the record.
    expected = [1, None, 1] if fmt == "csv" else [1, 1]
    assert out.column("a").to_pylist() == expected and lenient.parse_errors == 1


def test_csv_message_with_two_records_is_an_error() -> None:
    f = create_format("csv", pa.schema([("a", pa.int64())]), {}, None, "t")
    with pytest.raises(DataError, match="offset 1: expected one record per message, got 2"):
        f.decode_messages([b"1", b"2\n3"], lambda i: f"offset {i}")


# -- CSV errors ------------------------------------------------------------

CSV_SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("price", pa.float64()),
                        ("ts", parse_type("TIMESTAMP(3)"))])


def csv_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "x.csv"
    path.write_text(text)
    return str(path)


def read_all(fmt: str, path: str, options: dict | None = None, schema: pa.Schema = CSV_SCHEMA,
             columns: list[str] | None = None) -> tuple[pa.Table, int]:
    f = create_format(fmt, schema, options or {}, columns, "t")
    table = pa.Table.from_batches(list(f.read_file(path)), schema=f.output_schema)
    return table, f.parse_errors


GOOD = "1,a,1.5,2024-01-01 00:00:01.000\n"


def test_csv_wrong_field_count(tmp_path: Path) -> None:
    path = csv_file(tmp_path, GOOD * 2 + "3,c\n" + GOOD)
    with pytest.raises(DataError) as e:
        read_all("csv", path)
    assert str(e.value) == f"malformed CSV record in {path} line 3: expected 4 fields, got 2"
    path = csv_file(tmp_path, "1\n2\n")
    with pytest.raises(DataError, match="line 1: expected 4 fields, got 1"):
        read_all("csv", path)


def test_csv_bad_number(tmp_path: Path) -> None:
    path = csv_file(tmp_path, GOOD * 6 + "7,g,abc,2024-01-01 00:00:01\n" + GOOD)
    with pytest.raises(DataError) as e:
        read_all("csv", path)
    assert str(e.value) == (
        f"malformed CSV record in {path} line 7: column 'price': cannot parse 'abc' as DOUBLE"
    )


def test_csv_error_line_counts_header_comments_blank_lines_and_multiline_values(tmp_path: Path) -> None:
    text = 'id,name,price,ts\n# comment\n' + GOOD + '\n2,"two\nlines",2.5,\n' + "3,c,x1,\n"
    path = csv_file(tmp_path, text)
    with pytest.raises(DataError, match=r"x.csv line 7: column 'price': cannot parse 'x1' as DOUBLE"):
        read_all("csv", path, {"csv.header": True, "csv.allow-comments": True, "csv.null-literal": ""})


def test_csv_first_error_wins(tmp_path: Path) -> None:
    path = csv_file(tmp_path, GOOD + "2,b,bad,\n3,c\n")
    with pytest.raises(DataError, match="line 2: column 'price'"):
        read_all("csv", path)
    path = csv_file(tmp_path, GOOD + "3,c\n2,b,bad,\n")
    with pytest.raises(DataError, match="line 2: expected 4 fields, got 2"):
        read_all("csv", path)


def test_csv_ignore_parse_errors_nulls_bad_fields_and_drops_bad_records(tmp_path: Path) -> None:
    path = csv_file(tmp_path, "1,a,1.5,\n2,b\n3,c,abc,\n4,d,4.5,not a time\n5,e,5.5,\n")
    for flag in ("csv.ignore-parse-errors", "format.ignore-parse-errors"):
        table, errors = read_all("csv", path, {flag: True, "csv.null-literal": ""})
        assert table.column("id").to_pylist() == [1, 3, 4, 5]  # a wrong field count drops the record
        assert table.column("price").to_pylist() == [1.5, None, 4.5, 5.5]
        assert table.column("ts").to_pylist() == [None] * 4
        assert errors == 3


def test_csv_ignore_parse_errors_in_a_large_file(tmp_path: Path) -> None:
    bad = {17, 4095, 19998}
    lines = [f"{i},n{i},{'oops' if i in bad else i * 0.5},\n" for i in range(20000)]
    path = csv_file(tmp_path, "".join(lines))
    table, errors = read_all("csv", path, {"csv.ignore-parse-errors": True, "csv.null-literal": ""})
    assert errors == 3
    assert table.column("id").to_pylist() == list(range(20000))
    price = table.column("price").to_pylist()
    assert [i for i in range(20000) if price[i] is None] == sorted(bad)
    with pytest.raises(DataError, match="line 18: column 'price': cannot parse 'oops'"):
        read_all("csv", path, {"csv.null-literal": ""})


def _pausing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, waiting after each so that Arrow's reader parses the next block meanwhile."""
    for batch in batches:
        yield batch
        time.sleep(0.05)


def test_csv_counts_a_wrong_field_count_with_its_batch_not_when_arrow_reads_ahead(tmp_path: Path) -> None:
    # Arrow parses a block ahead and reports its invalid rows early; a count taken with a batch (a
    # checkpoint's) must cover the records up to that batch only, or a restore counts them twice
    lines = [f"{i},n{i},1.5,\n" if i % 1000 else f"{i},short\n" for i in range(1, 200_001)]
    path = csv_file(tmp_path, "".join(lines))
    assert Path(path).stat().st_size > 3 << 20  # four of the format's 1 MB blocks
    f = create_format("csv", CSV_SCHEMA, {"csv.ignore-parse-errors": True, "csv.null-literal": ""}, None, "t")
    counts = []
    for batch in _pausing(f.read_file(path)):
        last = batch.column("id")[-1].as_py()
        counts.append((f.parse_errors, last // 1000))  # the short records before the batch's last
    assert len(counts) >= 4 and all(got == want for got, want in counts), counts
    assert f.parse_errors == 200
    # strict: the rows before the first malformed record are read before the error
    lines = [line if i % 1000 else f"{i},n{i},1.5,\n" for i, line in enumerate(lines, 1)]
    lines[150_000 - 1] = "150000,x\n"
    path = csv_file(tmp_path, "".join(lines))
    strict = create_format("csv", CSV_SCHEMA, {"csv.null-literal": ""}, None, "t")
    rows = 0
    with pytest.raises(DataError, match="line 150000: expected 4 fields, got 2"):
        for batch in _pausing(strict.read_file(path)):
            rows += batch.num_rows
    assert rows >= 100_000


def test_csv_lenient_values(tmp_path: Path) -> None:
    path = csv_file(tmp_path, " 1 ,a, 2.5 ,2024-01-01T00:00:01.5\n2,,,2024-01-01 00:00\n")
    table, _ = read_all("csv", path, {"csv.null-literal": ""})
    assert table.to_pylist() == [
        {"id": 1, "name": "a", "price": 2.5, "ts": dt.datetime(2024, 1, 1, 0, 0, 1, 500000)},
        {"id": 2, "name": None, "price": None, "ts": dt.datetime(2024, 1, 1)},
    ]


def test_csv_without_null_literal_nothing_is_null(tmp_path: Path) -> None:
    """Flink (Jackson): an empty STRING field is '', an empty field of another type does not parse."""
    path = csv_file(tmp_path, '1,,1.5,2024-01-01 00:00\n2,"",2.5,2024-01-01 00:00\n')
    table, _ = read_all("csv", path)
    assert table.column("name").to_pylist() == ["", ""]
    path = csv_file(tmp_path, "1,a,,2024-01-01 00:00\n")
    with pytest.raises(DataError, match="line 1: column 'price': cannot parse '' as DOUBLE"):
        read_all("csv", path)
    table, errors = read_all("csv", path, {"csv.ignore-parse-errors": True})
    assert table.to_pylist() == [{"id": 1, "name": "a", "price": None, "ts": dt.datetime(2024, 1, 1)}]
    assert errors == 1


def test_csv_null_literal(tmp_path: Path) -> None:
    path = csv_file(tmp_path, 'NULL,NULL,NULL,NULL\n1,"NULL",NULL,NULL\n2,,NULL,NULL\n')
    table, _ = read_all("csv", path, {"csv.null-literal": "NULL"})
    assert table.column("id").to_pylist() == [None, 1, 2]
    assert table.column("name").to_pylist() == [None, None, ""]  # quoted or not, the literal is NULL
    assert table.column("price").to_pylist() == [None, None, None]
    path = csv_file(tmp_path, '1,"",,\n')
    table, _ = read_all("csv", path, {"csv.null-literal": ""})
    assert table.to_pylist() == [{"id": 1, "name": None, "price": None, "ts": None}]
    with pytest.raises(DataError, match="column 'price': cannot parse '' as DOUBLE"):
        read_all("csv", path, {"csv.null-literal": "NULL"})


def test_csv_boolean_is_true_only_for_the_text_true(tmp_path: Path) -> None:
    """Flink parses CSV booleans with Boolean.parseBoolean: any other text, even '', is FALSE."""
    schema = pa.schema([("k", pa.int32()), ("b", pa.bool_())])
    path = csv_file(tmp_path, "1,true\n2, TRUE \n3,false\n4,\n5,yes\n6,1\n7,N\n")
    table, _ = read_all("csv", path, {"csv.null-literal": "N"}, schema=schema)
    assert table.column("b").to_pylist() == [True, True, False, False, False, False, None]


QUICK_SCHEMA = pa.schema([*SCHEMA, ("big", parse_type("BIGINT")), ("tags", parse_type("ARRAY<INT>"))])
QUICK_GOOD = "1,a,1.5,2024-01-01 00:00:01.000,2.50,true,2024-01-01 00:00:01,2024-01-02,7,2024-01-01 00:00:01.123456,9,1;2"
# one field of a good record replaced: padded, blank, the null literal, malformed, out of range,
# a zone suffix, a finer fraction, or a record of the wrong field count
QUICK_EDITS = [(0, " 3 "), (0, ""), (0, "\t"), (0, "NULL"), (0, "x"), (2, " 2.5"), (2, ""), (2, "nan"),
               (3, "2024-01-01 00:00:01Z"), (3, "2024-01-01T00:00:01.123456"), (3, " "), (3, "NULL"),
               (4, "1.005"), (4, ""), (5, ""), (5, "TRUE"), (6, "2024-01-01 00:00:01+02:00"), (7, ""),
               (7, "2024-13-01"), (8, "300"), (8, "-128"), (9, "2024-01-01 00:00:01.1234567"),
               (10, "9223372036854775808"), (10, " "), (11, ""), (11, "1;x"), (11, "NULL"), (1, ""),
               (1, "NULL"), (None, "1,2")]


def _quick_text(rng: random.Random, records: int, edit_rate: float) -> str:
    lines = []
    for _ in range(records):
        fields = QUICK_GOOD.split(",")
        if rng.random() < edit_rate:
            column, value = rng.choice(QUICK_EDITS)
            if column is None:
                lines.append(value)
                continue
            fields[column] = value
        lines.append(",".join(fields))
    return "\n".join(lines) + "\n"


def _decoded(path: str, options: dict, careful: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """(the rows, the parse-error count) or (the error text, None), by the quick path or, with
    ``careful``, with every column taken through the careful one."""
    from sqlstream.runtime.formats import csv as csv_format

    with monkeypatch.context() as m:
        if careful:
            m.setattr(csv_format, "_quick_columns", lambda columns, fields: ([None] * len(fields), list(range(len(fields)))))
        f = create_format("csv", QUICK_SCHEMA, options, None, "t")
        try:
            batches = list(f.read_file(path))
        except DataError as e:
            return str(e), None
    table = pa.Table.from_batches(batches, schema=f.output_schema)
    assert table.schema == f.output_schema
    return repr(table.to_pylist()), f.parse_errors  # repr: NaN equals NaN


def test_no_blank_text_casts_to_a_non_string_type() -> None:
    # what the CSV quick path rests on: a column whose values all cast holds no blank field
    from sqlstream.runtime.formats import CONVERSION_ERRORS, parse_text

    blanks = ["", " ", "\t", "\n", "\r", "\x0b", "\x0c", " \t ", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028"]
    types = ["TINYINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10, 2)", "DECIMAL(38, 3)", "DATE", "TIME",
             "TIME(6)", "TIMESTAMP(0)", "TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP(9)", "TIMESTAMP_LTZ(3)"]
    for name in types:
        for blank in blanks:
            with pytest.raises(CONVERSION_ERRORS):
                parse_text(pa.array([blank]), parse_type(name))


@pytest.mark.parametrize("null_literal", [None, "", "NULL"])
def test_csv_quick_columns_decode_as_the_careful_path(tmp_path: Path, null_literal: str | None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # columns Arrow casts as they are skip Flink's blank-field rule, which finds nothing in them:
    # the same values, errors and error counts as with every column taken the careful way, over
    # blocks with no edge case (quick), a few, and many
    rng = random.Random(5)
    text = _quick_text(rng, 30_000, 0.0) + _quick_text(rng, 30_000, 0.0005) + _quick_text(rng, 2_000, 0.3)
    path = csv_file(tmp_path, text)
    options = {} if null_literal is None else {"csv.null-literal": null_literal}
    for ignore in (True, False):
        opts = {**options, "csv.ignore-parse-errors": ignore}
        quick = _decoded(path, opts, False, monkeypatch)
        assert quick == _decoded(path, opts, True, monkeypatch)
        if ignore:
            assert quick[0].count("'id'") > 60_000 and quick[1] > 100
        else:
            assert "malformed CSV record" in quick[0]
    # each edit alone, strictly: the same error (or the same values)
    for column, value in QUICK_EDITS:
        fields = QUICK_GOOD.split(",")
        if column is not None:
            fields[column] = value
        path = csv_file(tmp_path, QUICK_GOOD + "\n" + (value if column is None else ",".join(fields)) + "\n")
        assert _decoded(path, options, False, monkeypatch) == _decoded(path, options, True, monkeypatch), value


def _timestamp_as_before(strings: pa.Array, t: pa.DataType) -> pa.Array:
    """Text to a naive TIMESTAMP(p) the one way there was: a trailing Z or z dropped, parsed in
    microseconds (nanoseconds for p > 6), then truncated to the column's unit."""
    import pyarrow.compute as pc

    parsed = pc.cast(pc.replace_substring_regex(strings, r"[Zz]$", ""), pa.timestamp("ns" if t.unit == "ns" else "us"))
    return pc.cast(parsed, t, safe=False)


def test_text_to_timestamp_at_the_column_unit_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # text Arrow parses at the column's unit as it is has nothing to strip (no Z) or truncate (no
    # finer fraction): the same values as the general way; other text still takes that
    import pyarrow.compute as pc

    from sqlstream.runtime.formats import CONVERSION_ERRORS, parse_text

    values = ["2020-01-01 00:00:00", "2020-01-01 00:00:00.5", "2020-01-01T00:00:00.000", "2024-02-29 23:59:59.999",
              "1900-01-01 00:00:00.5", "1969-12-31 23:59:59.9995", "1969-12-31 23:59:59.999999", "2020-01-01",
              "2020-01-01 10:00", "2020-01-01 00:00:00.123456789", "2020-01-01 00:00:00Z", "2020-01-01T00:00:00.5z"]
    for precision in (0, 3, 6, 9):
        t = parse_type(f"TIMESTAMP({precision})")
        for v in values:
            column = pa.array([v, "2021-06-01 12:00:00"])
            try:
                expected = _timestamp_as_before(column, t)
            except CONVERSION_ERRORS:
                with pytest.raises(CONVERSION_ERRORS):
                    parse_text(column, t)
                continue
            assert parse_text(column, t).equals(expected), (v, precision)
    # well-formed text is not scanned for a zone designator
    monkeypatch.setattr(pc, "ends_with", None)
    got = parse_text(pa.array(["2020-01-01 00:00:00.123", "2020-01-01 00:00:01"]), parse_type("TIMESTAMP(3)"))
    assert got.to_pylist() == [dt.datetime(2020, 1, 1, 0, 0, 0, 123000), dt.datetime(2020, 1, 1, 0, 0, 1)]


def test_csv_well_formed_columns_skip_the_blank_field_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # only the BOOLEAN and ARRAY columns (rules of their own), and a column with a blank field, take
    # the careful path
    from sqlstream.runtime.formats import csv as csv_format

    seen: list[list[str]] = []
    scan = csv_format._jackson_text

    def recording(columns: list, fields: list) -> tuple:
        seen.append([f.name for f in fields])
        return scan(columns, fields)

    monkeypatch.setattr(csv_format, "_jackson_text", recording)
    path = csv_file(tmp_path, (QUICK_GOOD + "\n") * 3)
    table, errors = read_all("csv", path, schema=QUICK_SCHEMA)
    assert seen == [["ok", "tags"]] and table.num_rows == 3 and errors == 0
    seen.clear()
    path = csv_file(tmp_path, QUICK_GOOD + "\n" + QUICK_GOOD.replace(",7,", ",,") + "\n")
    table, errors = read_all("csv", path, {"csv.ignore-parse-errors": True}, schema=QUICK_SCHEMA)
    assert seen == [["ok", "small", "tags"]] and table.column("small").to_pylist() == [7, None] and errors == 1


def test_csv_bad_delimiter_option() -> None:
    with pytest.raises(ConnectorError, match="csv.field-delimiter' must be a single character"):
        create_format("csv", CSV_SCHEMA, {"csv.field-delimiter": ";;"}, None, "t")


def test_csv_rejects_map_columns_and_nested_elements() -> None:
    with pytest.raises(ConnectorError, match="format 'csv' does not support column 'a' of type MAP<STRING, INT>"):
        create_format("csv", pa.schema([("a", parse_type("MAP<STRING, INT>"))]), {}, None, "t")
    with pytest.raises(ConnectorError, match="ARRAY<ARRAY<INT>>: its elements or fields must be scalars"):
        create_format("csv", pa.schema([("a", parse_type("ARRAY<ARRAY<INT>>"))]), {}, None, "t")


# -- JSON errors -----------------------------------------------------------


def json_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "f.jsonl"
    path.write_text(text)
    return str(path)


JGOOD = '{"id": 1, "name": "a", "price": 1.5, "ts": "2024-01-01 00:00:01.000"}\n'


def test_json_syntax_error(tmp_path: Path) -> None:
    path = json_file(tmp_path, JGOOD * 4 + '{"id": 5 "name": "e"}\n' + JGOOD)
    with pytest.raises(DataError) as e:
        read_all("json", path)
    assert str(e.value).startswith(f"malformed JSON record in {path} line 5: Expecting ',' delimiter")


def test_json_bad_value_and_not_an_object(tmp_path: Path) -> None:
    path = json_file(tmp_path, JGOOD + '{"id": 2, "price": "abc"}\n')
    with pytest.raises(DataError, match=r"f.jsonl line 2: field 'price': cannot parse 'abc' as DOUBLE"):
        read_all("json", path)
    path = json_file(tmp_path, JGOOD + "[1, 2]\n")
    with pytest.raises(DataError, match="line 2: expected a JSON object, got an array"):
        read_all("json", path)


def test_json_empty_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = json_file(tmp_path, "\n" + JGOOD + "   \n\n" + '{"id": "x"}\n')
    with pytest.raises(DataError, match="line 5: field 'id': cannot parse 'x' as INT"):
        read_all("json", path)
    table, _ = read_all("json", json_file(tmp_path, "\n" + JGOOD + "\n\n" + JGOOD))
    assert table.num_rows == 2


def test_json_ignore_parse_errors(tmp_path: Path) -> None:
    text = JGOOD + "{broken\n" + '{"id": "zz"}\n' + "7\n" + '{"id": 9}\n'
    path = json_file(tmp_path, text)
    for options in ({"json.ignore-parse-errors": True}, {"format.ignore-parse-errors": True}):
        table, errors = read_all("json", path, options)
        assert table.column("id").to_pylist() == [1, 9]
        assert errors == 3


def test_json_ignore_parse_errors_in_a_large_file(tmp_path: Path) -> None:
    bad = {3, 5000, 9999}
    lines = ["{oops\n" if i in bad else f'{{"id": {i}, "price": {i}.5}}\n' for i in range(10000)]
    path = json_file(tmp_path, "".join(lines))
    table, errors = read_all("json", path, {"json.ignore-parse-errors": True})
    assert errors == 3
    assert table.column("id").to_pylist() == [i for i in range(10000) if i not in bad]


def test_json_missing_fields(tmp_path: Path) -> None:
    path = json_file(tmp_path, '{"id": 1, "extra": true}\n{"id": 2, "name": null, "price": 2, "ts": null}\n')
    table, _ = read_all("json", path)
    assert table.column("name").to_pylist() == [None, None]
    with pytest.raises(DataError, match="line 1: field 'name' is missing"):
        read_all("json", path, {"json.fail-on-missing-field": True})
    table, errors = read_all("json", path, {"json.fail-on-missing-field": True, "json.ignore-parse-errors": True})
    assert table.column("id").to_pylist() == [2] and errors == 1


def test_json_lenient_values_and_both_timestamp_forms(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", parse_type("TIMESTAMP(3)")),
                        ("ltz", parse_type("TIMESTAMP_LTZ(3)"))])
    text = (
        '{"id": "7", "name": 12, "ts": "2024-01-01 00:00:01.250", "ltz": "2024-01-01T02:00:00+02:00"}\n'
        '{"id": 8, "name": {"k": [1]}, "ts": "2024-01-01T00:00:02Z", "ltz": "2024-01-01 00:00:00"}\n'
    )
    table, _ = read_all("json", json_file(tmp_path, text), schema=schema)
    assert table.to_pylist() == [
        {"id": 7, "name": "12", "ts": dt.datetime(2024, 1, 1, 0, 0, 1, 250000),
         "ltz": dt.datetime(2024, 1, 1, tzinfo=UTC)},
        {"id": 8, "name": '{"k":[1]}', "ts": dt.datetime(2024, 1, 1, 0, 0, 2),
         "ltz": dt.datetime(2024, 1, 1, tzinfo=UTC)},
    ]


def test_json_column_of_another_json_type_is_converted_vectorized(tmp_path: Path) -> None:
    lines = "".join(f'{{"id": "{i}", "name": {i}, "price": "{i}.5"}}\n' for i in range(3000))
    table, errors = read_all("json", json_file(tmp_path, lines))
    assert table.column("id").to_pylist() == list(range(3000))
    assert table.column("name").to_pylist()[:2] == ["0", "1"]
    assert table.column("price").to_pylist()[1] == 1.5 and errors == 0


def test_json_arrays(tmp_path: Path) -> None:
    schema = pa.schema([("tags", parse_type("ARRAY<STRING>")), ("when", parse_type("ARRAY<TIMESTAMP(3)>"))])
    batch = pa.RecordBatch.from_pylist(
        [{"tags": ["a", None, 'q"'], "when": [dt.datetime(2024, 1, 1)]}, {"tags": None, "when": []}],
        schema=schema,
    )
    _, table = write_read(tmp_path, "json", batch)
    assert table.equals(pa.Table.from_batches([batch]))


def test_parquet_missing_column_and_type_cast(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), path)
    table, _ = read_all("parquet", str(path), schema=pa.schema([("id", pa.int32())]))
    assert table.column("id").type == pa.int32() and table.column("id").to_pylist() == [1, 2]
    with pytest.raises(DataError, match="has no column 'name'"):
        read_all("parquet", str(path), schema=pa.schema([("id", pa.int32()), ("name", pa.string())]))


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_skip_rows(tmp_path: Path, fmt: str) -> None:
    batch = sample_batch()
    path, full = write_read(tmp_path, fmt, batch)
    f = create_format(fmt, SCHEMA, CSV_NULL if fmt == "csv" else {}, None, "t")
    rest = pa.Table.from_batches(list(f.read_file(str(path), skip_rows=3)), schema=SCHEMA)
    assert rest.equals(full.slice(3))
