"""The API through the real web server, started as ``make run`` starts it (launcher.web_command):
a chunked body as granian passes it (decoded, no CONTENT_LENGTH), HTTP/1.0 without Host, and
the fast path's answer on the wire."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from pool_admin.launcher import web_command
from pool_admin.localservices import free_port
from tests.harness.commands import database_url_of_test_db

URL = "/api/v1/extract"
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]


def exchange(port: int, raw: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection (``Connection: close``): the answer's status, headers
    (lowercased names) and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def request(method: str, path: str, body: bytes = b"", *, version: str = "1.1", **headers: str):
    headers["Connection"] = "close"
    lines = [f"{method} {path} HTTP/{version}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunks(body: bytes, size: int = 7) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


@pytest.fixture
def web_server(redis_url, unique_prefix, tmp_path):
    """The port of granian serving pool_admin.wsgi on the test database and this test's pool."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_test_db(),
        "REDIS_URL": redis_url,
        "POOL_PREFIX": unique_prefix,
        "POOL_DEV": "1",
        "DJANGO_SETTINGS_MODULE": "pool_admin.settings",
    }
    command = web_command(f"127.0.0.1:{port}", workers=1)
    assert command[0] == sys.executable
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _, _ = exchange(port, request("GET", "/healthz", Host="127.0.0.1"), 2)
                if status == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the web server did not start"
            time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_web_server_reads_chunked_bodies_and_answers_every_api_error_as_a_problem(
    web_server, make_client, seed
):
    seed(n=8)
    key = make_client().plaintext
    auth = {"Host": "127.0.0.1", "Authorization": f"Bearer {key}"}
    json_body = {"Content-Type": "application/json"}
    one = b'{"count": 1, "mode": "partial"}'
    plain = request("POST", URL, one, **auth, **json_body, **{"Content-Length": str(len(one))})
    for _ in range(2):  # Django's path verifies the key; then the fast path answers
        status, headers, body = exchange(web_server, plain)
        assert status == 200, body
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
        assert int(headers["content-length"]) == len(body)

    two = b'{"count": 2, "mode": "partial"}'
    for accept in ("application/json", "application/json, */*"):  # fast path, Django's path
        chunked = {"Transfer-Encoding": "chunked", "Accept": accept}
        status, _, body = exchange(web_server, request("POST", URL, chunks(two), **auth,
                                                       **json_body, **chunked))  # fmt: skip
        assert status == 200, body
        assert json.loads(body)["returned"] == 2

    gzip = {"Transfer-Encoding": "gzip, chunked"}
    status, headers, body = exchange(web_server, request("POST", URL, chunks(one), **auth,
                                                         **json_body, **gzip))  # fmt: skip
    assert status == 411 and headers["content-type"] == "application/problem+json"

    no_host = {**json_body, "Content-Length": str(len(one))}
    for sent in (
        request("POST", URL, one, version="1.0", **no_host),
        request("GET", "/api/v1/nope", **auth),
        request("POST", "/api/v1/proxies/../x/outcome", **auth, **{"Content-Length": "0"}),
    ):
        status, headers, body = exchange(web_server, sent)
        assert status in (400, 404) and headers["content-type"] == "application/problem+json"
        assert json.loads(body)["status"] == status
