"""Are subtasks faster as threads or as processes for Arrow work?  Measures both.

The workload is what a Calc + pre-aggregation does per batch (filter,
projection, hash group-by), on 2 workers.  Threads share batches and run
while Arrow kernels release the GIL; processes run truly in parallel but
each batch must cross a pipe (serialized as Arrow IPC), as it would between
subtasks.  Prints rows/s for 1 thread, 2 threads and 2 processes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BATCH_ROWS = 100_000
BATCHES = 40


def make_batch(seed: int) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    return pa.record_batch({
        "k": pa.array(rng.integers(0, 5000, BATCH_ROWS)),
        "v": pa.array(rng.random(BATCH_ROWS)),
        "s": pa.array(rng.integers(0, 100, BATCH_ROWS)).cast(pa.string()),
    })


def work(batch: pa.RecordBatch) -> int:
    mask = pc.greater(batch.column("v"), 0.2)
    b = batch.filter(mask)
    projected = pa.table({"k": b.column("k"), "x": pc.multiply(b.column("v"), 3.0), "u": pc.utf8_upper(b.column("s"))})
    out = projected.group_by("k", use_threads=False).aggregate([("x", "sum"), ("u", "count")])
    return out.num_rows


def to_ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(data).read_next_batch()


def process_worker(conn) -> None:  # noqa: ANN001 - a multiprocessing Connection
    while True:
        data = conn.recv_bytes()
        if not data:
            conn.send(0)
            return
        work(from_ipc(data))


def run_threads(batches: list[pa.RecordBatch], workers: int) -> float:
    started = time.perf_counter()
    threads = [threading.Thread(target=lambda part=batches[i::workers]: [work(b) for b in part]) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def run_processes(batches: list[pa.RecordBatch], workers: int) -> float:
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for _ in range(workers):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=process_worker, args=(child,))
        p.start()
        pipes.append(parent)
        procs.append(p)
    started = time.perf_counter()
    for i, b in enumerate(batches):
        pipes[i % workers].send_bytes(to_ipc(b))
    for conn in pipes:
        conn.send_bytes(b"")
        conn.recv()
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    return elapsed


def main() -> None:
    batches = [make_batch(i) for i in range(BATCHES)]
    rows = BATCH_ROWS * BATCHES
    run_threads(batches[:4], 1)  # warm-up
    results = {
        "1 thread": rows / run_threads(batches, 1),
        "2 threads": rows / run_threads(batches, 2),
        "2 processes": rows / run_processes(batches, 2),
    }
    for name, rate in results.items():
        print(f"{name:>12}: {rate:>12,.0f} rows/s")
    print(json.dumps({k: round(v) for k, v in results.items()}))


if __name__ == "__main__":
    main()
