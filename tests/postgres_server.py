"""A real PostgreSQL server (Debian's ``postgresql`` package) for connector tests.

A test module gets the ``postgres_server`` fixture with
``pytest_plugins = ("tests.postgres_server",)``, as with tests/kafka_broker.py:
only the tests that ask for it start a server.  The fixture runs ``initdb``
into a temporary directory, starts ``postgres`` on a free 127.0.0.1 port with
its socket in that directory (nothing else on the machine is touched, no
service is installed or started), creates a database and yields its URL; the
server is stopped and its files removed when the module's tests are done.

``max_prepared_transactions`` is raised from PostgreSQL's default of 0, which
disables ``PREPARE TRANSACTION``, because the exactly-once sink needs it;
``wal_level = logical`` (and replication slots) for the postgres-cdc source.
Durability settings are off (``fsync``, ``full_page_writes``): the tests kill
job processes, never the server.

PostgreSQL refuses to run as root.  As root the server runs as the
``postgres`` user that Debian's package creates; as anyone else it runs as
that user.  When the binaries are not installed, the tests that need them are
skipped with a message saying how to install them (``.ci/run`` does).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

STARTUP_TIMEOUT_S = 30.0
DATABASE = "sqlstream_test"
SUPERUSER = "postgres"
# The exactly-once tests hold a few prepared transactions per sink subtask at a time.
MAX_PREPARED_TRANSACTIONS = 20
_INSTALL_HINT = "apt-get install -y postgresql"


def _binaries() -> str | None:
    """The bin directory of the newest installed PostgreSQL (Debian: /usr/lib/postgresql/<ver>/bin)."""
    found = [os.path.dirname(p) for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    if not found:
        return None
    return max(found, key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: root cannot, so the package's 'postgres' user; otherwise ourselves."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


def _fail(log_path: str, why: str) -> None:
    with open(log_path, "rb") as f:
        log = f.read().decode(errors="replace")[-4000:]
    pytest.fail(f"PostgreSQL {why}; its log:\n{log}", pytrace=False)


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL on 127.0.0.1; yield 'postgresql://postgres@127.0.0.1:<port>/<db>'."""
    with running_server() as url:
        yield url


@pytest.fixture
def postgres_server_without_logical_wal() -> Iterator[str]:
    """A server with PostgreSQL's default wal_level = replica, for the postgres-cdc source's error."""
    with running_server(wal_level="replica") as url:
        yield url


@contextmanager
def running_server(wal_level: str = "logical") -> Iterator[str]:
    """A throwaway PostgreSQL for the block (see the module docstring); its database's URL."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[test]'")
    bindir = _binaries()
    if bindir is None:
        pytest.skip(f"PostgreSQL server binaries are not installed (/usr/lib/postgresql/*/bin): {_INSTALL_HINT}")
    user = _server_user()
    if user is None:
        pytest.skip("running as root and there is no 'postgres' user to run the PostgreSQL server as")
    root = tempfile.mkdtemp(prefix="sqlstream-pg-")
    data, log = os.path.join(root, "data"), os.path.join(root, "server.log")
    os.chown(root, user.pw_uid, user.pw_gid)
    as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [],
               "env": {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"}} if os.geteuid() == 0 else {}
    port = _free_port()
    proc: subprocess.Popen[bytes] | None = None
    try:
        init = subprocess.run(
            [f"{bindir}/initdb", "-D", data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"],
            capture_output=True, cwd=root, timeout=60, **as_user,
        )
        if init.returncode != 0:
            pytest.fail(f"initdb failed: {init.stderr.decode(errors='replace')[-2000:]}", pytrace=False)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [f"{bindir}/postgres", "-D", data, "-p", str(port), "-k", root,
                 "-c", "listen_addresses=127.0.0.1", "-c", f"max_prepared_transactions={MAX_PREPARED_TRANSACTIONS}",
                 "-c", f"wal_level={wal_level}",
                 "-c", "max_replication_slots=10", "-c", "max_wal_senders=10", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root, **as_user,
            )
        admin_url = f"postgresql://{SUPERUSER}@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                _fail(log, f"exited during start-up with code {proc.returncode}")
            try:
                with psycopg.connect(admin_url, autocommit=True, connect_timeout=2) as conn:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    _fail(log, f"did not accept connections on port {port} within {STARTUP_TIMEOUT_S:.0f} s")
                time.sleep(0.1)
        yield f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)  # "fast" shutdown: SIGTERM's "smart" one waits for clients
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
