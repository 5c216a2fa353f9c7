"""Throughput of the transactional sinks, and their commit latency per checkpoint.

One job per sink: ``INSERT INTO sink SELECT ... FROM gen``, where ``gen`` is an unthrottled
datagen source of --rows rows (a BIGINT sequence, a random INT, a random STRING and a
random DECIMAL), with a checkpoint every --interval.  The sinks: local parquet (the
filesystem connector), parquet on S3 (a moto S3 server this script starts on a loopback
port, reached through the ``s3.*`` settings), Iceberg (a pyiceberg SQL catalog on SQLite
and a local warehouse) and Delta Lake (a local table path), all in a temporary directory.

Rows/s is --rows over the job's wall time (planning included, a few tens of ms).  Every
checkpoint's completion is recorded by the coordinator (``JobResult.checkpoints``) and every
commit by the sink (``Metrics.commits``: which checkpoint's notification it followed and
when it returned); the commit latency of a checkpoint is the time from its completion to the
sink's commit being done, which includes the wait for the sink subtask to take the notice
(it does between batches) and the commit itself.  The last commit, of the end of the
bounded input, follows no periodic checkpoint and is not counted.  "in writer ms" is the
median time inside the connector's commit alone.
Usage: python benchmarks/sinks.py [--rows N] [--sinks parquet,s3,iceberg,delta]
       [--interval 1s] [--repeat R] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlstream.frontend.session import Session  # noqa: E402

SINKS = ("parquet", "s3", "iceberg", "delta")
S3_KEYS = {"s3.access-key": "bench", "s3.secret-key": "bench-secret", "s3.path.style.access": "true"}

SOURCE = """
CREATE TABLE gen (id BIGINT, qty INT, name STRING, price DECIMAL(12, 2))
WITH ('connector' = 'datagen', 'rows-per-second' = '1000000000000', 'seed' = '1',
      'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '{last}',
      'fields.qty.min' = '0', 'fields.qty.max' = '1000', 'fields.name.length' = '16',
      'fields.price.min' = '0', 'fields.price.max' = '100000');
"""
COLUMNS = "id BIGINT, qty INT, name STRING, price DECIMAL(12, 2)"


class S3Server:
    """moto's S3 server (``python -m moto.server``) on a free loopback port, as tests/s3_server.py starts it."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto's S3 server exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto's S3 server did not start within 30 s") from None
                time.sleep(0.1)

    def create_bucket(self) -> str:
        import boto3

        name = f"bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=S3_KEYS["s3.access-key"],
                     aws_secret_access_key=S3_KEYS["s3.secret-key"], region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def settings(self) -> str:
        return "".join(f"SET '{k}' = '{v}';\n" for k, v in {"s3.endpoint": self.endpoint, **S3_KEYS}.items())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sink_ddl(sink: str, tmp: Path, s3: S3Server | None) -> tuple[str, str]:
    """(SET statements, the WITH options) of one sink's table in ``tmp``."""
    if sink == "parquet":
        return "", f"'connector' = 'filesystem', 'path' = '{tmp / 'out'}', 'format' = 'parquet'"
    if sink == "s3":
        assert s3 is not None
        return s3.settings(), (f"'connector' = 'filesystem', 'path' = 's3://{s3.create_bucket()}/out', "
                               "'format' = 'parquet'")
    if sink == "iceberg":
        return "", (f"'connector' = 'iceberg', 'catalog-name' = 'bench', 'catalog-type' = 'sql', "
                    f"'uri' = 'sqlite:///{tmp}/catalog.db', 'warehouse' = '{tmp / 'warehouse'}'")
    if sink == "delta":
        return "", f"'connector' = 'delta', 'table-path' = '{tmp / 'delta'}'"
    raise ValueError(f"unknown sink {sink!r}; choose from {', '.join(SINKS)}")


def run(sink: str, rows: int, interval: str, s3: S3Server | None) -> dict[str, Any]:
    """One job into ``sink``: rows/s, checkpoints completed, and the commit latency of each."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{sink}-") as d:
        tmp = Path(d)
        settings, options = sink_ddl(sink, tmp, s3)
        script = (f"{settings}SET 'execution.checkpointing.interval' = '{interval}';\n"
                  f"SET 'execution.checkpointing.dir' = 'file://{tmp / 'chk'}';\n"
                  f"{SOURCE.format(last=rows - 1)}CREATE TABLE sink ({COLUMNS}) WITH ({options});\n"
                  "INSERT INTO sink SELECT * FROM gen;\n")
        started = time.perf_counter()
        job = Session().execute_script(script)[-1].job
        elapsed = time.perf_counter() - started
    assert job is not None
    sinks = [m for label, m in job.metrics.items() if label.endswith("Sink")]
    written = sum(m.records_in for m in sinks)
    if written != rows:
        raise RuntimeError(f"{sink}: the sink received {written} rows, not {rows}")
    completed = {c.checkpoint_id: c.completed_ms for c in job.checkpoints}
    commits = [c for m in sinks for c in m.commits if c.checkpoint_id in completed]
    latencies = [c.end_ms - completed[c.checkpoint_id] for c in commits]
    return {"sink": sink, "rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed,
            "checkpoints": len(completed), "commits": len(latencies),
            "commit_ms": [round(x, 1) for x in latencies],
            "in_writer_ms": [round(c.duration_ms, 1) for c in commits],
            "commit_ms_median": statistics.median(latencies) if latencies else None,
            "commit_ms_max": max(latencies) if latencies else None,
            "in_writer_ms_median": statistics.median(c.duration_ms for c in commits) if commits else None}


def fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--sinks", default=",".join(SINKS), help=f"comma-separated, of {', '.join(SINKS)}")
    ap.add_argument("--interval", default="1s", help="execution.checkpointing.interval")
    ap.add_argument("--repeat", type=int, default=1, help="runs per sink; the one of median rows/s is shown")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    sinks = args.sinks.split(",")
    for sink in sinks:
        if sink not in SINKS:
            ap.error(f"unknown sink {sink!r}; choose from {', '.join(SINKS)}")
    s3 = S3Server() if "s3" in sinks else None
    results = []
    try:
        for sink in sinks:  # warm-up: imports (pyiceberg, deltalake, boto), caches
            run(sink, 10_000, args.interval, s3)
        print(f"{'sink':>8} {'rows/s':>12} {'seconds':>8} {'checkpoints':>11} {'commit ms median':>16} "
              f"{'commit ms max':>13} {'in writer ms':>12}", flush=True)
        for sink in sinks:
            runs = sorted((run(sink, args.rows, args.interval, s3) for _ in range(args.repeat)),
                          key=lambda r: r["rows_per_s"])
            r = runs[len(runs) // 2]
            results.append(r)
            print(f"{sink:>8} {r['rows_per_s']:>12,.0f} {r['seconds']:>8.2f} {r['checkpoints']:>11} "
                  f"{fmt(r['commit_ms_median']):>16} {fmt(r['commit_ms_max']):>13} {fmt(r['in_writer_ms_median']):>12}",
                  flush=True)
    finally:
        if s3 is not None:
            s3.stop()
    load = os.getloadavg()
    print(f"load average after the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    out = {"rows": args.rows, "interval": args.interval, "load_average": load, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
