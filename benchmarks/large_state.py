"""Large keyed state on both state backends: throughput, peak memory, checkpoints, savepoints, restore.

Three jobs over K keys (issue 18, point 3), each on ``hashmap`` and ``rocksdb``:

- ``group``: a non-windowed ``GROUP BY seq % K`` (COUNT, SUM, MAX), K keys in state;
- ``join``: an unbounded regular join of two streams of K rows on ``seq % K``, so K rows per
  side in state;
- ``hop``: ``HOP`` windows of 1 hour sliding by 10 minutes over ``seq % K``, the K rows spread
  over one hour of event time.

Each input is an unthrottled datagen sequence of K rows in a UNION ALL with a source that
never produces a row but never ends (a monitored empty directory), so that the job and its
state stay alive once the rows are in.  That source's watermark does not advance, so the
HOP windows do not fire: the hop job measures assigning rows to windows and accumulating
them, with all of the hour's windows (every key in each) in state.  ``hopfire`` is the hop job
with that source holding one row far ahead in event time (its watermark is then no lower bound)
and the K rows spread over six hours, so the watermark follows the datagen rows (1 s behind) and the windows fire as the rows
come: accumulating and firing (each row in 6 windows, about 5/6 of the windows fired once the rows
are in: "fired" counts the rows out of the window aggregation), with one hour of windows in state.  Rows/s is the K rows per
input through the stateful operator over the time they took from the job's start (planning
and start-up included, ~0.1 s), with a periodic checkpoint every --checkpoint-interval
meanwhile; "CPU s" is the CPU time all of the child's threads (RocksDB's too) took over that
span, which swings far less than rows/s when other processes share the cores; then, the input drained, one checkpoint is taken (duration: trigger to complete,
as the coordinator records it; size: the checkpoint's own files, and with rocksdb's shared
files), then a stop-with-savepoint (duration and size on disk).  Each job runs in a child
process of its own, so its peak RSS (``os.wait4``'s ru_maxrss) is its own; "RSS at K" is
the child's peak (VmHWM) once the K rows are in, before the checkpoint and the savepoint.
A second child restores the savepoint: restore s is from submitting the job to every subtask
having its state in place (Subtask.ready), planning included.
Issue 18 asks for 10 M and 50 M keys; those are for a quiet machine with time to spare.
Usage: python benchmarks/large_state.py [--keys 1000000] [--jobs group,join,hop,hopfire]
       [--backends hashmap,rocksdb] [--no-savepoint] [--timeout S] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

JOBS = ("group", "join", "hop", "hopfire")
BACKENDS = ("hashmap", "rocksdb")
POLL_S = 0.02

SOURCE = """CREATE TABLE {name} (seq BIGINT, v INT{extra})
WITH ('connector' = 'datagen', 'rows-per-second' = '1000000000000', 'seed' = '{seed}',
      'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '{last}',
      'fields.v.min' = '0', 'fields.v.max' = '1000000');
"""
# an unbounded source that never produces a row (a monitored empty directory): in a UNION ALL with
# the bounded datagen it keeps the job, and its state, alive after the datagen rows are in
KEEPER = """CREATE TABLE keep (seq BIGINT, v INT{extra})
WITH ('connector' = 'filesystem', 'path' = '{empty}', 'format' = 'csv', 'source.monitor-interval' = '1 h');
"""

SQL = {
    "group": """{gen}{keep}
CREATE TABLE sink (k BIGINT, n BIGINT, s BIGINT, m INT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT seq % {keys}, COUNT(*), SUM(v), MAX(v)
FROM (SELECT seq, v FROM gen UNION ALL SELECT seq, v FROM keep) GROUP BY seq % {keys};
""",
    "join": """{left}{right}{keep}
CREATE TABLE sink (k BIGINT, lv INT, rv INT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT l.k, l.v, r.v
FROM (SELECT seq % {keys} AS k, v FROM l UNION ALL SELECT seq % {keys}, v FROM keep) AS l
JOIN (SELECT seq % {keys} AS k, v FROM r UNION ALL SELECT seq % {keys}, v FROM keep) AS r ON l.k = r.k;
""",
    "hop": """{gen}{keep}
CREATE TEMPORARY VIEW src AS SELECT seq, v, ts FROM gen UNION ALL SELECT seq, v, ts FROM keep;
CREATE TABLE sink (window_start TIMESTAMP(3), k BIGINT, n BIGINT, s BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT window_start, seq % {keys}, COUNT(*), SUM(v)
FROM TABLE(HOP(TABLE src, DESCRIPTOR(ts), INTERVAL '10' MINUTE, INTERVAL '1' HOUR))
GROUP BY window_start, window_end, seq % {keys};
""",
}
# the stateful operator whose input counts the rows, and how many inputs it has
OPERATOR = {"group": ("GroupAggregate", 1), "join": ("Join", 2), "hop": ("WindowAggregate", 1),
            "hopfire": ("WindowAggregate", 1)}


def script(job: str, backend: str, keys: int, workdir: Path, chk: Path, interval: str) -> str:
    # the K rows span one hour of event time (hopfire: six), seq * span / K milliseconds
    hop = job in ("hop", "hopfire")
    span = 6 * 3_600_000 if job == "hopfire" else 3_600_000
    hop_ts = (f", ts AS TO_TIMESTAMP_LTZ(seq * {span} / {keys}, 3), "
              "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND") if hop else ""
    empty = workdir / "empty"
    empty.mkdir(exist_ok=True)
    if job == "hopfire":  # the keeper's one row, 1000 spans ahead: its watermark stops holding event time back
        (empty / "ahead.csv").write_text(f"{keys * 1000},0\n")
    body = SQL["hop" if hop else job].format(
        keys=keys, keep=KEEPER.format(empty=empty, extra=hop_ts),
        gen=SOURCE.format(name="gen", seed=1, last=keys - 1, extra=hop_ts),
        left=SOURCE.format(name="l", seed=1, last=keys - 1, extra=""),
        right=SOURCE.format(name="r", seed=2, last=keys - 1, extra=""),
    )
    return (f"SET 'state.backend.type' = '{backend}';\n"
            f"SET 'execution.checkpointing.interval' = '{interval}';\n"
            f"SET 'execution.checkpointing.dir' = 'file://{chk}';\n{body}")


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def vm_hwm_mb() -> float:
    """This process's peak resident set so far (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Job:
    """A script run by a sqlstream Session in a thread, with its executor once it exists."""

    def __init__(self, text: str, timeout: float) -> None:
        from sqlstream.frontend.session import Session

        self.session = Session()
        self.error: BaseException | None = None
        self.started = time.perf_counter()
        self.thread = threading.Thread(target=self._run, args=(text,), daemon=True)
        self.thread.start()
        self.executor = self.wait("the job to start", lambda: self.session.current_executor, timeout)

    def _run(self, text: str) -> None:
        try:
            self.session.execute_script(text)
        except BaseException as e:  # noqa: BLE001 - reported by wait()
            self.error = e

    def wait(self, what: str, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.error is not None:
                raise RuntimeError(f"the job failed: {type(self.error).__name__}: {self.error}")
            value = check()
            if value:
                return value
            time.sleep(POLL_S)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")

    def rows_into(self, kind: str) -> int:
        return sum(op.records_in for op in self.executor.status().operators if op.kind == kind)

    def rows_out_of(self, kind: str) -> int:
        return sum(op.records_out for op in self.executor.status().operators if op.kind == kind)

    def end(self) -> None:
        self.executor.cancel()
        self.thread.join(60)


def child_run(job: str, backend: str, keys: int, workdir: Path, interval: str, savepoint: bool,
              timeout: float) -> dict[str, Any]:
    """Fill the state, checkpoint it, stop with a savepoint into workdir/savepoint."""
    chk = workdir / "chk"
    cpu = time.process_time()  # all of the child's threads (RocksDB's flushes and compactions too)
    running = Job(script(job, backend, keys, workdir, chk, interval), timeout)
    kind, inputs = OPERATOR[job]
    running.wait(f"{keys * inputs:,} rows into {kind}", lambda: running.rows_into(kind) >= keys * inputs, timeout)
    fill_s = time.perf_counter() - running.started
    out: dict[str, Any] = {"rows": keys * inputs, "fill_s": fill_s, "rows_per_s": keys * inputs / fill_s,
                           "fill_cpu_s": time.process_time() - cpu,
                           "rss_at_k_mb": vm_hwm_mb(), "fired": running.rows_out_of(kind)}
    coordinator = running.executor.coordinator
    done = len(coordinator.completed)
    out["periodic_checkpoints"] = done
    coordinator.trigger_checkpoint().result(timeout=timeout)
    stats = next(c for c in coordinator.completed[done:] if c.checkpoint_id == coordinator.latest_completed)
    out["checkpoint_s"] = stats.duration_s
    out["checkpoint_mb"] = stats.size_bytes / 2**20
    out["checkpoint_with_shared_mb"] = (stats.size_bytes + size_of(chk / "shared")) / 2**20
    if savepoint:
        target = workdir / "savepoint"
        started = time.perf_counter()
        running.executor.stop_with_savepoint(target, timeout_s=timeout)
        out["savepoint_s"] = time.perf_counter() - started
        out["savepoint_mb"] = size_of(target) / 2**20
    running.end()
    return out


def child_restore(job: str, backend: str, keys: int, workdir: Path, interval: str, timeout: float) -> dict[str, Any]:
    """Restore the savepoint child_run took; time until every subtask has its state in place."""
    text = f"SET 'execution.savepoint.path' = '{workdir / 'savepoint'}';\n" + script(
        job, backend, keys, workdir, workdir / "chk-restored", interval)
    running = Job(text, timeout)
    running.wait("the restore", lambda: running.executor.live_subtasks
                 and all(st.ready.is_set() for st in running.executor.live_subtasks), timeout)
    restore_s = time.perf_counter() - running.started
    running.end()
    return {"restore_s": restore_s, "restore_rss_mb": vm_hwm_mb()}


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    """One child process; its result line, with its peak RSS from os.wait4."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    stdout = proc.stdout.read()  # type: ignore[union-attr]
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for line in stdout.splitlines():
        if line.startswith("LARGE_STATE "):
            return {**json.loads(line[len("LARGE_STATE "):]), "peak_rss_mb": usage.ru_maxrss / 1024}
    tail = (stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {proc.returncode}: {tail}"}


def measure(job: str, backend: str, keys: int, interval: str, savepoint: bool, timeout: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"large-state-{job}-{backend}-"))
    common = [job, backend, str(keys), str(workdir), interval, str(timeout)]
    try:
        result = run_child(["--child", "run", *common, *([] if savepoint else ["--no-savepoint"])], timeout)
        if savepoint and "error" not in result:
            restored = run_child(["--child", "restore", *common], timeout)
            result.update({k: v for k, v in restored.items() if k != "peak_rss_mb"},
                          restore_peak_rss_mb=restored.get("peak_rss_mb"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"job": job, "backend": backend, "keys": keys, **result}


def child_main(argv: list[str]) -> None:
    mode, job, backend, keys, workdir, interval, timeout = argv[:7]
    if mode == "run":
        out = child_run(job, backend, int(keys), Path(workdir), interval, "--no-savepoint" not in argv,
                        float(timeout))
    else:
        out = child_restore(job, backend, int(keys), Path(workdir), interval, float(timeout))
    print("LARGE_STATE " + json.dumps(out), flush=True)


def cell(r: dict[str, Any], key: str, spec: str) -> str:
    value = r.get(key)
    return "-" if value is None else format(value, spec)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000, help="K: distinct keys (rows per join side)")
    ap.add_argument("--jobs", default="group,join,hop", help=f"comma-separated, of {', '.join(JOBS)}")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: hashmap, rocksdb")
    ap.add_argument("--checkpoint-interval", default="10s", help="periodic checkpoints while the state fills")
    ap.add_argument("--no-savepoint", action="store_true", help="skip the savepoint and the restore")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    jobs, backends = args.jobs.split(","), args.backends.split(",")
    for name, given, allowed in (("job", jobs, JOBS), ("backend", backends, BACKENDS)):
        for x in given:
            if x not in allowed:
                ap.error(f"unknown {name} {x!r}; choose from {', '.join(allowed)}")
    print(f"{'job':>7} {'backend':>8} {'keys':>10} {'rows/s':>10} {'CPU s':>6} {'RSS at K':>8} {'peak RSS':>8} "
          f"{'chk s':>6} {'chk MB':>7} {'+shared':>7} {'svp s':>6} {'svp MB':>7} {'restore s':>9} "
          f"{'restore RSS':>11} {'fired':>10}", flush=True)
    results = []
    for job in jobs:
        for backend in backends:
            r = measure(job, backend, args.keys, args.checkpoint_interval, not args.no_savepoint, args.timeout)
            results.append(r)
            if "error" in r:
                print(f"{job:>7} {backend:>8} {args.keys:>10,} {r['error']}", flush=True)
                continue
            print(f"{job:>7} {backend:>8} {args.keys:>10,} {r['rows_per_s']:>10,.0f} {r['fill_cpu_s']:>6.1f} {r['rss_at_k_mb']:>8.0f} "
                  f"{r['peak_rss_mb']:>8.0f} {r['checkpoint_s']:>6.2f} {r['checkpoint_mb']:>7.1f} "
                  f"{r['checkpoint_with_shared_mb']:>7.1f} {cell(r, 'savepoint_s', '6.2f')} "
                  f"{cell(r, 'savepoint_mb', '7.1f')} {cell(r, 'restore_s', '9.2f')} "
                  f"{cell(r, 'restore_peak_rss_mb', '11.0f')} {r['fired']:>10,}", flush=True)
    load = os.getloadavg()
    print(f"load average after the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    out = {"keys": args.keys, "load_average": load, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
