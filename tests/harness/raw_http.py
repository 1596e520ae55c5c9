"""HTTP/1.x requests written byte by byte, for tests of the real web server: what a client
library would refuse to send (no Host, a chunked body, a coding) goes on the wire as written."""

from __future__ import annotations

import socket


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
