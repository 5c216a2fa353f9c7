"""Writes the reference suite's input files into data/, deterministically (a fixed seed, no clock).

Event-time rows arrive out of order, but never by more than the tables' 5 s watermark delay, so no
row is late in Flink or in sqlstream and the final rows do not depend on how the input is split into
batches. CSV files hold NULLs as empty unquoted fields; the empty string only appears in the JSON
files (Flink's CSV reader with 'csv.null-literal' = '' reads a quoted "" as NULL too, sqlstream as
''; the `quoted` table pins that difference down on purpose). Re-run after editing, then re-record:

    python tests/flink_reference/make_data.py
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
from pathlib import Path

DATA = Path(__file__).parent / "data"
BASE = dt.datetime(2024, 3, 1, 10, 0, 0)
PRODUCTS = ["apple", "Äpfel", "香蕉", "cherry", "date fruit", None]
CURRENCIES = ["EUR", "USD", "JPY", None]


def ts(ms: int) -> str:
    """Flink's SQL timestamp text, yyyy-MM-dd HH:mm:ss.SSS."""
    return (BASE + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def shuffle_within(times: list[int], rng: random.Random, delay_ms: int) -> list[int]:
    """``times`` (ascending) reordered so that no element comes after one more than ``delay_ms`` later
    than it: each element is late by less than the watermark delay, never beyond it."""
    keyed = sorted(times, key=lambda t: t + rng.randrange(0, delay_ms))
    for i, t in enumerate(keyed):  # guard: the running maximum before t must be within the delay
        assert max(keyed[: i + 1]) - t < delay_ms
    return keyed


def write_csv(name: str, rows: list[list[object]]) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    (DATA / name).write_text(out.getvalue(), encoding="utf-8")


def write_json(name: str, rows: list[dict[str, object]]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (DATA / name).write_text(text, encoding="utf-8")


def orders(rng: random.Random) -> None:
    times = sorted(rng.sample(range(0, 180_000, 250), 40))
    rows = []
    for i, t in enumerate(shuffle_within(times, rng, 5000)):
        user = rng.choice([1, 2, 3, 4, 5, None])
        product = rng.choice(PRODUCTS)
        amount = None if i % 11 == 7 else f"{rng.randrange(-5000, 100000) / 100:.2f}"
        qty = None if i % 13 == 5 else rng.choice([-2, 0, 1, 2, 3, 5, 10])
        price = None if i % 9 == 4 else round(rng.uniform(-10, 100), 3)
        rows.append([i + 1, user, product, amount, qty, price, rng.choice(CURRENCIES), ts(t)])
    write_csv("orders.csv", rows)


def users() -> None:
    write_csv("users.csv", [
        [1, "Ann", "DE", 34], [2, "Bo", "US", None], [3, "Ça va", "FR", 27], [4, "李雷", "CN", 41],
        [6, "Zoë", None, 19], [None, "nobody", "US", 50], [2, "Bo again", "US", 22],
    ])


def payments(rng: random.Random) -> None:
    rows = []
    pay_times = []
    for order_id in range(1, 41, 2):
        pay_times.append((order_id, rng.randrange(0, 180_000 + 60_000, 500)))
    pay_times.sort(key=lambda r: r[1])
    times = shuffle_within([t for _, t in pay_times], rng, 5000)
    for i, t in enumerate(times):
        order_id = pay_times[i][0] if i % 7 != 3 else None
        rows.append([i + 100, order_id, f"{rng.randrange(0, 50000) / 100:.2f}", ts(t)])
    write_csv("payments.csv", rows)


def rates() -> None:
    write_csv("rates.csv", [
        ["EUR", "1.1000", ts(0)], ["USD", "1.0000", ts(0)], ["JPY", "0.0070", ts(1000)],
        ["EUR", "1.1200", ts(60_000)], ["JPY", "0.0068", ts(90_000)], ["EUR", "1.0900", ts(120_000)],
        ["USD", "0.9900", ts(150_000)],
    ])


def events(rng: random.Random) -> None:
    kinds = ["click", "view", "", None, "büy", "click"]
    times = sorted(rng.sample(range(0, 120_000, 100), 30))
    rows = []
    for i, t in enumerate(shuffle_within(times, rng, 5000)):
        score = None if i % 8 == 3 else round(rng.uniform(-50, 50), 2)
        rows.append({"id": i + 1, "uid": rng.choice([1, 2, 3, None]), "kind": rng.choice(kinds),
                     "score": score, "flag": rng.choice([True, False, None]), "ts": ts(t)})
    write_json("events.json", rows)


def nums() -> None:
    write_csv("nums.csv", [
        [1, 0, 0, 0.0, "0.000", "0"],
        [2, 7, 7, 7.5, "7.125", "7"],
        [3, -7, -7, -7.5, "-7.125", "-7"],
        [4, 2147483647, 9223372036854775807, 1e300, "999999999.999", "2147483647"],
        [5, -2147483648, -9223372036854775808, -1e-300, "-999999999.999", "-2147483648"],
        [6, None, None, None, None, None],
        [7, 3, 10, 2.5, "0.500", " 42 "],
        [8, -1, 1, 0.1, "0.001", "abc"],
        [9, 100, -100, 123.456, "123.456", "1e3"],
    ])


def strs() -> None:
    values = ["Hello World", "", None, "  padded  ", "ÄÖÜ straße", "日本語テキスト", "a,b,,c", "42",
              "3.75", "-8", "2024-02-29", "2024-02-29 23:59:59.123", "ABCabc", "%_like_%", "true",
              "emoji 🙂 here"]
    write_json("strs.json", [{"id": i + 1, "s": v, "n": (i * 3 - 10) if i % 5 else None}
                             for i, v in enumerate(values)])


def docs() -> None:
    """JSON documents as text, for the JSON functions: nested objects and arrays, JSON null,
    text that is not JSON (or is, with garbage after it, which Flink's Jackson ignores), numbers
    Jackson reads as Long, BigInteger and BigDecimal, escapes and unicode; ``path`` a per-row path."""
    documents = [
        ('{"a":1,"b":[10,20,{"c":"x"}],"d":{"e":null,"f":2.5},"s":"str"}', "$.a"),
        ("bad", "$.a"),
        (None, "$.a"),
        ("[1,2,3]", "$[1]"),
        ('"s"', "$"),
        ("", "lax $.a"),
        ('{"a":1} x', "$.a"),
        ("1 2", "$"),
        ('{"a":3000000000,"b":[],"d":{"f":1e2}}', "$.d.f"),
        ("null", "lax $"),
        ("true", "$"),
        ('{"k":"\\u0001\\u001f\\"q\\"/é😀\\n","a":-0.0,"n":12345678901234567890}', "$.k"),
        ('{"a":"12","b":true,"d":{"f":"2.5"}}', "$.b"),
        ('{"z":1,"y":{"b":2,"a":[3,{"d":4,"c":5}]},"x":[],"Z":0,"é":1,"":2}', "$.y.a[1].c"),
        ('  {"a" : 2 } ', "lax $.zz"),
        ('{"a":{"b":1},"c":{"b":2}}', "$.*.b"),
        ("1x", "$"),
        ("true}", "$"),
        ('{"a":1,"a":2}', None),
        ('{"a":[1,2,3,4],"b":1.50,"c":0.0000001,"d":-1.5E-7}', "$.a[-1]"),
    ]
    write_json("docs.json", [{"id": i + 1, "doc": d, "path": p, "k": "abcd"[i % 4] if i % 5 else None}
                             for i, (d, p) in enumerate(documents)])


def nested_docs() -> None:
    """Nested values (ARRAY, MAP, ROW, ARRAY of ROW): NULL and empty collections, NULL elements,
    unicode. Map keys are single letters in ascending order (or one key): Flink's maps from JSON
    are hash maps, whose iteration order (MAP_KEYS, UNNEST) is then the written order too."""
    write_json("nested_docs.json", [
        {"id": 1, "tags": ["a", "b", "c"], "nums": [3, 1, 3, 2], "attrs": {"a": 1, "b": 2},
         "info": {"name": "Ann", "age": 34, "addr": {"city": "Berlin", "zip": "10115"}},
         "items": [{"sku": "p1", "qty": 2}, {"sku": "p2", "qty": 5}]},
        {"id": 2, "tags": [], "nums": [], "attrs": {}, "info": {"name": "Bo", "age": None, "addr": None},
         "items": []},
        {"id": 3, "tags": None, "nums": None, "attrs": None, "info": None, "items": None},
        {"id": 4, "tags": ["ü", "香蕉", None], "nums": [None, 7], "attrs": {"e": None, "ü": 5},
         "info": {"name": "Zoë", "age": 19, "addr": {"city": "Paris", "zip": None}},
         "items": [{"sku": "p1", "qty": None}, None]},
        {"id": 5, "tags": ["only"], "nums": [42], "attrs": {"c": 10},
         "info": {"name": None, "age": 50, "addr": {"city": None, "zip": "75001"}},
         "items": [{"sku": "p3", "qty": 1}]},
        {"id": 6},
        {"id": 7, "tags": ["a", "a", "b", "a"], "nums": [5, 5, 5], "attrs": {"c": 3, "d": 4},
         "info": {"name": "Ann", "age": 35, "addr": {"city": "Bonn", "zip": "53111"}},
         "items": [{"sku": "p2", "qty": 3}, {"sku": "p1", "qty": 4}]},
    ])


def bags() -> None:
    """ARRAY and ROW fields in CSV: elements and fields joined by ';' (an empty element is NULL with
    'csv.null-literal' = '', an empty field an empty ARRAY), a ROW with a field missing or extra."""
    write_csv("bags.csv", [
        [1, "a;b;c", "1;x", "1;2"], [2, None, "2;", None], [3, "z", ";y", "7"], [4, ";", "3;q;extra", ";5"],
        [5, "ü;香蕉", None, "10;20;30"],
    ])


def quoted() -> None:
    (DATA / "quoted.csv").write_text('1,""\n2,\n3,a\n4," "\n', encoding="utf-8")


def ticks() -> None:
    """Prices per symbol for MATCH_RECOGNIZE (V shapes, runs, a NULL price, a NULL symbol), in time
    order: a row behind the watermark would be late, and which rows are depends on when the
    source emits its watermark, so the answers would vary from run to run."""
    acme = [12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19, None, 20, 16, 22]
    taxes = [1, 2, 1, 3, 2, 1, 1, 2, 2, 1, 1, 1, 3, 2, 1]
    rows = [["ACME", p, x, 1 + i] for i, (p, x) in enumerate(zip(acme, taxes, strict=True))]
    rows += [["BETA", p, x, 3 + i] for i, (p, x) in enumerate(zip([5, 4, 3, 7, 7, 6, 9], [1, 1, 2, 1, 1, 3, 1],
                                                                   strict=True))]
    rows += [[None, p, 1, 2 + i] for i, p in enumerate([1, 0, 2])]
    rows.sort(key=lambda r: r[3])  # stable: arrival order among equal times
    write_csv("ticks.csv", [[s, p, x, ts(t * 1000)] for s, p, x, t in rows])


def changes() -> None:
    """The same inventory changes as Debezium, Canal and Maxwell events (the changelog_formats group)."""
    def row(i: int, product: str | None, qty: int | None, price: str | None, t: int) -> dict[str, object]:
        return {"id": i, "product": product, "qty": qty, "price": float(price) if price else None, "ts": ts(t)}

    steps: list[tuple[str, dict[str, object] | None, dict[str, object] | None]] = [
        ("c", None, row(1, "apple", 5, "1.25", 1000)),
        ("c", None, row(2, "pear", 3, "2.50", 2000)),
        ("c", None, row(3, "apple", None, "1.30", 3000)),
        ("c", None, row(4, None, 7, None, 4000)),
        ("u", row(1, "apple", 5, "1.25", 1000), row(1, "apple", 9, "1.25", 5000)),
        ("c", None, row(5, "plum", 2, "0.75", 6000)),
        ("u", row(2, "pear", 3, "2.50", 2000), row(2, "plum", 3, "2.75", 7000)),
        ("d", row(3, "apple", None, "1.30", 3000), None),
        ("c", None, row(6, "ümlaut", 1, "9.99", 8000)),
        ("u", row(4, None, 7, None, 4000), row(4, "pear", 7, None, 9000)),
        ("d", row(5, "plum", 2, "0.75", 6000), None),
    ]
    write_json("changes_debezium.json", [{"before": b, "after": a, "op": op} for op, b, a in steps])

    def text(r: dict[str, object] | None) -> dict[str, object] | None:
        return None if r is None else {k: None if v is None else str(v) for k, v in r.items()}

    def old(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in before.items() if after[k] != v}

    canal: list[dict[str, object]] = [{"data": None, "database": "shop", "table": "inventory", "type": "CREATE",
                                       "isDdl": True, "sql": "CREATE TABLE inventory (...)"}]
    maxwell: list[dict[str, object]] = []
    for k, (op, before, after) in enumerate(steps):
        kind = {"c": "insert", "u": "update", "d": "delete"}[op]
        event = {"database": "shop", "table": "inventory", "ts": 1700000000 + k}
        if op == "u":
            assert before is not None and after is not None
            canal.append({**event, "type": "UPDATE", "data": [text(after)], "old": [text(old(before, after))]})
            maxwell.append({**event, "type": kind, "data": after, "old": old(before, after)})
        else:
            current = after if op == "c" else before
            canal.append({**event, "type": kind.upper(), "data": [text(current)], "old": None})
            maxwell.append({**event, "type": kind, "data": current})
    # two rows in one Canal event, and an event of another table that 'canal-json.table.include' drops
    canal.append({"database": "shop", "table": "inventory", "type": "INSERT", "old": None,
                  "data": [text(row(7, "kiwi", 4, "0.50", 10000)), text(row(8, "kiwi", 6, "0.55", 11000))]})
    canal.append({"database": "shop", "table": "audit", "type": "INSERT", "old": None,
                  "data": [text(row(9, "audit", 1, "1.00", 12000))]})
    write_json("changes_canal.json", canal)
    write_json("changes_maxwell.json", maxwell)
    bad = [{"before": None, "after": row(1, "apple", 5, "1.25", 1000), "op": "c"},
           {"before": None, "after": row(2, "pear", 3, "2.50", 2000), "op": "x"},
           {"before": None, "after": row(3, "plum", 1, "0.75", 3000), "op": "c"}]
    write_json("changes_bad_op.json", bad)


def main() -> None:
    DATA.mkdir(exist_ok=True)
    rng = random.Random(14)
    orders(rng)
    users()
    payments(rng)
    rates()
    events(rng)
    nums()
    strs()
    docs()
    nested_docs()
    bags()
    quoted()
    ticks()
    changes()


if __name__ == "__main__":
    main()
