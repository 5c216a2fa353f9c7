"""The job manager runs SQL, and SQL runs code (CREATE FUNCTION imports Python from the job's directory):
only this user, through its token, may reach it; no web page (cross-origin, DNS rebinding, a form
post) and no malformed or slow request can. Also: secrets in table options stay hidden, and the CLI
answers a dead or unknown job with an error, not a traceback.

The server is the real one (`sqlstream serve`) on a loopback port, with a 1 s request timeout so that a
body that never arrives is dropped quickly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sqlstream.core.errors import PlanError
from sqlstream.frontend.jobmanager import JobManager, format_jobs
from sqlstream.frontend.session import Session
from sqlstream.runtime.executor import JobConfig
from tests.jobmanager_api import ROOT, Api, start_jobmanager, stop_jobmanager

SECRET = "hunter2-s3cret"
# a job that passes the submission's syntax check and fails when planned, on the line holding the secret
LEAKY_JOB = (
    "CREATE TABLE t (a INT) WITH ('connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = "
    "'127.0.0.1:1', 'format' = 'json', 'properties.sasl.jaas.config' = 'PlainLoginModule required password=\""
    + SECRET + "\";'); INSERT INTO t SELECT nosuch FROM t;"
)


@pytest.fixture(scope="module")
def server() -> Iterator[Api]:
    home = Path(tempfile.mkdtemp(prefix="sqlstream-jmsec-"))
    proc, api = start_jobmanager(home, "--request-timeout", "1")
    try:
        yield api
    finally:
        stop_jobmanager(home)
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SQLSTREAM_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "sqlstream.frontend.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def raw(api: Api, head: str, body: bytes = b"", wait: float = 10) -> tuple[int, bytes]:
    """Sends ``head`` (request line and headers, CRLF-separated, without the blank line) and ``body`` over a
    socket, as a client that lies about its length or never finishes would; returns (status, answer)."""
    port = int(api.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(head.encode() + b"\r\n\r\n" + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


def jobs(api: Api) -> list[dict]:
    status, listing = api.call("/jobs")
    assert status == 200
    return listing["jobs"]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_requests_without_the_right_token_are_refused_with_401(server: Api) -> None:
    assert server.call("/jobs", headers={"Authorization": None})[0] == 401
    assert server.call("/jobs", headers={"Authorization": "Bearer not-the-token"})[0] == 401
    assert server.call("/jobs", headers={"Authorization": f"Basic {server.token}"})[0] == 401
    status, body = server.call("/jobs", "POST", {"sql": "SET 'a' = 'b';"}, headers={"Authorization": None})
    assert status == 401 and "jobmanager.token" in body["error"]
    wrong_cookie = f"sqlstream-token-{server.url.rsplit(':', 1)[1]}=not-the-token"
    assert server.call("/jobs", headers={"Authorization": None, "Cookie": wrong_cookie})[0] == 401
    assert server.call("/jobs")[0] == 200
    assert jobs(server) == []  # nothing was submitted


def test_a_host_header_that_does_not_name_the_server_is_refused(server: Api) -> None:
    """DNS rebinding: evil.example re-resolved to 127.0.0.1 still sends 'Host: evil.example:<port>'."""
    port = server.url.rsplit(":", 1)[1]
    assert server.call("/jobs", headers={"Host": f"evil.example:{port}"})[0] == 403
    assert server.call("/jobs", headers={"Host": "127.0.0.1:1"})[0] == 403
    assert server.call("/jobs", headers={"Host": "127.0.0.1"})[0] == 403
    assert server.call("/jobs", headers={"Host": f"localhost:{port}"})[0] == 200
    assert server.call("/jobs", headers={"Host": f"127.0.0.1:{port}"})[0] == 200


def test_cross_origin_requests_are_refused_even_with_the_token(server: Api) -> None:
    status, body = server.call("/jobs", "POST", {"sql": "SET 'a' = 'b';"}, headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in body["error"]
    assert server.call("/jobs", headers={"Origin": "null"})[0] == 403
    assert server.call("/jobs", headers={"Origin": server.url})[0] == 200  # the page's own requests
    assert jobs(server) == []


def test_a_post_that_is_not_json_is_refused_with_415(server: Api) -> None:
    """A form or a preflight-free fetch from another site can only send text/plain or form types."""
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        status, body = server.call("/jobs", "POST", {"sql": "SET 'a' = 'b';"}, headers={"Content-Type": ctype})
        assert status == 415 and "application/json" in body["error"], ctype
    assert jobs(server) == []


def test_an_oversized_body_is_refused_with_413_without_being_read(server: Api) -> None:
    port = server.url.rsplit(":", 1)[1]
    head = (f"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {server.token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 60000000")
    status, answer = raw(server, head)
    assert status == 413 and b"over the limit of 1048576 bytes" in answer
    just_over = json.dumps({"sql": "SET 'a' = '" + "x" * (1024 * 1024) + "';"})
    assert server.call("/jobs", "POST", json.loads(just_over))[0] == 413


def test_a_body_that_never_arrives_times_out_and_frees_its_thread(server: Api) -> None:
    port = server.url.rsplit(":", 1)[1]
    head = (f"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {server.token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100")
    started = time.monotonic()
    status, answer = raw(server, head, b'{"sql": ')  # and then nothing
    assert status == 408 and b"did not arrive within 1 s" in answer
    assert time.monotonic() - started < 5
    # a client that sends no request at all is dropped too: the connection closes, no answer
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as s:
        assert s.recv(100) == b""
    assert server.call("/jobs")[0] == 200


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"sql": "SET 'a' = 'b';", "name": {"a": 1}}, "name", "field 'name' must be a string, not dict"),
    ({"sql": 42}, "sql", "field 'sql' must be a string, not int"),
    ({"name": "x"}, "sql", "field 'sql' is required"),
    ({"sql": "SET 'a' = 'b';", "cwd": ["/"]}, "cwd", "field 'cwd' must be a string, not list"),
    ({"sql": "SET 'a' = 'b';", "cwd": "/no/such/dir"}, "cwd", "'/no/such/dir' is not an existing directory"),
    ({"sql": "SET 'a' = 'b';", "restore": 1}, "restore", "field 'restore' must be a string, not int"),
    ({"sql": "SET 'a' = 'b';", "allow_non_restored_state": "yes"}, "allow_non_restored_state",
     "must be a boolean, not str"),
    ({"sql": "SET 'a' = 'b';", "sqll": "x"}, "sqll", "unknown field 'sqll'"),
])
def test_malformed_submissions_are_refused_with_400_naming_the_field(server: Api, body: dict, field: str,
                                                                    message: str) -> None:
    status, answer = server.call("/jobs", "POST", body)
    assert status == 400 and answer["field"] == field and message in answer["error"], answer


def test_bodies_that_are_not_a_json_object_are_refused_with_400(server: Api) -> None:
    port = server.url.rsplit(":", 1)[1]
    for payload, message in ((b"{not json", b"not JSON"), (b"[1, 2]", b"must be a JSON object")):
        head = (f"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {server.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}")
        status, answer = raw(server, head, payload)
        assert status == 400 and message in answer
    assert server.call("/jobs/nope/stop", "POST", {"savepoint_dir": 5})[0] == 400
    assert jobs(server) == []


def test_fifty_concurrent_submissions_are_all_answered(server: Api) -> None:
    """They arrive at once (a barrier releases 50 threads): the listen backlog queues them, none is reset."""
    barrier = threading.Barrier(50)
    answers: list[tuple[int, str] | BaseException] = []

    def submit(i: int) -> None:
        barrier.wait()
        try:
            status, body = server.call("/jobs", "POST", {"sql": f"SELEC {i};", "name": f"burst-{i}"}, timeout=60)
            answers.append((status, body["error"]))
        except (OSError, urllib.error.URLError) as e:
            answers.append(e)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(answers) == 50
    assert all(isinstance(a, tuple) and a[0] == 400 and "near 'SELEC'" in a[1] for a in answers), answers


def test_the_page_is_opened_through_its_token_url_which_sets_an_http_only_strict_cookie(server: Api) -> None:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - urllib's signature
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as login:
        opener.open(server.page_url, timeout=30)
    assert login.value.code == 303 and login.value.headers["Location"] == "/"
    cookie = login.value.headers["Set-Cookie"]
    port = server.url.rsplit(":", 1)[1]
    assert cookie.startswith(f"sqlstream-token-{port}={server.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert login.value.headers["Referrer-Policy"] == "no-referrer" and login.value.headers["X-Frame-Options"] == "DENY"
    name_value = cookie.split(";", 1)[0]
    assert server.call("/jobs", headers={"Authorization": None, "Cookie": name_value})[0] == 200
    with opener.open(urllib.request.Request(server.url + "/", headers={"Cookie": name_value}), timeout=30) as page:
        assert page.status == 200 and b'id="jobs"' in page.read()
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        opener.open(server.url + "/", timeout=30)
    assert anonymous.value.code == 401 and b"?token=" in anonymous.value.read()
    with pytest.raises(urllib.error.HTTPError) as wrong:
        opener.open(server.url + "/?token=nope", timeout=30)
    assert wrong.value.code == 401


def test_secret_options_are_masked_in_rest_answers_and_job_logs(server: Api) -> None:
    status, answer = server.call("/jobs", "POST", {"sql": LEAKY_JOB.replace("SELECT", "SELEC")})
    assert status == 400 and "near 'SELEC'" in answer["error"]
    assert SECRET not in answer["error"] and "'properties.sasl.jaas.config' = '******'" in answer["error"]
    status, job = server.call("/jobs", "POST", {"sql": LEAKY_JOB, "name": "leaky"})
    assert status == 201
    failed = wait_for("the job to fail", lambda: (j := server.call(f"/jobs/{job['id']}")[1])["state"] == "FAILED" and j)
    assert "unknown column 'nosuch'" in failed["error"] and "'******'" in failed["error"]
    assert SECRET not in json.dumps(failed)
    log = Path(failed["log"]).read_text()
    assert "unknown column 'nosuch'" in log and SECRET not in log
    # the job's own files (its SQL holds the secret) are the user's alone, as is the token
    home = server.home
    assert stat.S_IMODE((home / "jobmanager.token").stat().st_mode) == 0o600
    for d in (home, home / "jobs", Path(failed["log"]).parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    for f in Path(failed["log"]).parent.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_secret_options_are_masked_in_show_create_table_explain_and_set() -> None:
    session = Session()
    session.execute_script(
        "CREATE TABLE src (a INT) WITH ('connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = "
        f"'127.0.0.1:1', 'format' = 'json', 'properties.sasl.jaas.config' = 'x password=\"{SECRET}\";');"
        "CREATE TABLE snk (a INT) WITH ('connector' = 'postgres', 'url' = 'postgresql://localhost/db', "
        f"'table-name' = 't', 'username' = 'u', 'password' = '{SECRET}');"
        f"SET 'fs.azure.account.key.acct.blob.core.windows.net' = '{SECRET}';"
    )
    shown = session.execute_script("SHOW CREATE TABLE snk;")[0].message
    assert "'password' = '******'" in shown and "'username' = 'u'" in shown and SECRET not in shown
    shown = session.execute_script("SHOW CREATE TABLE src;")[0].message
    assert "'properties.sasl.jaas.config' = '******'" in shown and "'topic' = 't'" in shown
    explained = session.execute_script("EXPLAIN INSERT INTO snk SELECT a FROM src;")[0].message
    assert "Sink: snk [postgres]" in explained and SECRET not in explained
    settings = session.execute_script("SET;")[0].table.to_pylist()
    assert {"key": "fs.azure.account.key.acct.blob.core.windows.net", "value": "******"} in settings


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "jobmanager.token").write_text("a-token-long-enough-to-be-used-here")
    os.chmod(home / "jobmanager.token", 0o644)
    started = cli(home, "serve", "--port", "0")
    assert started.returncode == 1 and "can be read by others (mode 644)" in started.stderr
    assert "Traceback" not in started.stderr


def test_listening_beyond_loopback_warns_without_tls_and_serves_https_with_a_certificate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, api = start_jobmanager(home, "--bind-address", "0.0.0.0")
    try:
        assert "[WARN] The job manager listens on 0.0.0.0 without TLS" in api.startup
        assert api.call("/jobs")[0] == 200 and api.call("/jobs", headers={"Authorization": None})[0] == 401
    finally:
        stop_jobmanager(home)
        proc.wait(timeout=30)
    quiet, api = start_jobmanager(home)  # loopback: nothing to warn about
    stop_jobmanager(home)
    quiet.wait(timeout=30)
    assert api.startup == ""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    proc, api = start_jobmanager(home, "--ssl-cert", str(cert), "--ssl-key", str(key))
    try:
        assert api.url.startswith("https://127.0.0.1:")
        listing = cli(home, "jobs")  # the CLI trusts the job manager's own certificate
        assert listing.returncode == 0 and listing.stdout.startswith("ID"), listing.stderr
        plain = urllib.request.Request(api.url.replace("https", "http") + "/jobs",
                                       headers={"Authorization": f"Bearer {api.token}"})
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(plain, timeout=10)
    finally:
        stop_jobmanager(home)
        proc.wait(timeout=30)


def test_stop_cancel_and_savepoint_of_unknown_or_dead_jobs_fail_cleanly(server: Api, tmp_path: Path) -> None:
    for args in (("stop", "nope"), ("cancel", "nope"), ("stop", "../../etc")):
        done = cli(server.home, *args)
        assert done.returncode == 1 and done.stderr.startswith(f"[ERROR] no job {args[1]}"), done.stderr
        assert "Traceback" not in done.stderr
    # a `sqlstream run` killed with -9 leaves its registry entry behind
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (server.home / "jobs").mkdir(exist_ok=True)
    (server.home / "jobs" / "deadbeef0001.json").write_text(json.dumps(
        {"id": "deadbeef0001", "pid": gone.pid, "script": "x.sql", "started": time.time()}))
    done = cli(server.home, "savepoint", "deadbeef0001", str(tmp_path))
    assert done.returncode == 1 and "[ERROR] no running job 'deadbeef0001'" in done.stderr
    assert "Traceback" not in done.stderr and not (server.home / "jobs" / "deadbeef0001.json").exists()


def test_the_jobs_listing_survives_odd_job_names(server: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    status, job = server.call("/jobs", "POST", {"sql": "SET 'a' = 'b';", "name": "two\nlines \x1b[2J"})
    assert status == 201
    listing = cli(server.home, "jobs")
    assert listing.returncode == 0
    line = next(x for x in listing.stdout.splitlines() if x.startswith(job["id"]))
    assert line.endswith("two?lines ?[2J")
    # a job.json written by an older job manager with an object for a name
    odd = server.home / "jobs" / "0dd0dd0dd0dd"
    odd.mkdir(parents=True)
    (odd / "job.json").write_text(json.dumps({"id": "0dd0dd0dd0dd", "name": {"a": 1}, "cwd": "/", "state": "FAILED",
                                              "started": 1.0, "ended": 2.0, "unknown_field": 1}))
    (server.home / "jobs" / "garbage").mkdir()
    (server.home / "jobs" / "garbage" / "job.json").write_text("[1, 2]")
    monkeypatch.setenv("SQLSTREAM_HOME", str(server.home))
    manager = JobManager()
    try:
        recovered = {j.id: j for j in manager.list()}
    finally:
        manager.stop_event.set()
    assert recovered["0dd0dd0dd0dd"].name == '{"a": 1}' and "garbage" not in recovered
    table = format_jobs([j.summary() for j in recovered.values()], now=3.0)
    assert re.search(r'^0dd0dd0dd0dd\s+FAILED\s+0:00:01\s+0\s+0\s+-\s+\{"a": 1\}$', table, re.M), table


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_parallelism_below_one_or_not_an_integer_is_refused_at_set(value: str) -> None:
    with pytest.raises(PlanError, match=f"'parallelism.default' must be a positive integer, got '{value}'"):
        Session().execute_script(f"SET 'parallelism.default' = '{value}';")
    with pytest.raises(PlanError, match="must be a positive integer"):
        JobConfig.from_settings({"parallelism.default": value})
    assert JobConfig.from_settings({"parallelism.default": "3"}).parallelism == 3
