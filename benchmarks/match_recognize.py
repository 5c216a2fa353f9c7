"""Throughput of MATCH_RECOGNIZE: DEFINE conditions over the current row only, and conditions that
read the match so far (FIRST/LAST of earlier rows, an aggregate), which the NFA evaluates per
(partial match, row).

One job per case: an unthrottled datagen source (a sequence, its event time one millisecond per
row, a key ``seq % KEYS`` and a random value), MATCH_RECOGNIZE partitioned by the key, into a
blackhole sink.  Prints rows/s per case (median of --repeat runs) over wall time and over the
process's CPU time (the job's threads run in this process; on a shared machine the latter is the
steadier figure).
Usage: python benchmarks/match_recognize.py [--rows N] [--keys K] [--cases current,navigating,aggregate]
       [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.frontend.session import Session  # noqa: E402

SOURCE = """
CREATE TABLE gen (seq BIGINT, v INT, ts AS TO_TIMESTAMP_LTZ(seq, 3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'datagen', 'rows-per-second' = '1000000000', 'seed' = '1',
      'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}',
      'fields.v.min' = '0', 'fields.v.max' = '100');
CREATE TABLE sink (k BIGINT, a INT, b INT, n BIGINT) WITH ('connector' = 'blackhole');
CREATE VIEW keyed AS SELECT seq % {keys} AS k, v, ts FROM gen;
"""

CASES = {
    # every condition reads the current row only: evaluated vectorized once per firing
    "current": "MEASURES A.v AS a, LAST(B.v) AS b, COUNT(B.v) AS n PATTERN (A B{{2}}) "
               "DEFINE A AS A.v % 2 = 0, B AS B.v % 3 > 0",
    # a V shape: DOWN and UP compare with the previous row of the match
    "navigating": "MEASURES S.v AS a, LAST(UP.v) AS b, COUNT(DOWN.v) AS n PATTERN (S DOWN+ UP) "
                  "DEFINE DOWN AS (LAST(DOWN.v, 1) IS NULL AND DOWN.v < S.v) OR DOWN.v < LAST(DOWN.v, 1), "
                  "UP AS UP.v > LAST(DOWN.v)",
    # a running aggregate of the match in DEFINE
    "aggregate": "MEASURES FIRST(A.v) AS a, B.v AS b, COUNT(A.v) AS n PATTERN (A+ B) "
                 "DEFINE A AS SUM(A.v) < 300, B AS B.v > 50",
}


def run(rows: int, keys: int, case: str) -> tuple[float, float]:
    """Rows per second of one run: over wall time, over CPU time."""
    script = SOURCE.format(last=rows - 1, keys=keys) + (
        "INSERT INTO sink SELECT * FROM keyed MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        f"{CASES[case].format()} ) AS r;").replace("PATTERN", "AFTER MATCH SKIP PAST LAST ROW PATTERN", 1)
    started, cpu = time.perf_counter(), time.process_time()
    Session().execute_script(script)
    return rows / (time.perf_counter() - started), rows / (time.process_time() - cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the median is reported")
    args = ap.parse_args()
    run(10_000, 100, "current")  # warm-up: imports, caches
    results = {}
    for case in args.cases.split(","):
        runs = [run(args.rows, args.keys, case) for _ in range(args.repeat)]
        wall, cpu = (round(sorted(r[i] for r in runs)[len(runs) // 2]) for i in (0, 1))
        results[case] = {"wall": wall, "cpu": cpu}
        print(f"{case:>12}: {wall:>10,} rows/s, {cpu:>10,} rows per CPU second")
    print(json.dumps({"rows": args.rows, "keys": args.keys, "rows_per_s": results}))


if __name__ == "__main__":
    main()
