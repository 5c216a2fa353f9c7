"""`sqlstream` command line: run or explain a SQL script.

Errors the user can fix (SQL, options, data, files) are printed as one
message with their location, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa

from planner.script import Statement
from runtime.elements import Chunk
from sqlstream.errors import SqlStreamError
from sqlstream.jobs import RegisteredJob, list_jobs, request_savepoint
from sqlstream.session import Session, StatementResult
from sqlstream.tableau import TableauPrinter


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
        if self.printer is None:
            self.printer = TableauPrinter(schema, sys.stdout)
        self.printer.write(chunk.batch, chunk.kinds)

    def on_result(self, stmt: Statement, result: StatementResult) -> None:
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
            late = result.job.late_records_dropped
            note = f"; {late} late record{'s' if late != 1 else ''} dropped" if late else ""
            print(f"[INFO] Job finished{note}.", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    sql = _read_script(args.script)
    session = Session(restore_from=args.restore, allow_non_restored_state=args.allow_non_restored_state)
    out = ScriptOutput()
    job = RegisteredJob(str(Path(args.script).resolve()))
    print(f"[INFO] Job id: {job.id}", file=sys.stderr)

    def take_savepoint(directory: Path, stop: bool) -> Path:
        executor = session.current_executor
        if executor is None:
            raise SqlStreamError("no job is running yet")
        target = directory / f"savepoint-{time.strftime('%Y%m%d-%H%M%S')}-{job.id}"
        path = executor.savepoint(target).result(timeout=120)
        if stop:
            executor.cancel()
        return path

    job.install_savepoint_handler(take_savepoint)
    try:
        session.execute_script(sql, on_rows=out.on_rows, on_result=out.on_result)
    finally:
        job.close()
    return 0


def cmd_savepoint(args: argparse.Namespace) -> int:
    path = request_savepoint(args.job, Path(args.dir), args.stop)
    print(f"[INFO] Savepoint completed: {path}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for j in list_jobs():
        print(f"{j['id']}  pid={j['pid']}  {j['script']}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from sqlglot import exp

    from planner import dialect, planner
    from planner.script import parse_script

    sql = _read_script(args.script)
    session = Session()
    for stmt in parse_script(sql):
        node = stmt.node
        if isinstance(node, exp.Insert | dialect.StatementSet | exp.Query):
            print(planner.explain_text(session._roots(node)))
            print()
        elif isinstance(node, dialect.Explain):
            print(session.execute_statement(node).message)
        else:
            session.execute_statement(node)
    return 0


def cmd_shell(args: argparse.Namespace) -> int:
    from sqlstream.shell import main as shell_main

    return shell_main(getattr(args, "init", None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sqlstream", description="Streaming SQL engine (Flink SQL dialect)")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run a SQL script (DDL, then INSERT INTO / SELECT statements)")
    run.add_argument("script")
    run.add_argument("--restore", metavar="PATH", help="resume from a checkpoint or savepoint (or the newest under a checkpoint root)")
    run.add_argument("--allow-non-restored-state", action="store_true",
                     help="start even if some state in the checkpoint maps to no operator")
    run.set_defaults(func=cmd_run)
    savepoint = sub.add_parser("savepoint", help="take a savepoint of a running job")
    savepoint.add_argument("job", help="job id (printed by `sqlstream run`, listed by `sqlstream list`)")
    savepoint.add_argument("dir", help="directory to write the savepoint under")
    savepoint.add_argument("--stop", action="store_true", help="stop the job after the savepoint")
    savepoint.set_defaults(func=cmd_savepoint)
    listing = sub.add_parser("list", help="list running jobs")
    listing.set_defaults(func=cmd_list)
    explain = sub.add_parser("explain", help="print the logical and physical plans of a script's queries")
    explain.add_argument("script")
    explain.set_defaults(func=cmd_explain)
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
    except KeyboardInterrupt:
        print("\n[INFO] Cancelled.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
