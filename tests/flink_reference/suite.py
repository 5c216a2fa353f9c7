"""The reference suite's shared parts, standard library only: the recorder runs under PyFlink's own
Python, the test under sqlstream's. A case file ``cases/<group>.sql`` holds cases, each starting at a
``-- case: <name>`` line and made of statements ended by ``;`` at the end of a line (``SET``,
``CREATE VIEW`` ... and a final ``SELECT``); its golden file ``cases/<group>.golden.json`` holds what
Flink gave for each case: the column names and types and the final rows (changelog applied), or the
error. Values are JSON, tagged where JSON has no such type (see ``encode``)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
CASES = HERE / "cases"
DATA = HERE / "data"
KEYED_GROUPS = ("aggregates", "grouping_sets", "group_windows", "joins", "json", "nested", "over", "over_lag", "retract",
                "setops", "topn", "tz_windows", "windows")
_CASE = re.compile(r"^-- case: *([A-Za-z0-9_]+) *$", re.MULTILINE)
_END = re.compile(r";[ \t]*(?:--[^\n]*)?(?:\n|\Z)")


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    sql: str  # the case's statements, as written

    @property
    def id(self) -> str:
        return f"{self.group}.{self.name}"

    @property
    def parallelisms(self) -> tuple[int, ...]:
        """Parallelism 1 for every case; 2 as well for a third of the cases (a fixed choice by name)
        of the groups whose operators exchange rows by key, to keep the suite's run short."""
        if self.group in KEYED_GROUPS and zlib.crc32(self.name.encode()) % 3 == 0:
            return (1, 2)
        return (1,)

    def statements(self, tmp: Path | None = None) -> list[str]:
        """The case's statements without their ``;``, comment lines dropped, ``{data}`` replaced by
        the data folder's absolute path and ``{tmp}`` by ``tmp``, a fresh folder for what the case
        writes (sink tables)."""
        sql = self.sql.replace("{data}", str(DATA.resolve()))
        if "{tmp}" in sql:
            if tmp is None:
                raise ValueError(f"{self.id} writes into {{tmp}}: pass a folder")
            sql = sql.replace("{tmp}", str(tmp))
        out = []
        for piece in _END.split(sql):
            code = "\n".join(line for line in piece.splitlines() if not line.strip().startswith("--")).strip()
            if code:
                out.append(code)
        return out


def tables_ddl() -> list[str]:
    """The CREATE TABLE statements every case starts from, with the data folder's absolute path."""
    text = (HERE / "tables.sql").read_text(encoding="utf-8")
    return Case("tables", "ddl", text).statements()


def groups() -> list[str]:
    return sorted(p.stem for p in CASES.glob("*.sql"))


def load_group(group: str) -> list[Case]:
    text = (CASES / f"{group}.sql").read_text(encoding="utf-8")
    marks = list(_CASE.finditer(text))
    cases = []
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        body = text[m.end(): nxt.start() if nxt else len(text)].strip()
        cases.append(Case(group, m.group(1), body))
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"{group}.sql: duplicate case names {sorted(duplicates)}")
    return cases


def all_cases() -> Iterator[Case]:
    for group in groups():
        yield from load_group(group)


def golden_path(group: str) -> Path:
    return CASES / f"{group}.golden.json"


def load_golden(group: str) -> dict[str, dict[str, Any]]:
    path = golden_path(group)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save_golden(group: str, golden: dict[str, dict[str, Any]]) -> None:
    parts = []
    for name, entry in sorted(golden.items()):
        fields = []
        for key, value in entry.items():
            if key == "rows":
                rows = ",\n   ".join(json.dumps(r, ensure_ascii=False) for r in value)
                fields.append(f'  "rows": [\n   {rows}\n  ]' if value else '  "rows": []')
            else:
                fields.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
        parts.append(f" {json.dumps(name, ensure_ascii=False)}: {{\n" + ",\n".join(fields) + "\n }")
    text = "{\n" + ",\n".join(parts) + "\n}\n"  # one row a line: reviewable diffs
    golden_path(group).write_text(text, encoding="utf-8")


class Text(str):
    """Flink's text of a nested (ARRAY, MAP, ROW) value, CAST(v AS STRING): what PyFlink can
    collect of it. Encoded as ``{"text": ...}``."""


def encode(v: Any) -> Any:
    """A JSON form of a value Flink or sqlstream returned, tagged where JSON has no such type."""
    if isinstance(v, Text):
        return {"text": str(v)}
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": str(v)}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dt.datetime):
        return {"timestamp": v.replace(tzinfo=None).isoformat(sep=" ")}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, dt.time):
        return {"time": v.isoformat()}
    if isinstance(v, bytes | bytearray):
        return {"bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {"map": sorted(([encode(k), encode(x)] for k, x in v.items()), key=json.dumps)}
    if isinstance(v, list | tuple):
        return {"array": [encode(x) for x in v]}
    raise TypeError(f"cannot encode {type(v).__name__}: {v!r}")


def canonical(v: Any) -> Any:
    """A hashable, comparable form of an encoded value: floats to 9 significant digits (engines
    sum in different orders), decimals by value, timestamps to the microsecond."""
    if isinstance(v, float):
        return ("f", float(f"{v:.9g}"))
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, dict):
        (tag, x), = v.items()
        if tag == "float":
            return ("f", x)
        if tag == "decimal":
            return ("d", Decimal(x).normalize() if Decimal(x) != 0 else Decimal(0))
        if tag == "timestamp":
            return ("t", dt.datetime.fromisoformat(x).isoformat(sep=" ", timespec="microseconds"))
        if tag in ("array", "map"):
            return (tag, tuple(canonical(e) if not isinstance(e, list) else tuple(map(canonical, e)) for e in x))
        return (tag, x)
    return ("s", v) if v is not None else ("n", None)


def canonical_rows(rows: list[list[Any]]) -> list[tuple]:
    """Rows as a sorted list of canonical tuples: a multiset compare."""
    return sorted((tuple(canonical(v) for v in r) for r in rows), key=repr)


_BASE_TYPE = re.compile(r" NOT NULL| \*ROWTIME\*| \*PROCTIME\*")


def normalize_type(flink_type: str) -> str:
    """A Flink type string in the spelling sqlstream's ``sql_type_name`` gives: nullability and
    time-attribute markers dropped; CHAR/VARCHAR of any length are STRING, BINARY/VARBINARY BYTES."""
    t = _BASE_TYPE.sub("", flink_type)
    t = re.sub(r"\b(?:VAR)?CHAR\(\d+\)", "STRING", t)
    t = re.sub(r"\b(?:VAR)?BINARY\(\d+\)", "BYTES", t)
    t = re.sub(r"\bTIME\(0\)", "TIME", t)
    return t
