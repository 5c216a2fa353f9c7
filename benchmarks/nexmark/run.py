"""Nexmark on sqlstream (and, with --flink, on Apache Flink side by side).

Each query runs in its own child process, so that its peak RSS and CPU time are
its own: ``run.py --child SCRIPT`` runs one SQL script through a sqlstream
Session and prints one JSON line of measurements.  A query is run twice: on a
tiny number of events (its start-up: planning, building the job, the
generator's set-up, ...) and on ``--events``; the processing time is the
difference, and events/s is ``--events`` over it.

``--memory`` runs each query on ``--events`` and ten times as many events,
with the source unthrottled and event times spaced by ``--tps`` (so that
windows fire along the way), and prints how much peak RSS grew.

``--source csv`` makes sqlstream read the CSV export Flink reads, like for like.

``--generator-only`` measures the nexmark source alone.  ``--flink`` also runs
each query on Flink (PyFlink in its own venv, see benchmarks/README.md) over
the same events exported as CSV, with Flink's own start-up measured the same
way, and prints the sqlstream/Flink throughput ratio.  Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

TINY_EVENTS = 1000
DEFAULT_FLINK_PYTHON = "/work/flink-venv/bin/python"
# nexmark-flink's benchmark default: 10 M events/s, effectively unthrottled, and event times 0.1 us apart
DEFAULT_TPS = 10_000_000


def query_names() -> list[str]:
    return sorted((p.stem for p in HERE.glob("q*.sql")), key=lambda q: int(q[1:]))


def substitute(text: str, values: dict[str, str]) -> str:
    """Fill ${NAME} placeholders; an unknown one is an error, not a silent blank."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise KeyError(f"no value for placeholder ${{{m.group(1)}}}")
        return values[m.group(1)]

    return re.sub(r"\$\{([A-Z_]+)\}", repl, text)


def script_for(query: str, ddl: str, values: dict[str, str]) -> str:
    return substitute((HERE / ddl).read_text() + "\n" + (HERE / f"{query}.sql").read_text(), values)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text.strip())


# ---------------------------------------------------------------------------- child side


def child(script_path: str) -> None:
    """Run one script through sqlstream; print measurements as one JSON line."""
    started = time.perf_counter()
    from sqlstream.core.errors import SqlStreamError
    from sqlstream.frontend.session import Session

    imported = time.perf_counter()
    session = Session()
    session.config.update(json.loads(os.environ.get("NEXMARK_SETTINGS", "{}")))
    out: dict[str, Any] = {"import_s": imported - started}
    try:
        results = session.execute_script(Path(script_path).read_text())
        out["status"] = "ok"
        job = results[-1].job
        if job is not None:
            sinks = [m for label, m in job.metrics.items() if label.endswith(" Sink")]
            out["rows_out"] = sum(m.records_in for m in sinks)
            out["late_dropped"] = job.late_records_dropped
    except SqlStreamError as e:
        out["status"] = "unsupported"
        out["error"] = first_line(str(e))
    except Exception as e:  # noqa: BLE001 - an engine bug is a result to report, not a crash of the run
        out["status"] = "failed"
        out["error"] = f"{type(e).__name__}: {first_line(str(e))}"
    out["script_s"] = time.perf_counter() - imported
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    out["peak_rss_mb"] = usage.ru_maxrss / 1024
    print("NEXMARK " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------- parent side


def run_child(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a child that prints a 'NEXMARK {json}' line; a crash or time-out is reported as such."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"did not finish within {timeout:.0f} s"}
    wall = time.perf_counter() - started
    for line in proc.stdout.splitlines():
        if line.startswith("NEXMARK "):
            result = json.loads(line[len("NEXMARK "):])
            result["wall_s"] = wall
            return result
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "failed", "error": f"exit {proc.returncode}: {tail}", "wall_s": wall}


class SqlstreamSide:
    """Writes each query's script to a temporary directory and runs it in a child process."""

    def __init__(self, workdir: Path, tps: int, settings: dict[str, str], rate_limited: bool = True,
                 from_csv: bool = False) -> None:
        self.workdir = workdir
        self.tps = tps
        self.rate_limited = rate_limited
        self.from_csv = from_csv  # read the CSV export Flink reads instead of generating the events
        self.env = {**os.environ, "NEXMARK_SETTINGS": json.dumps(settings)}
        self.side_input = workdir / "side_input.csv"
        write_side_input(self.side_input)

    def command(self, query: str, events: int) -> list[str]:
        out_dir = self.workdir / f"out-{query}-{events}"
        shutil.rmtree(out_dir, ignore_errors=True)
        values = {"EVENTS_NUM": str(events), "TPS": str(self.tps), "OUTPUT_DIR": str(out_dir),
                  "SIDE_INPUT": str(self.side_input), "RATE_LIMITED": str(self.rate_limited).lower()}
        ddl = "ddl.sql"
        if self.from_csv:
            values["DATA_DIR"] = str(csv_data(self.workdir, events, self.tps))
            ddl = "ddl_flink.sql"
        path = self.workdir / f"{query}-{events}.sql"
        path.write_text(script_for(query, ddl, values))
        return [sys.executable, str(Path(__file__).resolve()), "--child", str(path)]

    def run(self, query: str, events: int, timeout: float) -> dict[str, Any]:
        tiny = run_child(self.command(query, TINY_EVENTS), timeout, self.env)
        if tiny["status"] != "ok":
            return tiny
        full = run_child(self.command(query, events), timeout, self.env)
        if full["status"] != "ok":
            return full
        return combine(tiny, full, events)


def combine(tiny: dict[str, Any], full: dict[str, Any], events: int) -> dict[str, Any]:
    """The full run's measurements, with the tiny run's time taken out as start-up."""
    processing = max(full["script_s"] - tiny["script_s"], 1e-9)
    return {
        **full,
        "events": events,
        "startup_s": tiny["script_s"] + tiny.get("import_s", 0.0),
        "processing_s": processing,
        "events_per_s": events / processing,
        "cpu_s_processing": max(full["cpu_s"] - tiny["cpu_s"], 0.0),
    }


def write_side_input(path: Path) -> None:
    """Query 13's side input: keys 0..9999, each with its value as text (as nexmark-flink's)."""
    path.write_text("".join(f"{k},{k}\n" for k in range(10_000)))


class FlinkSide:
    """Runs a query on PyFlink over the same events, exported once as CSV per event count."""

    def __init__(self, workdir: Path, python: str, parallelism: int) -> None:
        self.workdir = workdir
        self.python = python
        self.parallelism = parallelism
        self.side_input = workdir / "side_input.csv"

    def run(self, query: str, events: int, tps: int, timeout: float) -> dict[str, Any]:
        results = []
        for n in (TINY_EVENTS, events):
            data = csv_data(self.workdir, n, tps)
            out_dir = self.workdir / f"flink-out-{query}-{n}"
            shutil.rmtree(out_dir, ignore_errors=True)
            values = {"DATA_DIR": str(data), "OUTPUT_DIR": str(out_dir), "SIDE_INPUT": str(self.side_input)}
            path = self.workdir / f"flink-{query}-{n}.sql"
            path.write_text(script_for(query, "ddl_flink.sql", values))
            cmd = [self.python, str(HERE / "flink_runner.py"), str(path), "--parallelism", str(self.parallelism)]
            result = run_child(cmd, timeout)
            if result["status"] != "ok":
                return result
            results.append(result)
        tiny, full = results
        combined = combine(tiny, full, events)
        # Flink's own start-up (JVM, mini-cluster) is outside its script time; report it with the tiny run's
        combined["startup_s"] = tiny["script_s"] + tiny.get("env_s", 0.0)
        return combined


def csv_data(workdir: Path, events: int, tps: int) -> Path:
    """The CSV export of ``events`` events under ``workdir`` (written once, then reused)."""
    directory = workdir / f"data-{events}-{tps}"
    export_csv(directory, events, tps)
    return directory


def export_csv(directory: Path, events: int, tps: int) -> None:
    """The nexmark source's events for ``events`` event numbers, as one CSV file per kind."""
    import numpy as np
    import pyarrow.csv as csv

    from sqlstream.runtime.connectors.nexmark import KINDS, NexmarkConfig, generate

    marker = directory / "COMPLETE"
    if marker.exists():
        return
    shutil.rmtree(directory, ignore_errors=True)
    cfg = NexmarkConfig(first_event_rate=tps)
    step = 500_000
    for kind in KINDS:
        (directory / kind).mkdir(parents=True)
        options = csv.WriteOptions(include_header=False)
        with csv.CSVWriter(directory / kind / "part-0.csv", generate(cfg, kind, np.arange(0)).schema,
                           write_options=options) as writer:
            for start in range(0, events, step):
                writer.write_batch(generate(cfg, kind, np.arange(start, min(start + step, events))))
    marker.touch()


# ---------------------------------------------------------------------------- generator only


def generator_only(events: int, tps: int) -> dict[str, Any]:
    """The nexmark source's own rate per kind (all columns), through its reader."""
    from sqlstream.core.sql.script import parse_script
    from sqlstream.core.tables import TableDef
    from sqlstream.frontend.session import Session
    from sqlstream.runtime.connectors.base import SourceContext
    from sqlstream.runtime.connectors.registry import get_connector

    session = Session()
    values = {"EVENTS_NUM": str(events), "TPS": str(tps), "RATE_LIMITED": "true"}
    for stmt in parse_script(substitute((HERE / "ddl.sql").read_text(), values)):
        session.execute_statement(stmt.node)
    connector = get_connector("nexmark")
    out: dict[str, Any] = {}
    total = 0.0
    for kind in ("person", "auction", "bid"):
        table = session.catalog.get(kind)
        assert isinstance(table, TableDef)
        ctx = SourceContext(table, connector.validate(table), [c.name for c in table.physical_columns])
        reader = connector.create_source(ctx)
        started = time.perf_counter()
        reader.open()
        rows = 0
        while not reader.finished:
            batch = reader.read_batch()
            if batch is not None:
                rows += batch.num_rows
        elapsed = time.perf_counter() - started
        total += elapsed
        out[kind] = {"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed, "events_per_s": events / elapsed}
    out["all"] = {"events": events, "seconds": total, "events_per_s": events / total}
    return out


# ---------------------------------------------------------------------------- output


def fmt_rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def print_table(results: dict[str, dict[str, Any]], flink: bool) -> None:
    header = ["query", "events/s", "proc s", "CPU s", "peak RSS MB", "start-up s", "rows out"]
    if flink:
        header += ["Flink events/s", "Flink proc s", "Flink CPU s", "Flink RSS MB", "Flink start-up s", "ratio"]
    rows = []
    notes = []
    for q, r in results.items():
        s = r["sqlstream"]
        if s["status"] == "ok":
            row = [q, fmt_rate(s["events_per_s"]), f"{s['processing_s']:.1f}", f"{s['cpu_s']:.1f}",
                   f"{s['peak_rss_mb']:.0f}", f"{s['startup_s']:.2f}", str(s.get("rows_out", "-"))]
        else:
            row = [q, s["status"], "", "", "", "", ""]
            notes.append(f"{q} sqlstream: {s['status']}: {s.get('error', '')}")
        if flink:
            f = r.get("flink", {"status": "-"})
            if f["status"] == "ok":
                ratio = s["events_per_s"] / f["events_per_s"] if s["status"] == "ok" else None
                row += [fmt_rate(f["events_per_s"]), f"{f['processing_s']:.1f}", f"{f['cpu_s']:.1f}",
                        f"{f['peak_rss_mb']:.0f}", f"{f['startup_s']:.2f}", f"{ratio:.2f}" if ratio else "-"]
            else:
                row += [f["status"], "", "", "", "", ""]
                notes.append(f"{q} Flink: {f['status']}: {f.get('error', '')}")
        rows.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))
    for n in notes:
        print(n)


def memory_growth(ours: SqlstreamSide, queries: list[str], events: int, timeout: float) -> dict[str, Any]:
    """Each query on ``events`` and 10x ``events``: peak RSS of both runs and its growth."""
    results: dict[str, Any] = {}
    for q in queries:
        small = run_child(ours.command(q, events), timeout, ours.env)
        large = run_child(ours.command(q, 10 * events), timeout, ours.env) if small["status"] == "ok" else small
        results[q] = {"small": small, "large": large}
        print(f"{q}: {small['status']}, {large['status']}", file=sys.stderr, flush=True)
    return results


def print_memory(results: dict[str, Any], events: int) -> None:
    header = ["query", f"RSS MB @ {events:,}", f"RSS MB @ {10 * events:,}", "growth", "events/s (large)"]
    rows = []
    for q, r in results.items():
        small, large = r["small"], r["large"]
        if small["status"] != "ok" or large["status"] != "ok":
            bad = small if small["status"] != "ok" else large
            rows.append([q, bad["status"], bad.get("error", "")[:60], "", ""])
            continue
        growth = large["peak_rss_mb"] / small["peak_rss_mb"] - 1
        rate = 10 * events / max(large["script_s"], 1e-9)
        rows.append([q, f"{small['peak_rss_mb']:.0f}", f"{large['peak_rss_mb']:.0f}", f"{growth:+.0%}", fmt_rate(rate)])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="events per query (all kinds)")
    parser.add_argument("--tps", type=int, default=DEFAULT_TPS, help="first-event.rate: events/s and event spacing")
    parser.add_argument("--queries", help="comma-separated, e.g. q0,q1,q5 (default: all)")
    parser.add_argument("--parallelism", type=int, default=1, help="parallelism.default on both engines")
    parser.add_argument("--batch-size", type=int, help="table.exec.batch-size (rows per source batch)")
    parser.add_argument("--state-backend", choices=["hashmap", "rocksdb"], help="state.backend.type (default hashmap)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per query run")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--unthrottled", action="store_true",
                        help="emit at full speed; --tps then only spaces the event times")
    parser.add_argument("--memory", action="store_true",
                        help="peak RSS at --events and 10x --events, unthrottled (try --tps 10000)")
    parser.add_argument("--generator-only", action="store_true", help="measure the nexmark source alone")
    parser.add_argument("--flink", action="store_true", help="also run each query on Apache Flink (PyFlink)")
    parser.add_argument("--source", choices=["nexmark", "csv"], default="nexmark",
                        help="csv: sqlstream reads the CSV export Flink reads (like for like)")
    parser.add_argument("--flink-python", default=DEFAULT_FLINK_PYTHON, help="python of the PyFlink venv")
    parser.add_argument("--workdir", help="where scripts and exported data go (default: a temporary directory)")
    parser.add_argument("--child", metavar="SCRIPT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    if args.generator_only:
        result = generator_only(args.events, args.tps)
        for kind, r in result.items():
            print(f"{kind:8} {fmt_rate(r['events_per_s'])} events/s" +
                  (f", {fmt_rate(r['rows_per_s'])} {kind} rows/s ({r['rows']} rows)" if "rows" in r else ""))
        if args.json:
            Path(args.json).write_text(json.dumps({"generator": result}, indent=2))
        return 0
    queries = args.queries.split(",") if args.queries else query_names()
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="nexmark-"))
    workdir.mkdir(parents=True, exist_ok=True)
    settings = {"parallelism.default": str(args.parallelism)}
    if args.batch_size:
        settings["table.exec.batch-size"] = str(args.batch_size)
    if args.state_backend:
        settings["state.backend.type"] = args.state_backend
    ours = SqlstreamSide(workdir, args.tps, settings, rate_limited=not (args.unthrottled or args.memory),
                         from_csv=args.source == "csv")
    if args.memory:
        growth = memory_growth(ours, queries, args.events, args.timeout)
        print(f"Nexmark peak RSS, {args.events:,} and {10 * args.events:,} events, event times at "
              f"{args.tps:,}/s, unthrottled, parallelism {args.parallelism}")
        print_memory(growth, args.events)
        if args.json:
            Path(args.json).write_text(json.dumps({"events": args.events, "tps": args.tps, "memory": growth}, indent=2))
        return 0
    theirs = FlinkSide(workdir, args.flink_python, args.parallelism) if args.flink else None
    results: dict[str, dict[str, Any]] = {}
    for q in queries:
        results[q] = {"sqlstream": ours.run(q, args.events, args.timeout)}
        line = f"{q}: sqlstream {results[q]['sqlstream']['status']}"
        if theirs is not None:
            results[q]["flink"] = theirs.run(q, args.events, args.tps, args.timeout)
            line += f", Flink {results[q]['flink']['status']}"
        print(line, file=sys.stderr, flush=True)
    print(f"Nexmark, {args.events:,} events, first-event.rate {args.tps:,}/s, parallelism {args.parallelism}, "
          f"sqlstream reading {'the CSV export' if args.source == 'csv' else 'the nexmark connector'}")
    print_table(results, theirs is not None)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"events": args.events, "tps": args.tps, "parallelism": args.parallelism, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
