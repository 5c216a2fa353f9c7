"""The regular join on both state backends, sqlstream and Apache Flink side by side.

Issue 18 asks sqlstream's rocksdb join to run at half its hashmap join's rate or better. This script
shows where Flink's own RocksDB backend stands on the same job: an unbounded regular join of two
bounded datagen sequences of K rows each on ``seq % K`` (K keys, 1:1), into a blackhole sink, at
parallelism 1, on ``hashmap`` and ``rocksdb`` (Flink with its defaults and nexmark-flink's settings,
benchmarks/nexmark/flink_runner.py; sqlstream with its defaults).

Each engine runs the job with K keys and with 1,000 keys; "job s" is the difference of the two
runs' times (sqlstream: the whole ``sqlstream run`` process; Flink: its statements until the
INSERT finished, JVM start-up excluded), so planning, start-up and job submission cancel out and
what is left is the K rows through the join. Rows/s counts both inputs (2 K rows). Each figure is
the fastest of ``--runs`` runs.

Usage: python benchmarks/join_backends.py [--keys 1000000] [--runs 2] [--flink]
       [--flink-python /path/to/pyflink-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLINK_RUNNER = ROOT / "benchmarks" / "nexmark" / "flink_runner.py"
DEFAULT_FLINK_PYTHON = "/work/flink-venv/bin/python"
SMALL = 1000

SOURCE = """CREATE TABLE {name} (seq BIGINT, v INT) WITH ('connector' = 'datagen',
  'rows-per-second' = '1000000000', 'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0',
  'fields.seq.end' = '{last}', 'fields.v.min' = '0', 'fields.v.max' = '1000000');
"""
JOB = """CREATE TABLE sink (k BIGINT, lv INT, rv INT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT l.k, l.v, r.v
FROM (SELECT seq % {keys} AS k, v FROM l) AS l JOIN (SELECT seq % {keys} AS k, v FROM r) AS r ON l.k = r.k;
"""


def script(keys: int, backend: str) -> str:
    return (f"SET 'state.backend.type' = '{backend}';\n" + SOURCE.format(name="l", last=keys - 1)
            + SOURCE.format(name="r", last=keys - 1) + JOB.format(keys=keys))


def sqlstream_seconds(path: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", "run", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"sqlstream failed on {path}:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


def flink_seconds(path: Path, python: str) -> float:
    done = subprocess.run([python, str(FLINK_RUNNER), str(path)], capture_output=True, text=True, timeout=1800)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("NEXMARK ")), None)
    if line is None:
        raise SystemExit(f"flink failed on {path}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    result = json.loads(line.removeprefix("NEXMARK "))
    if result.get("status") != "ok":
        raise SystemExit(f"flink failed on {path}: {result.get('error')}")
    return float(result["script_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--flink", action="store_true", help="also run the job on Apache Flink (PyFlink)")
    parser.add_argument("--flink-python", default=DEFAULT_FLINK_PYTHON)
    args = parser.parse_args()
    engines = [("sqlstream", sqlstream_seconds)]
    if args.flink:
        engines.append(("Flink", lambda p: flink_seconds(p, args.flink_python)))
    print(f"K = {args.keys} keys, 2 K rows; fastest of {args.runs} runs; "
          f"load average before {os.getloadavg()[0]:.2f}")
    print("| engine | backend | job s | rows/s | rocksdb / hashmap |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="join-backends-") as tmp:
        for engine, seconds in engines:
            rates: dict[str, float] = {}
            for backend in ("hashmap", "rocksdb"):
                paths = []
                for keys in (args.keys, SMALL):
                    path = Path(tmp) / f"{engine}-{backend}-{keys}.sql"
                    path.write_text(script(keys, backend))
                    paths.append(path)
                big = min(seconds(paths[0]) for _ in range(args.runs))
                small = min(seconds(paths[1]) for _ in range(args.runs))
                job = max(big - small, 1e-3)
                rates[backend] = 2 * args.keys / job
                ratio = f"{rates['rocksdb'] / rates['hashmap']:.2f}" if backend == "rocksdb" else ""
                print(f"| {engine} | {backend} | {job:.2f} | {rates[backend] / 1e3:,.0f} k | {ratio} |", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
