"""The interactive shell, driven through a real pseudo-terminal and through its parts."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from sqlstream.frontend.session import Session
from sqlstream.frontend.shell import FlinkSqlLexer, SqlCompleter, SqlShell, is_complete
from tests.conftest import apply_changelog, rows

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")

UNBOUNDED = ("CREATE TABLE clicks (user_id INT, url STRING) WITH ('connector' = 'datagen', "
             "'rows-per-second' = '200', 'fields.user_id.min' = '1', 'fields.user_id.max' = '3');")
BOUNDED = """CREATE TABLE nums (k INT, v BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '300',
    'fields.k.min' = '1', 'fields.k.max' = '4', 'seed' = '7');"""


class Terminal:
    """The shell in a pseudo-terminal: what a person types goes in, what the screen shows comes out."""

    def __init__(self, home: Path, ignore_sigint: bool = False) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the shell, with the pty as its controlling terminal
            if ignore_sigint:  # as under nohup, or started by a parent that ignores Ctrl-C
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.environ.update(SQLSTREAM_HOME=str(home), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
                              PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
            os.chdir(ROOT)
            os.execv(sys.executable, [sys.executable, "-m", "sqlstream.frontend.cli"])
        self.raw = b""
        self.seen = 0  # how much of the screen text earlier expects consumed
        self.exited = False

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def _read(self, wait: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            try:
                self.raw += os.read(self.fd, 65536)
            except OSError:
                pass

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace"))

    def expect(self, pattern: str, timeout: float = 20) -> str:
        """Waits until ``pattern`` shows after what was already matched; returns the text up to it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.compile(pattern).search(self.text, self.seen)
            if m:
                out = self.text[self.seen : m.end()]
                self.seen = m.end()
                return out
            self._read(0.05)
        raise AssertionError(f"'{pattern}' did not appear; the screen shows:\n{self.text[self.seen:][-3000:]}")

    def wait_exit(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exited = True
                return os.waitstatus_to_exitcode(status)
            self._read(0.05)
        raise AssertionError("the shell did not exit")

    def close(self) -> None:
        """Ends the shell if a failed test left it running."""
        if not self.exited:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.exited = True
        os.close(self.fd)


def test_a_session_in_a_terminal(tmp_path: Path) -> None:
    term = Terminal(tmp_path)
    try:
        term.expect("sqlstream>")
        term.type(UNBOUNDED + "\r")
        term.expect(r"\[INFO\] Execute statement succeeded")
        # Tab completes a table name
        term.type("DESCRIBE cli\t")
        term.expect("DESCRIBE clicks")
        term.type(";\r")
        term.expect(r"\| +user_id \| +INT \|")
        # a statement over several lines, then an unbounded query cancelled with Ctrl-C
        term.type("SELECT user_id,\r")
        term.expect("> ")
        term.type("COUNT(*) AS n FROM clicks GROUP BY user_id;\r")
        term.expect(r"\| \+U \|")
        term.type("\x03")
        term.expect(r"Query terminated, received a total of \d+ rows")
        term.expect("sqlstream>")
        # the shell goes on: errors are located, and later statements run
        term.type("SELECT uzer_id FROM clicks;\r")
        error = term.expect(r"\^")
        assert "[ERROR] SQL error at line 1, column 8 near 'uzer_id'" in error and "Did you mean 'user_id'" in error
        term.type("SHOW TABLES;\r")
        term.expect(r"\| +clicks \|")
        term.expect("1 row in set")
        term.type("HELP;\r")
        term.expect("result-mode")
        term.type("QUIT;\r")
        term.expect("Exiting")
        assert term.wait_exit() == 0
    finally:
        term.close()
    history = (tmp_path / "sql_history").read_text()
    assert "SHOW TABLES;" in history and "COUNT(*) AS n FROM clicks" in history
    assert (tmp_path / "sql_history").stat().st_mode & 0o777 == 0o600  # typed statements may hold passwords


def test_ctrl_c_cancels_a_query_even_when_the_shell_started_with_sigint_ignored(tmp_path: Path) -> None:
    term = Terminal(tmp_path, ignore_sigint=True)
    try:
        term.expect("sqlstream>")
        term.type(UNBOUNDED + "\r")
        term.expect(r"\[INFO\] Execute statement succeeded")
        term.type("SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id;\r")
        term.expect(r"\| \+U \|")
        term.type("\x03")
        term.expect(r"Query terminated, received a total of \d+ rows")
        term.type("QUIT;\r")
        term.expect("Exiting")
        assert term.wait_exit() == 0
    finally:
        term.close()


def test_the_live_table_view_redraws_in_place_in_a_terminal(tmp_path: Path) -> None:
    term = Terminal(tmp_path)
    try:
        term.expect("sqlstream>")
        term.type(UNBOUNDED + "\r")
        term.expect("succeeded")
        term.type("SET 'sql-client.execution.result-mode' = 'table';\r")
        term.expect("succeeded")
        term.type("SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id;\r")
        term.expect(r"3 rows, \d+ changes, updated .*, running")
        term.expect(r"3 rows, \d+ changes, updated .*, running")
        term.type("\x03")
        term.expect("query cancelled")
        term.expect("sqlstream>")
        term.type("\x04")  # Ctrl-D leaves too
        assert term.wait_exit() == 0
    finally:
        term.close()
    raw = term.raw.decode(errors="replace")
    # each redraw moves back up over the previous one (8 lines for 3 rows) and clears below
    assert "\x1b[8F\x1b[J" in raw
    assert raw.count("| op |") == 0  # the table view shows rows, not changes


def test_completion_offers_tables_columns_and_keywords() -> None:
    session = Session()
    session.execute_script(UNBOUNDED + BOUNDED + "CREATE VIEW busy AS SELECT user_id AS uid FROM clicks;")
    completer = SqlCompleter(session)

    def complete(text: str) -> list[tuple[str, str]]:
        found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
        return [(c.text, c.display_meta_text) for c in found]

    assert ("clicks", "table") in complete("SELECT * FROM cl")
    assert ("user_id", "column of clicks") in complete("SELECT us")
    assert ("uid", "column of busy") in complete("SELECT u")
    assert complete("SELECT clicks.u") == [("user_id", "column"), ("url", "column")]
    assert complete("SELECT nums.") == [("k", "column"), ("v", "column")]
    assert ("WATERMARK", "keyword") in complete("CREATE TABLE t (ts TIMESTAMP(3), wat")
    assert complete("SELECT ") == []


def test_statements_end_at_a_semicolon_outside_strings_comments_and_statement_sets() -> None:
    assert is_complete("SELECT 1;")
    assert is_complete("SELECT 1;  -- done")
    assert not is_complete("SELECT 1")
    assert not is_complete("SELECT ';")
    assert not is_complete("SELECT 1 /* ; */")
    assert not is_complete("EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1;")
    assert is_complete("EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT 1; END;")
    assert is_complete("quit") and is_complete("HELP;")


def test_highlighting_marks_keywords_strings_and_comments_across_lines() -> None:
    doc = Document("SELECT 'a\nb' AS `x`, 42 -- note\nFROM t /* one\ntwo */ WHERE n")
    lines = FlinkSqlLexer().lex_document(doc)
    first = lines(0)
    assert ("class:keyword", "SELECT") in first and ("class:string", "'a") in first
    assert ("class:string", "b'") in lines(1)
    assert ("class:identifier", "`x`") in lines(1) and ("class:number", "42") in lines(1)
    assert ("class:comment", "-- note") in lines(1)
    assert ("class:keyword", "FROM") in lines(2) and ("class:comment", "/* one") in lines(2)
    assert ("class:comment", "two */") in lines(3) and ("class:keyword", "WHERE") in lines(3)


def _shell_output(mode: str, statement: str) -> str:
    out = io.StringIO()
    shell = SqlShell(Session(), out=out)
    shell.execute(BOUNDED + f"SET 'sql-client.execution.result-mode' = '{mode}'; SET 'table.exec.batch-size' = '50';")
    assert shell.execute(statement)
    return out.getvalue()


def test_result_modes_show_a_changelog_or_its_materialized_table() -> None:
    query = "SELECT k, COUNT(*) AS n FROM nums GROUP BY k;"
    final = rows(apply_changelog(Session().execute_script(BOUNDED + query)[-1].table))

    tableau = _shell_output("tableau", query)
    assert "| op |" in tableau and "| -U |" in tableau and "Received a total of" in tableau

    changelog = _shell_output("changelog", query)
    lines = [line for line in changelog.splitlines() if line.startswith(" +I") or line.startswith(" -U")]
    assert lines and " op | k | n\n" in changelog
    assert re.search(r"Received a total of \d+ changes", changelog)

    table = _shell_output("table", query)
    last = table.split("\x1b[J")[-1]
    shown = sorted(tuple(int(x) for x in re.findall(r"-?\d+", line)) for line in last.splitlines()
                   if re.fullmatch(r"\|\s+\d+ \|\s+\d+ \|", line))
    assert shown == final and "query finished" in last

    bad = _shell_output("nonsense", query)
    assert ("invalid value for 'sql-client.execution.result-mode': 'nonsense' is not one of tableau, changelog, "
            "table") in bad


def test_non_interactive_input_runs_like_a_script(tmp_path: Path) -> None:
    import subprocess

    env = {**os.environ, "SQLSTREAM_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", "shell"], input=BOUNDED + "SHOW TABLES;",
                        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and "nums" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", "shell"], input="SELECT * FROM nope;",
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert bad.returncode == 1 and "[ERROR]" in bad.stdout and "'nope' does not exist" in bad.stdout
