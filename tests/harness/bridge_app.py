"""A WSGI application that shows what it is given, served through the RSGI bridge
(``application``) for tests/pool_admin/test_rsgi_bridge.py: granian runs it as ``make run``
runs the project's, with a 1 s body deadline and a 1,000-byte body limit.

* ``/stream?chunks=N``: N chunks of 64 KiB (an answer the bridge streams), empty chunks between;
* ``/write``: the answer's first part through WSGI's ``write()``;
* ``/raise``: an exception before ``start_response``;
* ``/closes``: the threads that closed each answer so far (its own not counted);
* anything else: the environ's plain values, the body's length and a digest of it (or the read
  error), and the thread that made the answer, as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pool_admin.rsgi_bridge import WSGIBridge

BODY_TIMEOUT_S = 1
BODY_LIMIT = 1000
THREADS = 2
CHUNK = b"z" * 65536
_closes: list[str] = []


class _Answer:
    def __init__(self, parts: Iterable[bytes], counted: bool = True) -> None:
        self.parts = parts
        self.counted = counted

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.parts)

    def close(self) -> None:
        if self.counted:
            _closes.append(threading.current_thread().name)


def _stream(count: int) -> Iterator[bytes]:
    for _ in range(count):
        yield CHUNK
        yield b""


def _shown(environ: dict[str, Any]) -> dict[str, Any]:
    # Not the process environment, which granian's WSGI interface copies into every environ.
    shown = {k: v for k, v in environ.items() if isinstance(v, str) and k not in os.environ}
    try:
        body = environ["wsgi.input"].read()
    except OSError as exc:
        shown["read_error"] = str(exc)
    else:
        shown["body_length"] = len(body)
        shown["body_sha256"] = hashlib.sha256(body).hexdigest()
    shown["thread"] = threading.current_thread().name
    return shown


def wsgi_application(
    environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    path = environ["PATH_INFO"]
    if path == "/raise":
        raise RuntimeError("planted")
    if path == "/stream":
        count = int(environ["QUERY_STRING"].partition("=")[2])
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return _Answer(_stream(count))
    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"written ")
        return _Answer([b"returned"])
    content = json.dumps(_closes if path == "/closes" else _shown(environ)).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(content)))]
    start_response("200 OK", headers)
    return _Answer([content], counted=path != "/closes")


def _refuse(path: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = f"late: {path}".encode()
    return 408, [("Content-Length", str(len(body))), ("Connection", "close")], body


application = WSGIBridge(
    wsgi_application,
    body_timeout=BODY_TIMEOUT_S,
    body_limit=BODY_LIMIT,
    threads=THREADS,
    refuse_slow_body=_refuse,
)
