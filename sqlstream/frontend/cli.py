"""`sqlstream` command line: run or explain a SQL script, the shell, detached jobs.

Errors the user can fix (SQL, options, data, files) are printed as one
message with their location, never as a traceback.  The engine is imported
only by the commands that plan or run SQL, so that `sqlstream jobs`, `stop`
and `cancel` answer at once.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import private_dir
from sqlstream.core.sql import dialect
from sqlstream.core.sql.script import Statement, parse_script
from sqlstream.frontend.jobs import (
    RegisteredJob,
    jobs_dir,
    list_jobs,
    request_cancel,
    request_savepoint,
    running_entry,
)
from sqlstream.runtime.fs import is_remote

if TYPE_CHECKING:
    import pyarrow as pa

    from sqlstream.frontend.jobmanager import Client
    from sqlstream.frontend.session import StatementResult
    from sqlstream.frontend.tableau import TableauPrinter
    from sqlstream.runtime.elements import Chunk


def _read_script(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise SqlStreamError(f"script '{path}' does not exist")
    return p.read_text()


class ScriptOutput:
    """Prints statement results: messages, tables, and live rows of SELECTs."""

    def __init__(self) -> None:
        self.printer: TableauPrinter | None = None

    def on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        from sqlstream.frontend.tableau import TableauPrinter

        if self.printer is None:
            self.printer = TableauPrinter(schema, sys.stdout)
        self.printer.write(chunk.batch, chunk.kinds)

    def on_result(self, stmt: Statement, result: StatementResult) -> None:
        from sqlstream.frontend.tableau import TableauPrinter

        if self.printer is not None:
            self.printer.finish()
            self.printer = None
        elif result.kind == "TABLE" and result.table is not None:
            printer = TableauPrinter(result.table.schema, sys.stdout, changelog=False)
            printer.write(result.table, None)
            printer.finish()
        elif result.kind == "OK" and result.message:
            print(result.message)
        if result.job is not None:
            for warning in result.job.restore_warnings:  # corrupt checkpoints recovery passed over
                print(f"[WARNING] {warning}", file=sys.stderr)
            late = result.job.late_records_dropped
            note = f"; {late} late record{'s' if late != 1 else ''} dropped" if late else ""
            print(f"[INFO] Job finished{note}.", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    sql = _read_script(args.script)
    if args.detach:
        if args.target or args.address:
            raise SqlStreamError("--target/--address do not go with --detach; "
                                 "put SET 'execution.target' = 'ray' (and 'ray.address') in the script")
        return _submit_detached(sql, args)
    from sqlstream.frontend.session import Session

    session = Session(restore_from=args.restore, allow_non_restored_state=args.allow_non_restored_state)
    # defaults: SET statements in the script still override them; an address means Ray
    target = args.target or ("ray" if args.address else None)
    if target:
        session.config["execution.target"] = target
    if args.address:
        session.config["ray.address"] = args.address
    out = ScriptOutput()
    job = RegisteredJob(str(Path(args.script).resolve()), args.job_id)
    job.install_cancel_handlers()
    print(f"[INFO] Job id: {job.id}", file=sys.stderr)

    def take_savepoint(directory: str | None, stop: bool) -> Path | str:
        executor = session.current_executor
        if executor is None:
            raise SqlStreamError("no job is running yet")
        # as Flink: the directory asked for, else the job's state.savepoints.dir
        directory = directory or session.config.get("state.savepoints.dir")
        if not directory:
            raise SqlStreamError("no savepoint directory: name one, or SET 'state.savepoints.dir' in the job")
        name = f"savepoint-{time.strftime('%Y%m%d-%H%M%S')}-{job.id}"
        target = f"{directory.rstrip('/')}/{name}" if is_remote(directory) else Path(directory) / name
        if stop:
            return executor.stop_with_savepoint(target)
        return executor.savepoint(target).result(timeout=120)

    job.install_savepoint_handler(take_savepoint)
    from sqlstream.frontend.status_publisher import StatusPublisher

    # the job manager's window into a detached job; for one in the foreground, what `sqlstream jobs` shows
    own_status = not args.status_dir
    status_dir = private_dir(jobs_dir() / job.id) if own_status else Path(args.status_dir)
    reporter = StatusPublisher(session, status_dir, job.id)
    reporter.start()
    final_state = "FAILED"
    try:
        results = session.execute_script(sql, on_rows=out.on_rows, on_result=out.on_result)
        final_state = "CANCELED" if any(r.job is not None and r.job.cancelled for r in results) else "FINISHED"
    except KeyboardInterrupt:
        final_state = "CANCELED"
        raise
    finally:
        reporter.close(final_state)
        if own_status:
            shutil.rmtree(status_dir, ignore_errors=True)
        job.close()
    return 0


def _submit_detached(sql: str, args: argparse.Namespace) -> int:
    from sqlstream.frontend.jobmanager import Client

    client = Client(start=True)
    # a local path is made absolute for the job manager's working directory; a URI is kept
    restore = (args.restore if is_remote(args.restore) else str(Path(args.restore).resolve())) if args.restore else None
    job = client.submit(sql, args.script, str(Path.cwd()), restore, args.allow_non_restored_state)
    print(f"[INFO] Job has been submitted with JobID {job['id']} (job manager: {client.url}/)")
    print(f"[INFO] Web page: {client.page_url}")
    return 0


def cmd_jobmanager(args: argparse.Namespace) -> int:
    from sqlstream.frontend.jobmanager import Client, ServerOptions, serve

    if args.action == "stop":
        client = Client.running()
        if client is None:
            print("[INFO] No job manager is running.")
            return 0
        client.shutdown()
        print(f"[INFO] Job manager at {client.url} stopped (its running jobs were cancelled).")
        return 0
    return serve(ServerOptions(bind_address=args.bind_address, address=args.address, port=args.port,
                               max_content_length=args.max_content_length, request_timeout_s=args.request_timeout,
                               ssl_cert=args.ssl_cert, ssl_key=args.ssl_key, metrics_auth=not args.metrics_no_auth))


def _managed(job_id: str) -> Client | None:
    """The job manager's client if it runs ``job_id`` (a detached job); None for a job running in the foreground."""
    from sqlstream.frontend.jobmanager import Client

    client = Client.running()
    if client is not None and client.knows(job_id):
        return client
    if running_entry(job_id) is None:
        raise SqlStreamError(f"no job {job_id}: neither the job manager's nor running in the foreground "
                             "(`sqlstream jobs` lists them)")
    return None


def cmd_jobs(args: argparse.Namespace) -> int:
    """Detached jobs (the job manager's, of every state) and the jobs running in the foreground, by one id."""
    from sqlstream.frontend.jobmanager import Client, foreground_summary, format_jobs

    client = Client.running()
    managed = client.jobs() if client is not None else []
    known = {j["id"] for j in managed}
    print(format_jobs(managed + [foreground_summary(j) for j in list_jobs() if j["id"] not in known]))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    savepoint_dir = (args.savepoint if is_remote(args.savepoint) else str(Path(args.savepoint).resolve())) \
        if args.savepoint else None
    client = _managed(args.job)
    if client is not None:
        path = client.stop(args.job, savepoint_dir)
    else:  # a job in the foreground: by default into its state.savepoints.dir, as `sqlstream savepoint`
        path = request_savepoint(args.job, savepoint_dir, stop=True)
    print(f"[INFO] Job {args.job} stopped with a savepoint: {path}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    client = _managed(args.job)
    if client is not None:
        client.cancel(args.job)
    else:
        request_cancel(args.job)
    print(f"[INFO] Job {args.job} is being cancelled.")
    return 0


def cmd_savepoint(args: argparse.Namespace) -> int:
    path = request_savepoint(args.job, args.dir, args.stop)
    print(f"[INFO] Savepoint completed: {path}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from sqlglot import exp

    from sqlstream.frontend.session import Session
    from sqlstream.planner import planner

    sql = _read_script(args.script)
    session = Session()
    for stmt in parse_script(sql):
        node = stmt.node
        if isinstance(node, exp.Insert | dialect.StatementSet | exp.Query):
            print(planner.explain_text(session._roots(node), session.config))
            print()
        elif isinstance(node, dialect.Explain):
            print(session.execute_statement(node).message)
        else:
            session.execute_statement(node)
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    from sqlstream.frontend.shell import main as shell_main

    return shell_main(getattr(args, "init", None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sqlstream", description="Streaming SQL engine (Flink SQL dialect)")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run a SQL script (DDL, then INSERT INTO / SELECT statements)")
    run.add_argument("script")
    run.add_argument("--restore", metavar="PATH", help="resume from a checkpoint or savepoint (or the newest under a checkpoint root)")
    run.add_argument("--allow-non-restored-state", action="store_true",
                     help="start even if some state in the checkpoint maps to no operator")
    run.add_argument("--detach", "-d", action="store_true",
                     help="submit the script to the local job manager (started if needed) and return")
    run.add_argument("--target", choices=("local", "ray"),
                     help="where the job runs: threads in this process (local, the default) or actors on Ray")
    run.add_argument("--address", metavar="ADDR",
                     help="the Ray cluster to run on ('auto', 'HOST:PORT', 'ray://HOST:PORT'; implies --target ray); "
                          "default: a local Ray started for the run")
    run.add_argument("--status-dir", metavar="DIR", help=argparse.SUPPRESS)  # status.json, for the job manager
    run.add_argument("--job-id", help=argparse.SUPPRESS)  # the id the job manager gave the job
    run.set_defaults(func=cmd_run)
    # one family, one id: the id `sqlstream run` prints (or the job manager gave a detached job)
    for name in ("jobs", "list"):
        jobs = sub.add_parser(name, help="list jobs: the job manager's (state, uptime, records, last checkpoint) "
                                         "and those running in the foreground")
        jobs.set_defaults(func=cmd_jobs)
    savepoint = sub.add_parser("savepoint", help="take a savepoint of a running job")
    savepoint.add_argument("job", help="job id (printed by `sqlstream run`, listed by `sqlstream jobs`)")
    savepoint.add_argument("dir", nargs="?", help="directory (or s3://... URI) to write the savepoint under "
                           "(default: the job's state.savepoints.dir)")
    savepoint.add_argument("--stop", action="store_true", help="stop the job after the savepoint")
    savepoint.set_defaults(func=cmd_savepoint)
    stop = sub.add_parser("stop", help="stop a job with a savepoint")
    stop.add_argument("job")
    stop.add_argument("--savepoint", metavar="DIR",
                      help="directory (or s3://... URI) for the savepoint (default: a detached job's folder; "
                           "a job in the foreground: its state.savepoints.dir)")
    stop.set_defaults(func=cmd_stop)
    cancel = sub.add_parser("cancel", help="cancel a job without a savepoint")
    cancel.add_argument("job")
    cancel.set_defaults(func=cmd_cancel)
    explain = sub.add_parser("explain", help="print the logical and physical plans of a script's queries")
    explain.add_argument("script")
    explain.set_defaults(func=cmd_explain)
    for name in ("jobmanager", "serve"):
        jm = sub.add_parser(name, help="run the local job manager (detached jobs, REST API, web page and "
                                       "Prometheus /metrics on 127.0.0.1), or `stop` the running one")
        jm.add_argument("action", nargs="?", choices=("start", "stop"), default="start",
                        help="start (the default, in the foreground) or stop the running job manager, "
                             "cancelling its jobs")
        jm.add_argument("--port", type=int, default=0, help="port to listen on (default: any free one)")
        jm.add_argument("--bind-address", default="127.0.0.1",
                        help="address to listen on (Flink's rest.bind-address; default 127.0.0.1). Anything but "
                             "loopback lets the network submit jobs that run as you: the token is always required, "
                             "and without --ssl-cert it crosses the network in clear text")
        jm.add_argument("--address", help="host name clients use to reach it (Flink's rest.address), "
                                          "accepted in the Host header besides the bind address and localhost")
        jm.add_argument("--max-content-length", type=int, default=1024 * 1024, metavar="BYTES",
                        help="largest request body accepted (Flink's rest.server.max-content-length; default 1 MiB)")
        jm.add_argument("--request-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="time a request's headers and body have to arrive (default 10 s)")
        jm.add_argument("--ssl-cert", metavar="PEM", help="serve HTTPS with this certificate (chain)")
        jm.add_argument("--ssl-key", metavar="PEM", help="the private key of --ssl-cert")
        jm.add_argument("--metrics-no-auth", action="store_true",
                        help="serve GET /metrics (Prometheus) without the token; by default a scraper sends it "
                             "as a bearer token (Prometheus' authorization.credentials_file)")
        jm.set_defaults(func=cmd_jobmanager)
    shell = sub.add_parser("shell", help="interactive SQL shell (the default without a command)")
    shell.add_argument("-i", "--init", metavar="SCRIPT", help="run this SQL script first (catalogs, tables, SET)")
    shell.set_defaults(func=cmd_shell)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        args.func = cmd_shell
    try:
        return args.func(args)
    except SqlStreamError as e:
        print(f"[ERROR] {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a file or directory named on the command line (savepoint dir, ...)
        print(f"[ERROR] {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\n[INFO] Cancelled.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
