"""Clients that misbehave get a clean answer (or a closed connection, where the protocol has
no room for one), and the worker keeps serving everyone else, within its bounds."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from gateway_runtime.server.config import Limits
from gateway_runtime.wire import Credential
from tests.gateway.conftest import basic, open_tunnel, read_head
from tests.gateway.local_worker import API_KEY, LocalWorker, client, proxy, snapshot

LIMITS = Limits(header_timeout=0.5, max_header_bytes=4096, max_connections=40)


@pytest.fixture(scope="module")
def worker(tinyproxy):
    with LocalWorker(LIMITS) as running:
        running.install(
            snapshot(
                1,
                (proxy("p1", tinyproxy.port), proxy("p2", tinyproxy.port)),
                (Credential("c1", "gwuser", "gwpass1"),),
                (client("shop"), client("small", max_connections=3)),
            )
        )
        yield running


def raw(worker: LocalWorker, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
        sock.sendall(data)
        return read_head(sock)


def still_serving(worker: LocalWorker, target) -> None:
    with httpx.Client(proxy=worker.proxy_url("shop")) as http:
        assert http.get(target.url()).status_code == 200


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),  # origin form: not a proxy request
        (b"GET https://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
        (b"CONNECT nohostport HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://a/ HTTP/1.1\r\nX: " + b"y" * 5000 + b"\r\n\r\n", b"431"),
        (b"GET http://a/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", b"400"),
    ],
)
def test_malformed_requests_get_a_clean_answer(worker, target, request_bytes, status):
    assert raw(worker, request_bytes).split(b" ")[1] == status
    still_serving(worker, target)


def test_connect_to_a_mail_port_is_403(worker, target):
    sock, head = open_tunnel(worker.http_port, 25, "shop")
    sock.close()
    assert head.startswith(b"HTTP/1.1 403")
    still_serving(worker, target)


def test_a_slow_head_is_cut_off(worker, target):
    with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
        sock.sendall(b"GET http://127.0.0.1/ HTTP/1.1\r\n")
        started = time.monotonic()
        head = read_head(sock)
        assert head.startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 3
    still_serving(worker, target)


def test_one_client_past_its_connections_is_429_and_others_go_on(worker, target):
    tunnels = [open_tunnel(worker.http_port, target.port, "small") for _ in range(3)]
    assert all(head.startswith(b"HTTP/1.1 200") for _, head in tunnels)
    sock, head = open_tunnel(worker.http_port, target.port, "small")
    sock.close()
    assert head.startswith(b"HTTP/1.1 429")
    still_serving(worker, target)
    for sock, _ in tunnels:
        sock.close()


def test_a_flood_of_connections_stays_within_the_workers_bound(worker, target):
    """Past ``max_connections`` a new connection is answered 503 and closed at once: the
    worker's descriptors stay bounded; once the flood goes, it serves again."""
    flood = [socket.create_connection(("127.0.0.1", worker.http_port)) for _ in range(60)]
    try:
        time.sleep(0.2)
        open_now = worker.call(lambda: worker.gateway.stats.connections_open)
        assert open_now <= LIMITS.max_connections
        refused = worker.call(lambda: worker.gateway.stats.connections_refused)
        assert refused >= 60 - LIMITS.max_connections
    finally:
        for sock in flood:
            sock.close()
    time.sleep(0.7)  # the held ones time out (header_timeout)
    still_serving(worker, target)


@pytest.mark.parametrize(
    "handshake",
    [
        b"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",  # SOCKS4
        b"\x05\x01\x00",  # no username/password method offered
        b"\x05\x00",  # no method at all
        b"\x05\x01\x02\x01\x04shop\x03bad",  # a wrong key
        b"\xff" * 64,
    ],
)
def test_bad_socks5_handshakes_are_closed(worker, target, handshake):
    with socket.create_connection(("127.0.0.1", worker.socks_port), timeout=5) as sock:
        sock.sendall(handshake)
        answer = b""
        while chunk := sock.recv(64):
            answer += chunk
    assert answer in (b"", b"\x05\xff", b"\x05\x02\x01\x01")
    still_serving(worker, target)


def test_socks5_bind_and_udp_are_refused(worker):
    key = API_KEY.encode()
    with socket.create_connection(("127.0.0.1", worker.socks_port), timeout=5) as sock:
        sock.sendall(b"\x05\x01\x02")
        assert sock.recv(2) == b"\x05\x02"
        sock.sendall(b"\x01\x04shop" + bytes([len(key)]) + key)
        assert sock.recv(2) == b"\x01\x00"
        sock.sendall(b"\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50")  # BIND
        assert sock.recv(10)[:2] == b"\x05\x07"


def test_a_tunnel_carries_what_came_with_the_connect(worker, target):
    """Bytes a client sends right behind its CONNECT (before the 200) reach the target."""
    with socket.create_connection(("127.0.0.1", worker.http_port), timeout=5) as sock:
        sock.sendall(
            f"CONNECT 127.0.0.1:{target.port} HTTP/1.1\r\nProxy-Authorization: {basic('shop')}"
            "\r\n\r\nGET /echo HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        )
        assert read_head(sock).startswith(b"HTTP/1.1 200")
        assert read_head(sock).startswith(b"HTTP/1.1 200 OK")
