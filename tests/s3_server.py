"""A real S3 server (moto's, ``python -m moto.server``) for object-storage tests.

A test module gets the fixtures with ``pytest_plugins = ("tests.s3_server",)``.
``s3_server`` starts one server per module on a free 127.0.0.1 port, as its own
process (the job processes of the SIGKILL tests reach it over HTTP like any
store), and stops it at the end; ``bucket`` creates a fresh bucket per test.
``s3_server_with_auth`` is a second server that checks credentials (moto's
IAM authentication after its first few requests), with one user whose keys
are valid.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 30.0
ACCESS_KEY = "sqlstream-test"  # moto without authentication takes any keys
SECRET_KEY = "sqlstream-secret"


@dataclass
class S3Server:
    endpoint: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY

    @property
    def settings(self) -> dict[str, str]:
        """The SET keys a job uses to reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": self.access_key,
                "s3.secret-key": self.secret_key, "s3.path.style.access": "true"}

    def set_statements(self) -> str:
        return "".join(f"SET '{k}' = '{v}';\n" for k, v in self.settings.items())

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")

    def create_bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``prefix``, sorted."""
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto's S3 server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"moto's S3 server did not listen on port {port} within {STARTUP_TIMEOUT_S} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    proc, endpoint = _start({})
    try:
        yield S3Server(endpoint)
    finally:
        _stop(proc)


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.create_bucket()


_POLICY = json.dumps({"Version": "2012-10-17",
                      "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})


@pytest.fixture(scope="module")
def s3_server_with_auth() -> Iterator[tuple[S3Server, str]]:
    """(a server checking credentials with valid keys in it, a bucket): moto serves its first
    five requests unauthenticated, which create the user, its policy, its keys and the bucket."""
    import boto3

    proc, endpoint = _start({"INITIAL_NO_AUTH_ACTION_COUNT": "5"})
    try:
        iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x",
                           region_name="us-east-1")
        iam.create_user(UserName="job")
        iam.put_user_policy(UserName="job", PolicyName="s3", PolicyDocument=_POLICY)
        key = iam.create_access_key(UserName="job")["AccessKey"]
        server = S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        name = f"b-{uuid.uuid4().hex[:12]}"
        server.client().create_bucket(Bucket=name)
        yield server, name
    finally:
        _stop(proc)
