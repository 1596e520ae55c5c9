"""Slow request bodies against the real web server (``launcher.web_command``, as make run runs it).

Clients that send their headers and then the body one byte a second must not hold the server's
application threads: with 200 of them open, /healthz and a valid extract are still answered at
once, each stalled body gets a 408 within a few seconds (problem+json under /api/), and the
server keeps answering while those clients stay connected after it (issue 11, item 9; the web
server reads bodies on its event loop, pool_admin/rsgi_bridge.py).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import selectors
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pool_admin.defaults import WEB_BODY_TIMEOUT_S, WEB_THREADS
from tests.harness.web_server import project_web_server

WORKERS = 2
#: Stalled bodies: the issue's 200, fifty times the server's application threads.
STALLED = 200
assert STALLED > 4 * WORKERS * WEB_THREADS
#: How long an ordinary request may take while the stalled bodies are open.
ANSWER_BOUND_S = 2.0
#: How long a body may take to arrive before its request is answered 408.
BODY_TIMEOUT_S = float(WEB_BODY_TIMEOUT_S)


@contextlib.contextmanager
def web_server(tmp_path: Path, redis_url: str, prefix: str):
    with project_web_server(redis_url, prefix, tmp_path, WORKERS) as port:
        yield f"http://127.0.0.1:{port}", port


def request(url: str, timeout: float, **options) -> tuple[int | None, float]:
    """The status of one request (None if it went unanswered) and the seconds it took."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, **options), timeout=timeout) as r:
            return r.status, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - started
    except OSError:
        return None, time.monotonic() - started


def get(url: str, timeout: float = 1.0) -> tuple[int | None, float]:
    return request(url, timeout)


def extract(base: str, key: str, timeout: float) -> tuple[int | None, float]:
    return request(
        f"{base}/api/v1/extract",
        timeout,
        data=json.dumps({"count": 1, "mode": "partial"}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )


class StalledBody:
    """A connection that sends its headers, then one byte of its body a second, and stays
    open after the server's answer, as a hostile client's would."""

    def __init__(self, port: int, head: bytes) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(head + b"x")
        self.sock.setblocking(False)
        self.started = time.monotonic()
        self.answer = b""
        self.answered_after: float | None = None
        self.closed_by_server = False

    def trickle(self) -> None:
        if not self.closed_by_server:
            with contextlib.suppress(OSError):
                self.sock.send(b"x")

    def receive(self) -> None:
        try:
            chunk = self.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.answer += chunk
        if self.answered_after is None and (b"\r\n\r\n" in self.answer or not chunk):
            self.answered_after = time.monotonic() - self.started
        if not chunk:
            self.closed_by_server = True

    @property
    def status(self) -> int | None:
        parts = self.answer.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None

    @property
    def content_type(self) -> str | None:
        for line in self.answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-type":
                return value.strip()
        return None


def drive(stalled: list[StalledBody], until: float) -> None:
    """Until ``until`` (monotonic): a byte a second on each connection the server has not
    closed, and whatever the server answers; then every connection is closed."""
    selector = selectors.DefaultSelector()
    for body in stalled:
        selector.register(body.sock, selectors.EVENT_READ, body)
    next_byte = time.monotonic() + 1
    while (now := time.monotonic()) < until:
        if now >= next_byte:
            for body in stalled:
                body.trickle()
            next_byte += 1
        for key, _ in selector.select(timeout=0.2):
            body = key.data
            body.receive()
            if body.closed_by_server:
                selector.unregister(body.sock)
    selector.close()
    for body in stalled:
        body.sock.close()


def login_head() -> bytes:
    return (
        b"POST /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Cookie: csrftoken=" + b"a" * 32 + b"\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
    )


def extract_head(key: str) -> bytes:
    return (
        b"POST /api/v1/extract HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_stalled_bodies_neither_stop_the_server_nor_stay_unanswered(
    tmp_path, redis_url, unique_prefix, make_client, seed
):
    seed(n=5)
    key = make_client().plaintext  # committed: transaction=True, so the server sees it
    with web_server(tmp_path, redis_url, unique_prefix) as (base, port):
        assert extract(base, key, timeout=10)[0] == 200  # warm: key verified, scripts loaded
        heads = [login_head(), extract_head(key)] * (STALLED // 2)
        stalled = [StalledBody(port, head) for head in heads]
        until = time.monotonic() + BODY_TIMEOUT_S + 6
        with concurrent.futures.ThreadPoolExecutor(1) as driver:
            driving = driver.submit(drive, stalled, until)
            time.sleep(1)  # every stalled body is being waited for by now

            health = get(f"{base}/healthz", timeout=ANSWER_BOUND_S)
            served = extract(base, key, timeout=ANSWER_BOUND_S)
            time.sleep(BODY_TIMEOUT_S + 1)  # every stalled body has had its 408
            health_after = get(f"{base}/healthz", timeout=ANSWER_BOUND_S)
            served_after = extract(base, key, timeout=ANSWER_BOUND_S)
            driving.result()

    assert health[0] == 200, f"/healthz with {STALLED} stalled bodies open: {health}"
    assert served[0] == 200, f"an extract with {STALLED} stalled bodies open: {served}"
    assert health_after[0] == 200, f"/healthz after the 408s: {health_after}"
    assert served_after[0] == 200, f"an extract after the 408s: {served_after}"
    statuses = collections.Counter(s.status for s in stalled)
    assert statuses == {408: STALLED}, statuses
    types = collections.Counter(s.content_type for s in stalled)
    assert types == {
        "text/plain; charset=utf-8": STALLED // 2,  # /admin/login/
        "application/problem+json": STALLED // 2,  # /api/v1/extract
    }, types
    slowest = max(s.answered_after or 0.0 for s in stalled)
    assert slowest < BODY_TIMEOUT_S + 2, f"the last 408 came after {slowest:.1f} s"
    assert all(s.closed_by_server for s in stalled), "a 408'd connection was left open"
