"""The API through the real web server, started as ``make run`` starts it (launcher.web_command):
a chunked body as granian passes it (decoded, no CONTENT_LENGTH), HTTP/1.0 without Host, and
the fast path's answer on the wire."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.harness.raw_http import chunks, exchange, request
from tests.harness.web_server import project_web_server

URL = "/api/v1/extract"
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def web_server(redis_url, unique_prefix, tmp_path):
    with project_web_server(redis_url, unique_prefix, tmp_path, workers=1) as port:
        yield port


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

    # Over the body limit by its length: refused by it (413), the body neither sent nor read.
    over = {**auth, **json_body, "Content-Length": str(3 * 1024 * 1024)}
    status, headers, body = exchange(web_server, request("POST", URL, **over), timeout=3)
    assert status == 413 and headers["content-type"] == "application/problem+json", body
    assert json.loads(body)["code"] == "payload_too_large"

    no_host = {**json_body, "Content-Length": str(len(one))}
    for sent in (
        request("POST", URL, one, version="1.0", **no_host),
        request("GET", "/api/v1/nope", **auth),
        request("POST", "/api/v1/proxies/../x/outcome", **auth, **{"Content-Length": "0"}),
    ):
        status, headers, body = exchange(web_server, sent)
        assert status in (400, 404) and headers["content-type"] == "application/problem+json"
        assert json.loads(body)["status"] == status


def test_the_web_server_writes_an_access_log_line_per_request_on_its_standard_output(
    web_server, tmp_path, make_client, seed
):
    """Written by the bridge in batches (pool_admin/rsgi.py), in granian's format; the query
    string and the key stay out of it."""
    seed(n=2)
    key = make_client().plaintext
    one = b'{"count": 1, "mode": "partial"}'
    headers = {"Host": "127.0.0.1", "Authorization": f"Bearer {key}",
               "Content-Type": "application/json", "Content-Length": str(len(one))}  # fmt: skip
    log = tmp_path / "web.log"
    assert exchange(web_server, request("POST", URL + "?token=hidden", one, **headers))[0] == 200
    assert exchange(web_server, request("GET", "/readyz", Host="127.0.0.1"))[0] == 200
    deadline = time.monotonic() + 5
    # Not the readiness probes' lines (/healthz), written whenever their batch is.
    while len(lines := access_lines(log, but="/healthz")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [line.split(' - "')[1].rsplit(" ", 1)[0] for line in lines] == [
        'POST /api/v1/extract HTTP/1.1" 200',
        'GET /readyz HTTP/1.1" 200',
    ]
    assert all(line.startswith("[") and "127.0.0.1" in line for line in lines)
    assert "hidden" not in log.read_text() and key not in log.read_text()


def access_lines(log: Path, but: str | None = None) -> list[str]:
    """The access log lines in ``log``, but for those of requests for the path ``but``."""
    lines = [line for line in log.read_text().splitlines() if ' - "' in line]
    return [line for line in lines if but is None or f" {but} " not in line]


def test_no_access_log_when_it_is_turned_off(redis_url, unique_prefix, tmp_path):
    env = {"WEB_ACCESS_LOG": "0"}
    with project_web_server(redis_url, unique_prefix, tmp_path, workers=1, env=env) as port:
        for _ in range(3):
            assert exchange(port, request("GET", "/healthz", Host="127.0.0.1"))[0] == 200
        time.sleep(0.5)  # more than a batch's interval
        assert access_lines(tmp_path / "web.log") == []
