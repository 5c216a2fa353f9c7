"""The interactive SQL shell (``sqlstream`` / ``sqlstream shell``), after Flink's SQL client.

Statements end with ``;`` and may span lines.  Queries run on a background
thread, so Ctrl-C cancels the running job (``JobExecutor.cancel``) and comes
back to the prompt instead of leaving the shell.  Results show in one of
Flink's result modes, chosen with ``SET 'sql-client.execution.result-mode'``:

* ``tableau`` (default): a boxed table, each row printed as it arrives;
* ``changelog``: one line per change, with its op (``+I``, ``-U``, ``+U``, ``-D``);
* ``table``: the materialized result, redrawn in place as the changelog updates it.

The highlighter is a small lexer of its own rather than Pygments' SQL lexer,
so it knows Flink's words (``WATERMARK``, ``TUMBLE``, ``DESCRIPTOR`` ...) and
needs no extra package.
"""

from __future__ import annotations

import io
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

import pyarrow as pa
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style
from sqlglot.errors import TokenError

from sqlstream.core.config import setting
from sqlstream.core.errors import SqlStreamError
from sqlstream.core.home import home, open_private
from sqlstream.core.sql.dialect import Flink, split_statements
from sqlstream.core.sql.script import Statement, parse_one
from sqlstream.core.tables import TableDef, ViewDef
from sqlstream.frontend.session import Session, StatementResult
from sqlstream.frontend.table_api import MaterializedChangelog
from sqlstream.frontend.tableau import TableauPrinter, format_value
from sqlstream.runtime.elements import Chunk, RowKind

RESULT_MODE = "sql-client.execution.result-mode"

KEYWORDS = (
    "ADD", "ALL", "ALTER", "AND", "AS", "ASC", "AVG", "BEGIN", "BETWEEN", "BIGINT", "BOOLEAN", "BY", "CASCADE",
    "CASE", "CAST", "CATALOG", "CATALOGS", "COALESCE", "COUNT", "CREATE", "CUMULATE", "CURRENT", "DATABASE",
    "DATABASES", "DATE", "DECIMAL", "DESC", "DESCRIBE", "DESCRIPTOR", "DISTINCT", "DOUBLE", "DROP", "ELSE", "END",
    "EXECUTE", "EXISTS", "EXPLAIN", "FALSE", "FLOAT", "FOR", "FROM", "FUNCTION", "FUNCTIONS", "GROUP", "HAVING",
    "HELP", "HOP", "IF", "IN", "INSERT", "INT", "INTERVAL", "INTO", "IS", "KEY", "LIKE", "MAX", "MIN", "MINUTE",
    "NOT", "NULL", "ON", "OR", "PARTITION", "PRIMARY", "QUIT", "RESET", "SECOND", "SELECT", "SESSION", "SET",
    "SHOW", "STATEMENT", "STRING", "SUM", "TABLE", "TABLES", "TEMPORARY", "THEN", "TIMESTAMP", "TIMESTAMP_LTZ",
    "TRUE", "TRY_CAST", "TUMBLE", "UNION", "USE", "VALUES", "VIEW", "VIEWS", "WATERMARK", "WHEN", "WHERE", "WITH",
    "ENFORCED", "EXIT", "HOUR", "DAY", "LANGUAGE",
)
_KEYWORD_SET = frozenset(KEYWORDS)

HELP = """The following commands are available:

HELP;                       show this text
QUIT; / EXIT;               leave the shell (Ctrl-D works too)
SET 'key' = 'value';        set a session property; SET; lists them, RESET ['key']; resets
SHOW TABLES|VIEWS|FUNCTIONS|CATALOGS|DATABASES;   SHOW CREATE TABLE t;
DESCRIBE t;                 columns, types, keys, computed columns and the watermark
EXPLAIN <query>;            logical and physical plans
CREATE [TEMPORARY] TABLE|VIEW ...;  CREATE CATALOG c WITH ('type' = 'sqlstream');  USE [CATALOG] ...;
SELECT ...;                 run a query and show its rows (Ctrl-C cancels it)
INSERT INTO t SELECT ...;   run a job that writes to a table

Result modes: SET 'sql-client.execution.result-mode' = 'tableau' | 'changelog' | 'table';
Statements end with ';' and may span several lines."""

# ---------------------------------------------------------------- statement boundaries


def is_complete(text: str) -> bool:
    """Whether ``text`` is one or more whole statements: it ends with ``;`` outside strings,
    comments and an open ``STATEMENT SET BEGIN ... END``, or is a bare shell command."""
    stripped = text.strip()
    if not stripped:
        return False
    if stripped.rstrip(";").strip().upper() in ("QUIT", "EXIT", "HELP"):
        return True
    try:
        tokens = Flink().tokenize(text)
    except TokenError:  # an unterminated string or comment: keep reading lines
        return False
    if not tokens or tokens[-1].text != ";":
        return False
    # split_statements keeps a statement set whole; if it is still open, its END has not come
    last = split_statements(tokens)
    if not last:
        return True
    words = [t.text.upper() for t in last[-1]]
    opens_set = words[:3] in (["EXECUTE", "STATEMENT", "SET"], ["BEGIN", "STATEMENT", "SET"])
    return not opens_set or words[-1] == "END"


# ---------------------------------------------------------------- highlighting

_LEX = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<string>'(?:[^']|'')*(?:'|\Z))"
    r"|(?P<quoted>`(?:[^`]|``)*(?:`|\Z))"
    r"|(?P<number>\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<other>\s+|.)",
    re.DOTALL,
)
STYLE = Style.from_dict({
    "keyword": "ansiblue bold", "string": "ansigreen", "number": "ansimagenta",
    "comment": "ansibrightblack italic", "identifier": "ansicyan",
})


class FlinkSqlLexer(Lexer):
    """Colours keywords, strings, numbers, quoted identifiers and comments (also across lines)."""

    def lex_document(self, document: Document) -> Callable[[int], list[tuple[str, str]]]:
        lines: list[list[tuple[str, str]]] = [[]]
        for m in _LEX.finditer(document.text):
            kind = m.lastgroup or "other"
            text = m.group()
            if kind == "word":
                kind = "keyword" if text.upper() in _KEYWORD_SET else "other"
            style = "" if kind == "other" else f"class:{'identifier' if kind == 'quoted' else kind}"
            for i, part in enumerate(text.split("\n")):
                if i:
                    lines.append([])
                if part:
                    lines[-1].append((style, part))
        return lambda n: lines[n] if n < len(lines) else []


# ---------------------------------------------------------------- completion


class SqlCompleter(Completer):
    """Keywords, table and view names and column names from the session's catalog.

    After ``name.`` only the columns of that table or view are offered.
    """

    def __init__(self, session: Session) -> None:
        self.session = session

    def _columns(self, obj: TableDef | ViewDef) -> list[str]:
        if isinstance(obj, TableDef):
            return [c.name for c in obj.columns]
        from sqlstream.planner.binder import QueryBinder

        try:
            return QueryBinder(self.session.catalog).bind_query(parse_one(obj.query)).node.schema.names
        except SqlStreamError:
            return []  # a view over a table that was dropped since

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        qualified = re.search(r"`?([A-Za-z_][\w]*)`?\.`?(\w*)$", before)
        catalog = self.session.catalog
        if qualified:
            obj = catalog.get(qualified.group(1))
            prefix = qualified.group(2)
            if obj is not None:
                for name in self._columns(obj):
                    if name.lower().startswith(prefix.lower()):
                        yield Completion(name, -len(prefix), display_meta="column")
            return
        match = re.search(r"(\w*)$", before)
        prefix = match.group(1) if match else ""
        if not prefix:
            return
        low = prefix.lower()
        seen: set[str] = set()
        objects = [*catalog.tables(), *catalog.views()]
        for obj in objects:
            if obj.name.lower().startswith(low) and obj.name not in seen:
                seen.add(obj.name)
                yield Completion(obj.name, -len(prefix), display_meta="view" if isinstance(obj, ViewDef) else "table")
        for obj in objects:
            for name in self._columns(obj):
                if name.lower().startswith(low) and name not in seen:
                    seen.add(name)
                    yield Completion(name, -len(prefix), display_meta=f"column of {obj.name}")
        for word in KEYWORDS:
            if word.lower().startswith(low) and word not in seen:
                yield Completion(word, -len(prefix), display_meta="keyword")


# ---------------------------------------------------------------- result views


class ResultView:
    """Shows the rows of one running query; ``finish`` is called once it ends or is cancelled."""

    def on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        raise NotImplementedError

    def finish(self, cancelled: bool) -> None:
        raise NotImplementedError


class TableauView(ResultView):
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.printer: TableauPrinter | None = None

    def on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        if self.printer is None:
            self.printer = TableauPrinter(schema, self.out)
        self.printer.write(chunk.batch, chunk.kinds)

    def finish(self, cancelled: bool) -> None:
        if self.printer is None:
            print("Empty set" if not cancelled else "Query terminated, received a total of 0 rows", file=self.out)
            return
        printer = self.printer
        if cancelled:
            print(printer._line(), file=self.out)
            print(f"Query terminated, received a total of {printer.rows} rows", file=self.out)
        else:
            printer.finish()


class ChangelogView(ResultView):
    """One line per change: ``op | col | col``, unboxed, as Flink's changelog mode lists them."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.rows = 0
        self.schema: pa.Schema | None = None

    def on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        if self.schema is None:
            self.schema = schema
            print(" op | " + " | ".join(schema.names), file=self.out)
        columns = [c.to_pylist() for c in chunk.batch.columns]
        kinds = chunk.kinds_or_inserts().to_pylist()
        for i, k in enumerate(kinds):
            cells = [format_value(c[i], f.type) for c, f in zip(columns, schema, strict=True)]
            print(f" {RowKind(k).short} | " + " | ".join(cells), file=self.out)
        self.rows += chunk.num_rows
        self.out.flush()

    def finish(self, cancelled: bool) -> None:
        verb = "Query terminated, received" if cancelled else "Received"
        print(f"{verb} a total of {self.rows} changes", file=self.out)


class LiveTableView(ResultView):
    """The materialized result, redrawn in place (ANSI cursor movement) as changes arrive."""

    REFRESH_S = 0.2

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.view = MaterializedChangelog()
        self.schema: pa.Schema | None = None
        self.changes = 0
        self.drawn = 0
        self.last_draw = 0.0
        self.lock = threading.Lock()

    def on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        with self.lock:
            self.schema = schema
            self.view.apply_chunk(chunk.batch, chunk.kinds)
            self.changes += chunk.num_rows
            if time.monotonic() - self.last_draw >= self.REFRESH_S:
                self._draw("running, Ctrl-C to stop")

    def _draw(self, status: str) -> None:
        assert self.schema is not None
        height = max(shutil.get_terminal_size((100, 30)).lines - 7, 3)
        rows = self.view.rows()
        shown = rows[:height]
        table = pa.Table.from_pylist([dict(zip(self.schema.names, r, strict=True)) for r in shown], schema=self.schema) \
            if shown else self.schema.empty_table()
        text = io.StringIO()
        printer = TableauPrinter(self.schema, text, changelog=False)
        printer.write(table, None)
        lines = [*text.getvalue().splitlines(), printer._line()]
        more = f" (showing {len(shown)})" if len(rows) > len(shown) else ""
        lines.append(f"{len(rows)} rows{more}, {self.changes} changes, updated {time.strftime('%H:%M:%S')}, {status}")
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")  # back to the first line drawn, clear below
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        self.drawn = len(lines)
        self.last_draw = time.monotonic()

    def finish(self, cancelled: bool) -> None:
        with self.lock:
            if self.schema is None:
                print("Empty set", file=self.out)
                return
            self._draw("query cancelled" if cancelled else "query finished")


# ---------------------------------------------------------------- the shell


class Cancelled(Exception):
    """Raised between statements once the user pressed Ctrl-C."""


class SqlShell:
    def __init__(self, session: Session | None = None, out: TextIO | None = None,
                 history: Path | None = None) -> None:
        self.session = session or Session()
        self.out = out or sys.stdout
        self.history = history or home() / "sql_history"
        self.cancel_requested = threading.Event()
        self.view: ResultView | None = None

    # ------------------------------------------------------------ running statements
    def _make_view(self) -> ResultView:
        mode = setting(self.session.config, RESULT_MODE)  # validated by SET: tableau, changelog or table
        return {"tableau": TableauView, "changelog": ChangelogView, "table": LiveTableView}[mode](self.out)

    def _on_rows(self, chunk: Chunk, schema: pa.Schema) -> None:
        if self.view is None:
            self.view = self._make_view()
        self.view.on_rows(chunk, schema)

    def _on_result(self, stmt: Statement, result: StatementResult) -> None:
        out = self.out
        if self.view is not None:
            self.view.finish(bool(result.job and result.job.cancelled))
            self.view = None
        elif result.kind == "TABLE" and result.table is not None:  # SHOW, DESCRIBE, SET
            printer = TableauPrinter(result.table.schema, out, changelog=False)
            printer.write(result.table, None)
            print(printer._line(), file=out)
            n = result.table.num_rows
            print(f"{n} row{'s' if n != 1 else ''} in set" if n else "Empty set", file=out)
        elif result.message:
            print(result.message, file=out)
        if result.job is not None and result.job.late_records_dropped:
            print(f"[INFO] {result.job.late_records_dropped} late records dropped.", file=out)
        out.flush()
        if self.cancel_requested.is_set():
            raise Cancelled

    def _work(self, text: str, errors: list[BaseException], done: threading.Event | None = None) -> None:
        try:
            self.session.execute_script(text, on_rows=self._on_rows, on_result=self._on_result)
        except BaseException as e:  # noqa: BLE001 - shown by the shell's thread
            errors.append(e)
        finally:
            if done is not None:
                done.set()

    def execute(self, text: str) -> bool:
        """Runs the statements in ``text``; False when the user asked to leave."""
        command = text.strip().rstrip(";").strip().upper()
        if command in ("QUIT", "EXIT"):
            print("[INFO] Exiting the sqlstream shell.", file=self.out)
            return False
        if command == "HELP":
            print(HELP, file=self.out)
            return True
        self.cancel_requested.clear()
        self.view = None
        errors: list[BaseException] = []
        # Waiting on an event, not Thread.join: a join interrupted by Ctrl-C can leave
        # CPython believing the thread has stopped while it still runs.
        done = threading.Event()
        worker = threading.Thread(target=self._work, args=(text, errors, done), name="shell-statement", daemon=True)
        worker.start()
        while not done.is_set():
            try:
                done.wait(0.05)
            except KeyboardInterrupt:
                self._cancel(done)
        if errors and not isinstance(errors[0], Cancelled):  # Cancelled: the result said so already
            self._report(errors[0])
        return True

    def _cancel(self, done: threading.Event) -> None:
        """Ctrl-C: stop the running job and whatever statements were still to come."""
        self.cancel_requested.set()
        while not done.is_set():
            executor = self.session.current_executor
            if executor is not None:
                executor.cancel()
            try:
                done.wait(0.05)
            except KeyboardInterrupt:
                continue

    def _report(self, error: BaseException) -> None:
        if self.view is not None:
            self.view.finish(True)
            self.view = None
        if isinstance(error, SqlStreamError):
            print(f"[ERROR] {error}", file=self.out)
        else:
            print(f"[ERROR] internal error ({type(error).__name__}): {error}", file=self.out)
        self.out.flush()

    # ------------------------------------------------------------ the prompt
    def _key_bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("enter")
        def _(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.complete_state is not None and buffer.complete_state.current_completion is not None:
                buffer.apply_completion(buffer.complete_state.current_completion)
            elif is_complete(buffer.text):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        return kb

    def prompt_session(self) -> PromptSession:
        self.history.parent.mkdir(parents=True, exist_ok=True)
        open_private(self.history, "a").close()  # typed statements can hold passwords: readable by the user only
        return PromptSession(
            message="sqlstream> ",
            multiline=True,
            prompt_continuation=lambda width, line, soft: "> ".rjust(width),
            lexer=FlinkSqlLexer(),
            completer=SqlCompleter(self.session),
            history=FileHistory(str(self.history)),
            key_bindings=self._key_bindings(),
            style=STYLE,
            complete_while_typing=False,
            enable_history_search=False,
        )

    def run(self) -> int:
        print("sqlstream shell: Flink SQL, statements end with ';'. HELP; lists the commands, QUIT; leaves.",
              file=self.out)
        # Ctrl-C cancels the running query whatever disposition the parent left (Python keeps SIGINT
        # ignored when it started ignored, e.g. under nohup or a parent that ignores it)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        prompt = self.prompt_session()
        while True:
            try:
                text = prompt.prompt()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt discards the line, as in a terminal
            except EOFError:
                print("[INFO] Exiting the sqlstream shell.", file=self.out)
                return 0
            if text.strip() and not self.execute(text):
                return 0

    def run_script(self, text: str) -> int:
        """Non-interactive input (an init script, a pipe): run it all; errors as the prompt shows them."""
        errors: list[BaseException] = []
        self._work(text, errors)
        if errors:
            self._report(errors[0])
            return 1
        return 0


def main(init_script: str | None = None) -> int:
    """``sqlstream shell [-i init.sql]``; with a pipe on stdin, runs what it reads instead of prompting."""
    shell = SqlShell()
    if init_script:
        print(f"[INFO] Running the initialization script {init_script}.", file=shell.out)
        if shell.run_script(Path(init_script).read_text()):
            return 1
    if not sys.stdin.isatty():
        return shell.run_script(sys.stdin.read())
    return shell.run()
