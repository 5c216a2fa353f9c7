"""Every case of the Flink reference suite (tests/flink_reference) run on sqlstream and compared with
what Apache Flink 2.3 gave, as recorded in the case's golden file: the column types and the final
rows as a multiset (changelog applied, floats to 9 significant digits, NULLs as NULLs), or an error
where Flink refused or failed. No JVM is needed; re-record with tests/flink_reference/record.py.

Each case runs at parallelism 1; a third of the cases of the keyed groups at 2 as well (see
``Case.parallelisms``). Cases where sqlstream differs today are listed in
tests/flink_reference/pending.toml (``group.case``, or ``group.case@p2`` for a difference at
parallelism 2 only) and are strict xfails: a fix makes them pass, which fails the suite until the
case is removed from the list.
Deliberate differences (deliberate.toml) are skipped with their reason."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from tests.flink_reference import suite
from tests.flink_reference.check import compare, golden

PENDING: dict[str, str] = tomllib.loads((suite.HERE / "pending.toml").read_text(encoding="utf-8"))["pending"]
DELIBERATE: dict[str, str] = tomllib.loads((suite.HERE / "deliberate.toml").read_text(encoding="utf-8"))["deliberate"]
CASES = {case.id: case for case in suite.all_cases()}


def _params() -> list[Any]:
    params = []
    for case_id, case in CASES.items():
        for parallelism in case.parallelisms:
            marks = []
            pending = PENDING.get(case_id) or PENDING.get(f"{case_id}@p{parallelism}")
            if pending:
                marks.append(pytest.mark.xfail(strict=True, reason=pending))
            if case_id in DELIBERATE:
                marks.append(pytest.mark.skip(reason=f"deliberate difference: {DELIBERATE[case_id]}"))
            params.append(pytest.param(case_id, parallelism, marks=marks, id=f"{case_id}-p{parallelism}"))
    return params


@pytest.mark.parametrize(("case_id", "parallelism"), _params())
def test_sqlstream_gives_flinks_answer(case_id: str, parallelism: int) -> None:
    difference = compare(CASES[case_id], parallelism)
    assert difference is None, difference


def test_every_listed_case_exists() -> None:
    unknown = sorted({k.split("@")[0] for k in (*PENDING, *DELIBERATE)} - set(CASES))
    assert not unknown, f"pending.toml / deliberate.toml name cases that do not exist: {unknown}"


def test_every_case_has_a_golden_answer_of_its_current_text() -> None:
    stale = [c.id for c in CASES.values() if golden(c.group).get(c.name, {}).get("sql") != c.sql]
    assert not stale, f"re-record these cases (tests/flink_reference/record.py --only GROUP): {stale}"
