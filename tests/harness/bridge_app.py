"""A WSGI application that shows what it is given, served through the RSGI bridge
(``application``) for tests/pool_admin/test_rsgi_bridge.py: granian runs it as ``make run``
runs the project's, with a 1 s body deadline and a 1,000-byte body limit.

* ``/long?chunks=N``: N chunks of 64 KiB, empty chunks between;
* ``/file``: this module's own source through ``wsgi.file_wrapper``; ``?from=K``: from byte K on
  (a part of the file, which the bridge reads itself); ``?counted``: a file object of another
  type, whose reads ``/file-reads`` counts (the bridge reads it itself too); ``/file-replaced``:
  a file whose path names another file by the time the answer is sent;
* ``/write``: the answer's first part through WSGI's ``write()``;
* ``/raise``: an exception before ``start_response``; ``/raise-late``: one while the answer's
  chunks are made; ``/error-page``: ``start_response`` again with ``exc_info`` after an error;
  ``/error-after-part``: the same once a part of the answer is made (it raises);
* ``/closes``: the threads that closed each answer so far (its own not counted);
  ``/access-log``: the access log's lines so far (its own not yet among them);
  ``/file-reads``: how many reads the bridge made of ``/file``'s files;
* anything else: the environ's values (objects by their type's name), the body's length and a
  digest of it (or the read error), and the thread that made the answer, as JSON.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pool_admin.rsgi_bridge import WSGIBridge

BODY_TIMEOUT_S = 1
BODY_LIMIT = 1000
THREADS = 2
CHUNK = b"z" * 65536
SOURCE = __file__
_closes: list[str] = []
#: Reads of the files ``/file`` answers with, made by the bridge (none when granian sends the
#: file from disk).
_file_reads: list[int] = []
#: The bridge's access log lines, as its sink is given them.
_access_log: list[str] = []


class _Answer:
    def __init__(self, parts: Iterable[bytes], counted: bool = True) -> None:
        self.parts = parts
        self.counted = counted

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.parts)

    def close(self) -> None:
        if self.counted:
            _closes.append(threading.current_thread().name)


class _CountedReads(io.BufferedReader):
    """A plain binary file whose reads are counted."""

    def read(self, size: int | None = -1) -> bytes:
        _file_reads.append(size or 0)
        return super().read(size)


def _opened(offset: int, counted_type: bool) -> Any:
    """This module's file, opened at ``offset``, closed as Django closes a FileResponse's file
    (its ``close`` replaced by one that also counts); ``counted_type``: the reads are
    counted, which makes it a file object of another type than ``open``'s."""
    raw = io.FileIO(SOURCE, "rb")
    file = _CountedReads(raw) if counted_type else io.BufferedReader(raw)
    file.seek(offset)
    plain_close = file.close

    def close() -> None:
        plain_close()
        _closes.append(threading.current_thread().name)

    file.close = close  # type: ignore[method-assign]
    return file


def _long(count: int) -> Iterator[bytes]:
    for _ in range(count):
        yield CHUNK
        yield b""


def _replaced_file(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
    """A file opened, then another put at its path before the answer is sent: the answer is
    the file opened, not what the path names by then."""
    folder = tempfile.mkdtemp()
    opened, other = os.path.join(folder, "opened"), os.path.join(folder, "other")
    Path(opened).write_bytes(b"the file opened")
    Path(other).write_bytes(b"another file")
    file = open(opened, "rb")  # noqa: SIM115  (closed by the server, through the wrapper)
    os.replace(other, opened)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return environ["wsgi.file_wrapper"](file)


def _error_after_part(start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"a first part"
    try:
        raise RuntimeError("planted, after a part of the answer")
    except RuntimeError:
        start_response("503 Service Unavailable", [], sys.exc_info())  # re-raises
    yield b"never"


def _late_error() -> Iterator[bytes]:
    yield b"a first part"
    raise RuntimeError("planted, while the answer is made")


def _plain(value: Any) -> Any:
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, tuple):
        return list(value)
    return type(value).__name__


def _shown(environ: dict[str, Any]) -> dict[str, Any]:
    # Not the process environment, which granian's WSGI interface copies into every environ.
    shown = {k: _plain(v) for k, v in environ.items() if k not in os.environ}
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
    path, query = environ["PATH_INFO"], environ["QUERY_STRING"]
    if path == "/raise":
        raise RuntimeError("planted")
    if path == "/raise-late":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _Answer(_late_error())
    if path == "/error-page":
        start_response("200 OK", [("Content-Type", "text/plain")])
        try:
            raise RuntimeError("planted, after start_response")
        except RuntimeError:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")],
                           sys.exc_info())  # fmt: skip
        return _Answer([b"the error page"])
    if path == "/long":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return _Answer(_long(int(query.partition("=")[2])))
    if path == "/file":
        options = dict(part.partition("=")[::2] for part in query.split("&") if part)
        offset = int(options.get("from", 0))
        size = os.path.getsize(SOURCE) - offset
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(size))])
        wrapper = environ["wsgi.file_wrapper"]
        return wrapper(_opened(offset, "counted" in options))  # type: ignore[no-any-return]
    if path == "/file-replaced":
        return _replaced_file(environ, start_response)
    if path == "/error-after-part":
        return _error_after_part(start_response)
    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"written ")
        return _Answer([b"returned"])
    if path == "/file-reads":
        content = json.dumps(len(_file_reads)).encode()
    elif path == "/access-log":
        content = json.dumps(_access_log).encode()
    else:
        content = json.dumps(_closes if path == "/closes" else _shown(environ)).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(content)))]
    start_response("200 OK", headers)
    return _Answer([content], counted=path not in ("/closes", "/file-reads", "/access-log"))


def _refuse(path: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = f"late: {path}".encode()
    return 408, [("Content-Length", str(len(body))), ("Connection", "close")], body


application = WSGIBridge(
    wsgi_application,
    body_timeout=BODY_TIMEOUT_S,
    body_limit=BODY_LIMIT,
    threads=THREADS,
    refuse_slow_body=_refuse,
    access_log=_access_log.append,
)
