"""Real upstream proxies and targets for the gateway worker's tests (one of each per module),
and raw-socket helpers."""

from __future__ import annotations

import base64
import socket

from tests.gateway.local_worker import API_KEY
from tests.harness.gateway_fixtures import microsocks, target, tinyproxy, tls_target

__all__ = ["microsocks", "target", "tinyproxy", "tls_target"]


def basic(username: str, key: str = API_KEY) -> str:
    return "Basic " + base64.b64encode(f"{username}:{key}".encode()).decode()


def read_head(sock: socket.socket) -> bytes:
    """An answer's head, read byte by byte so nothing after it is consumed."""
    data = b""
    while not data.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            break
        data += byte
    return data


def open_tunnel(
    port: int, target_port: int, username: str, key: str = API_KEY
) -> tuple[socket.socket, bytes]:
    """A CONNECT tunnel through the worker on ``port`` to 127.0.0.1:``target_port``; the socket
    and the worker's answer head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(
        f"CONNECT 127.0.0.1:{target_port} HTTP/1.1\r\nHost: 127.0.0.1:{target_port}\r\n"
        f"Proxy-Authorization: {basic(username, key)}\r\n\r\n".encode()
    )
    return sock, read_head(sock)


def get_through(sock: socket.socket, path: str = "/echo") -> bytes:
    """A GET on an open tunnel to the plain-HTTP target; its answer head."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head = read_head(sock)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return head
