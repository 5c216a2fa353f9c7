"""Throughput of a non-windowed GROUP BY (COUNT, SUM, MAX) with few and many distinct keys per batch.

A case is KEYS:BATCH: the key is ``seq % KEYS`` and the datagen source reads BATCH rows per batch,
so a batch holds min(KEYS, BATCH) distinct keys.  With 1 k keys in batches of 8192 the state is
small and every batch updates most of it; with 100 k keys in batches of 100 k every row of a batch
is a key of its own, so the per-key cost of the operator shows.
Prints rows/s per case (median of --repeat runs).
Usage: python benchmarks/group_agg.py [--rows N] [--cases 1000:8192,100000:100000]
       [--backend hashmap|rocksdb] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.frontend.session import Session  # noqa: E402

JOB = """
SET 'state.backend.type' = '{backend}';
SET 'table.exec.batch-size' = '{batch_size}';
CREATE TABLE gen (seq BIGINT, v INT)
WITH ('connector' = 'datagen', 'rows-per-second' = '1000000000', 'seed' = '1',
      'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}',
      'fields.v.min' = '0', 'fields.v.max' = '1000000');
CREATE TABLE sink (k BIGINT, n BIGINT, s BIGINT, m INT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT seq % {keys} AS k, COUNT(*), SUM(v), MAX(v) FROM gen GROUP BY seq % {keys};
"""


def run(rows: int, keys: int, batch_size: int, backend: str) -> float:
    """Rows per second of one run."""
    script = JOB.format(backend=backend, batch_size=batch_size, last=rows - 1, keys=keys)
    started = time.perf_counter()
    Session().execute_script(script)
    return rows / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cases", default="1000:8192,100000:100000",
                    help="comma-separated KEYS:BATCH pairs (distinct keys, rows per batch)")
    ap.add_argument("--backend", default="hashmap")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the median is reported")
    args = ap.parse_args()
    run(10_000, 100, 8192, args.backend)  # warm-up: imports, caches
    results = {}
    for case in args.cases.split(","):
        keys, batch_size = (int(x) for x in case.split(":"))
        rates = sorted(run(args.rows, keys, batch_size, args.backend) for _ in range(args.repeat))
        results[case] = round(rates[len(rates) // 2])
        print(f"{keys:>8} keys, batches of {batch_size:>7}: {results[case]:>12,} rows/s")
    print(json.dumps({"rows": args.rows, "backend": args.backend, "rows_per_s": results}))


if __name__ == "__main__":
    main()
