"""Throughput of a tumbling-window count with checkpointing off and every 1 s.

Prints rows/s for both (median of --repeat runs) and the overhead ratio (target: under 10 %).
Usage: python benchmarks/checkpoint_overhead.py [--rows N] [--parallelism P] [--backend hashmap|rocksdb] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.frontend.session import Session  # noqa: E402

JOB = """
SET 'parallelism.default' = '{parallelism}';
SET 'state.backend.type' = '{backend}';
{checkpointing}
CREATE TABLE gen (
    seq BIGINT, v INT,
    ts AS TO_TIMESTAMP_LTZ(seq, 3),
    WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'rows-per-second' = '1000000000', 'seed' = '1',
        'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}',
        'fields.v.min' = '0', 'fields.v.max' = '999');
CREATE TABLE sink (window_start TIMESTAMP(3), v INT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink
SELECT window_start, v, COUNT(*) FROM TABLE(TUMBLE(TABLE gen, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, v;
"""


def run(rows: int, parallelism: int, backend: str, interval: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        checkpointing = (
            f"SET 'execution.checkpointing.interval' = '{interval}';\nSET 'state.checkpoints.dir' = '{tmp}';"
            if interval else ""
        )
        script = JOB.format(parallelism=parallelism, backend=backend, checkpointing=checkpointing, last=rows - 1)
        session = Session()
        started = time.perf_counter()
        result = session.execute_script(script)[-1]
        elapsed = time.perf_counter() - started
        checkpoints = result.job.checkpoints if result.job else []
    return {
        "checkpointing": interval or "off",
        "seconds": round(elapsed, 3),
        "rows_per_s": round(rows / elapsed),
        "checkpoints": len(checkpoints),
        "mean_checkpoint_s": round(sum(c.duration_s for c in checkpoints) / len(checkpoints), 4) if checkpoints else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--parallelism", type=int, default=1)
    ap.add_argument("--backend", default="hashmap")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the median is reported")
    args = ap.parse_args()
    run(100_000, args.parallelism, args.backend, None)  # warm-up: imports, caches
    offs, ons = [], []
    for _ in range(args.repeat):  # interleaved, so drift in machine load hits both alike
        offs.append(run(args.rows, args.parallelism, args.backend, None))
        ons.append(run(args.rows, args.parallelism, args.backend, "1 s"))
    off = sorted(offs, key=lambda r: r["rows_per_s"])[len(offs) // 2]
    on = sorted(ons, key=lambda r: r["rows_per_s"])[len(ons) // 2]
    overhead = off["rows_per_s"] / on["rows_per_s"] - 1
    print(f"{'checkpointing':>14} {'seconds':>8} {'rows/s':>12} {'checkpoints':>11} {'mean chk s':>10}")
    for r in (off, on):
        print(f"{r['checkpointing']:>14} {r['seconds']:>8} {r['rows_per_s']:>12,} {r['checkpoints']:>11} {str(r['mean_checkpoint_s']):>10}")
    print(f"overhead of 1 s checkpoints: {overhead * 100:.1f} % (target < 10 %)")
    print(json.dumps({"off": off, "on": on, "overhead": round(overhead, 4), "rows": args.rows,
                      "parallelism": args.parallelism, "backend": args.backend}))


if __name__ == "__main__":
    main()
