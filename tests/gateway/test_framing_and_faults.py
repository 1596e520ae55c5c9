"""The worker's framing and fault handling where a mistake would mix up clients or leak
resources: a client's ``Connection`` header cannot strip the framing the worker forwards by;
a body may take as long as it keeps moving; a tunnel whose client stopped reading is closed
at the idle limit, socket and all; a request cancelled while it reaches its upstream (a
shutdown) frees its slot; a proxy that never takes the connection is a 504 in bounded time with
its slot freed; a client's broken body is the client's fault, not the upstream's."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest

from gateway_runtime.server.config import Limits
from gateway_runtime.wire import Credential
from tests.gateway.conftest import basic, open_tunnel, read_head
from tests.gateway.local_worker import LocalWorker, client, proxy, snapshot

LOGIN = (Credential("c1", "gwuser", "gwpass1"),)


@pytest.fixture
def worker(tinyproxy):
    limits = Limits(idle_timeout=1.0, tunnel_idle_timeout=1.0)
    with LocalWorker(limits) as running:
        running.install(snapshot(1, (proxy("p1", tinyproxy.port),), LOGIN, (client("shop"),)))
        yield running


def established(port: int) -> int:
    """TCP connections in ESTABLISHED state whose local port is ``port`` (this host)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                if int(local.rsplit(":", 1)[1], 16) == port and state == "01":
                    count += 1
    return count


def test_a_connection_header_cannot_strip_the_framing(worker, target):
    smuggled = b"GET http://evil.example/steal HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
        sock.sendall(
            f"POST {target.url()} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Proxy-Authorization: {basic('shop')}\r\n"
            f"Connection: keep-alive, content-length, transfer-encoding, host\r\n"
            f"Content-Length: {len(smuggled)}\r\n\r\n".encode()
            + smuggled
        )
        head = read_head(sock)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        body = b""
        while len(body) < length:
            body += sock.recv(length)
    assert b'"body": %d' % len(smuggled) in body  # one request, its body whole
    assert b'"content-length"' in body and b'"host"' in body


def test_a_body_may_take_as_long_as_it_keeps_moving(worker, target):
    """30 KiB at 10 KiB/s: 3 s, three times the 1 s idle limit."""
    with httpx.Client(proxy=worker.proxy_url("shop"), timeout=10) as http:
        answer = http.get(target.url("/trickle/30"))
    assert answer.status_code == 200 and len(answer.content) == 30 * 1024


def test_a_tunnel_whose_client_stopped_reading_is_closed_whole(worker, target):
    tunnels = []
    for _ in range(5):
        sock, head = open_tunnel(worker.http_port, target.port, "shop")
        assert head.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /bytes/20000000 HTTP/1.1\r\nHost: t\r\n\r\n")  # never read
        tunnels.append(sock)
    time.sleep(0.5)
    assert established(worker.http_port) >= 5
    deadline = time.monotonic() + 10
    while established(worker.http_port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert established(worker.http_port) == 0  # the worker's side of each is gone
    assert worker.call(lambda: worker.gateway.stats.connections_open) == 0
    assert worker.call(lambda: worker.store.load("p1")) == 0
    for sock in tunnels:
        sock.close()


def test_a_request_cancelled_while_reaching_its_upstream_frees_its_slot(tinyproxy):
    silent = socket.create_server(("127.0.0.1", 0))  # takes connections, never answers
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True)
    accepting.start()
    with LocalWorker() as worker:
        port = silent.getsockname()[1]
        worker.install(snapshot(1, (proxy("quiet", port),), LOGIN, (client("shop"),)))
        sock, _ = socket.create_connection(("127.0.0.1", worker.http_port)), None
        sock.sendall(
            f"CONNECT 127.0.0.1:443 HTTP/1.1\r\nProxy-Authorization: {basic('shop')}\r\n\r\n"
            .encode()
        )  # fmt: skip
        deadline = time.monotonic() + 5
        while worker.call(lambda: worker.store.load("quiet")) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)

        def cancel_handlers() -> int:
            handlers = [t for t in asyncio.all_tasks(worker.loop) if "serve" in repr(t.get_coro())]
            for task in handlers:
                task.cancel()
            return len(handlers)

        assert worker.call(cancel_handlers) >= 1  # as a shutdown past its drain time does
        time.sleep(0.2)
        assert worker.call(lambda: worker.store.load("quiet")) == 0
        assert worker.call(lambda: worker.gateway.stats.connections_open) == 0
        sock.close()
    silent.close()
    for one in held:
        one.close()


def test_a_proxy_that_never_takes_the_connection_is_a_504_within_the_connect_timeout():
    # A listener whose accept queue is full (backlog 0, one connection waiting, never
    # accepted): the kernel drops further SYNs, so a connect hangs as to a dead host.
    deaf = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = deaf.getsockname()[1]
    waiting = socket.create_connection(("127.0.0.1", port))
    with LocalWorker(Limits(connect_timeout=0.5)) as worker:
        worker.install(snapshot(1, (proxy("deaf", port),), LOGIN, (client("shop"),)))
        with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
            started = time.monotonic()
            sock.sendall(
                f"CONNECT 127.0.0.1:443 HTTP/1.1\r\nProxy-Authorization: {basic('shop')}\r\n\r\n"
                .encode()
            )  # fmt: skip
            head = read_head(sock)
            took = time.monotonic() - started
        assert head.startswith(b"HTTP/1.1 504"), head
        # One attempt per proxy, never the same one twice: bounded by the attempts' timeouts.
        assert 0.4 < took < 0.5 * worker.limits.connect_attempts + 1.0, took
        stats = worker.call(lambda: dict(worker.gateway.stats.upstream_failures))
        assert stats == {"timeout": 1}, stats
        assert worker.call(lambda: worker.store.load("deaf")) == 0
    waiting.close()
    deaf.close()


def test_a_clients_broken_body_is_a_400_not_an_upstream_failure(worker, target):
    with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
        sock.sendall(
            f"POST {target.url()} HTTP/1.1\r\nHost: t\r\nProxy-Authorization: {basic('shop')}"
            "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".encode()
        )
        assert read_head(sock).startswith(b"HTTP/1.1 400")
    assert worker.call(lambda: dict(worker.gateway.stats.upstream_failures)) == {}
    taken = worker.call(lambda: worker.traffic.take(100))
    assert all(t.failed_upstream == 0 and t.failed_closed == 0 for t in taken)
