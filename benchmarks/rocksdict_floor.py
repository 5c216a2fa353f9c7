"""What the rocksdb join's RocksDB entries cost alone, with no Arrow work: the floor under its rate.

The rocksdb regular join of K keys a side, 1:1 (benchmarks/large_state.py and join_backends.py),
stores each key's first rows in one head entry: the first row of a key puts a new head, the second
row reads that head and puts it back with both rows (join_rocksdb.py). This script does exactly
those RocksDB operations through sqlstream's own state backend (RocksDBStateBackend with its
default memory options, the heads' column family without its memtable bloom filter, as the join
has it) and nothing else: per batch of ``--batch`` keys in key order, a WriteBatch of new heads
(~50-byte values), then, a batch later, one multi-get of the same keys and a WriteBatch of their
rewritten heads (~90 bytes). Keys are 12 bytes with the key group leading, spread over the key
space as the heads' keys are.

It prints the seconds each kind of call took in total, and per entry, with the wall time of the
whole run (RocksDB's flushes and compactions run on its own threads meanwhile): set against the
hashmap join's whole job time for the same K (join_backends.py), this is the least the rocksdb
join could take with one RocksDB entry per key and side.

Usage: python benchmarks/rocksdict_floor.py [--keys 1000000] [--batch 32768]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.runtime.state.rocksdb import RocksDBState, RocksDBStateBackend  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=32768)
    args = parser.parse_args()
    n, size = args.keys, args.batch
    rng = np.random.default_rng(7)
    groups = rng.integers(0, 128, n)
    ids = np.arange(n)
    batches = []
    for start in range(0, n, size):
        part = [int(g).to_bytes(2, "big") + int(k).to_bytes(8, "big") + b"\0\1"
                for g, k in zip(groups[start:start + size], ids[start:start + size], strict=True)]
        batches.append(sorted(part))
    first, both = os.urandom(50), os.urandom(90)
    spent = {"put new heads": 0.0, "multi-get heads": 0.0, "put rewritten heads": 0.0}
    with tempfile.TemporaryDirectory(prefix="rocksdict-floor-") as tmp:
        backend = RocksDBStateBackend(range(128), Path(tmp))
        heads = backend.state("join_heads")
        assert isinstance(heads, RocksDBState)
        heads.keep_own_filter()
        began = time.perf_counter()
        for i in range(len(batches) + 1):
            if i < len(batches):  # a batch of first rows: new heads
                keys = batches[i]
                t = time.perf_counter()
                backend.write_rows(heads.name, keys, [first] * len(keys), [], len(keys))
                spent["put new heads"] += time.perf_counter() - t
            if i > 0:  # the batch before's second rows: read their heads, write them back
                keys = batches[i - 1]
                t = time.perf_counter()
                found = heads.get_many(keys)
                spent["multi-get heads"] += time.perf_counter() - t
                assert all(v is not None for v in found)
                t = time.perf_counter()
                backend.write_rows(heads.name, keys, [both] * len(keys), [], 0)
                spent["put rewritten heads"] += time.perf_counter() - t
        wall = time.perf_counter() - began
        backend.close()
    print(f"{n} keys (2 x {n} rows), batches of {size}; load average {os.getloadavg()[0]:.2f}")
    print("| RocksDB calls | s | us per entry |")
    print("|---|---|---|")
    for name, seconds in spent.items():
        print(f"| {name} | {seconds:.2f} | {seconds / n * 1e6:.2f} |")
    print(f"| all, wall | {wall:.2f} | {wall / (2 * n) * 1e6:.2f} per row |")


if __name__ == "__main__":
    main()
