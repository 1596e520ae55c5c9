"""A WSGI application served over granian's RSGI interface, so that a slow client holds no thread.

Under granian's WSGI interface the application is called once the headers are in, and
``wsgi.input.read`` then blocks its thread, with no time limit and no way to cancel it; a read
still blocked after its request has been answered stops the whole worker (docs/DECISIONS.md,
2026-12-01). :class:`WSGIBridge` reads the body first, on the worker's event loop, where a read
costs no thread and can be given up:

* the body must arrive within ``body_timeout`` seconds of the headers, else the answer is
  ``refuse_slow_body(path)`` (a 408) and the application never sees the request; the server
  closes the connection after it, whatever the client still sends;
* at most ``body_limit + 1`` bytes are read (the +1 lets the application tell "over the limit"
  from "at the limit", as it does for a chunked body); a declared ``Content-Length`` over
  ``body_limit`` is not read at all, and a body cut off or malformed is not taken: the
  application gets a body whose read fails (:class:`UnreadableBody`), so it refuses the
  request (the API: 413 by the declared length, else 400) and can never misread a part;
* only then is the WSGI application called, on a pool of ``threads`` threads, with the body in
  memory: an application thread never waits on a client.

The answer is collected whole on the application thread and handed to granian from there, or,
for a whole file (``wsgi.file_wrapper``: whitenoise's static files), its path, which granian
sends from disk (a part of a file, for a Range request, is read into memory like any answer).
granian writes it out, so a client that does not read its answer holds no thread either.

Bounds: one request at a time per connection (the launcher serves HTTP/1 only, ``--http 1``)
and granian's ``--backpressure`` connections per worker (``launcher.WEB_BACKPRESSURE``) bound
the requests a worker holds at once, and so the bodies in memory (each ``body_limit + 1`` at
most), the requests waiting for a thread, and the answers being written (each as large as the
application made it in memory: API answers and admin pages; files are sent from disk).

No Django here: the bridge is given the application and its limits (pool_admin/rsgi.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = list[tuple[str, str]]
#: An answer made without the application: status, headers, body.
Refusal = tuple[int, Headers, bytes]

#: HTTP versions as RSGI names them, as WSGI's SERVER_PROTOCOL names them.
_PROTOCOLS = {"1": "HTTP/1.0", "1.0": "HTTP/1.0", "1.1": "HTTP/1.1", "2": "HTTP/2"}


class RSGIProtocol(Protocol):
    """The part of granian's ``RSGIHTTPProtocol`` the bridge uses."""

    async def __call__(self) -> bytes: ...
    def __aiter__(self) -> Any: ...
    def response_bytes(self, status: int, headers: Headers, body: bytes) -> None: ...
    def response_file(self, status: int, headers: Headers, file: str) -> None: ...


class UnreadableBody(io.RawIOBase):
    """A body the application must not take for a whole one: declared over the limit (not
    read), cut off, or malformed. Reading it fails as reading a broken socket does, so the
    application refuses it (the API: 413 by the declared length, else 400) and no application
    can misread a part."""

    def __init__(self, why: str) -> None:
        self.why = why

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(self.why)


class FileWrapper:
    """``wsgi.file_wrapper`` (PEP 3333): an answer that is a file. When it is a whole regular
    file on disk, granian sends it from there (read 128 KiB at a time, as the client takes
    them), so a large static file is never held in memory; otherwise (a part of a file, for a
    Range request) it is read like any answer. Django uses it for ``FileResponse``
    (whitenoise's static files)."""

    def __init__(self, filelike: Any, block_size: int = 8192) -> None:
        self.filelike = filelike
        self.block_size = block_size

    def __iter__(self) -> Iterator[bytes]:
        while block := self.filelike.read(self.block_size):
            yield block

    def whole_file(self) -> str | None:
        """The file's path when the answer is all of a regular file opened from that path, else
        None. Only a plain binary file object counts (not one that decodes, as ``GzipFile``
        does, nor a temporary file gone once closed), read from its start, and the path must
        still name the file it has open (same device and inode)."""
        filelike = self.filelike
        if type(filelike) not in (io.BufferedReader, io.FileIO):  # a subclass may read otherwise
            return None
        try:
            name = filelike.name
            if not isinstance(name, str) or filelike.tell() != 0:
                return None
            opened, named = os.fstat(filelike.fileno()), os.stat(name)
        except (OSError, ValueError):
            return None
        same = (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)
        return os.path.abspath(name) if same and stat.S_ISREG(opened.st_mode) else None

    def close(self) -> None:
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


class AppThreads:
    """``count`` threads that make calls for an event loop and settle its futures.

    ``loop.run_in_executor`` chains a ``concurrent.futures.Future`` (with its lock and
    condition) to an asyncio one; here a call is put on a queue and its result handed back with
    one ``call_soon_threadsafe``: 40-49 against 53-59 µs of CPU per hand-off to an idle thread
    on uvloop (bench/thread_handoff.py, docs/PERFORMANCE.md). The queue holds at most the
    requests the worker runs at once (granian's ``--backpressure``). Threads start with the
    first call, in the worker process that makes it, and are daemons: granian ends the worker
    with its loop.
    """

    def __init__(self, count: int, name: str) -> None:
        self.count = count
        self.name = name
        self._calls: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._started = False
        self._start_lock = threading.Lock()

    def run(self, loop: asyncio.AbstractEventLoop, call: Callable[..., Any], *args: Any) -> Any:
        """A future of ``call(*args)`` made on one of the threads (awaitable on ``loop``)."""
        if not self._started:
            self._start()
        future = loop.create_future()
        self._calls.put((loop, future, call, args))
        return future

    def _start(self) -> None:
        with self._start_lock:
            if self._started:
                return
            for number in range(self.count):
                name = f"{self.name}_{number}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
            self._started = True

    def _serve(self) -> None:
        while True:
            loop, future, call, args = self._calls.get()
            error: BaseException | None = None
            result = None
            try:
                result = call(*args)
            except BaseException as exc:  # handed to the awaiting coroutine
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker stops
                loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class AccessLog:
    """One line per request in granian's default access log format, handed to ``sink``:
    ``[2026-12-01 14:04:18 +0000] 127.0.0.1 - "POST /api/v1/extract HTTP/1.1" 200 0.152``,
    the time the request's headers came (local time zone), the client's address (IPv6 in
    brackets), the request line (the path without its query string, which may carry a
    secret), the status and the milliseconds from the headers until the request is done (its
    answer handed to the server, the application's ``close()`` run). A quote, a backslash or
    a character that is not printable in the path is written ``\\xHH`` (or ``\\uHHHH``), so
    a path cannot make a line of its own or end the quoted part early.

    The line is made on the application thread and written by ``sink`` (a
    :class:`~activity.log_batches.LogBatches`' ``add``): granian's own access log writes one
    Python log record per request on the event loop (docs/PERFORMANCE.md).
    """

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self._zone = datetime.datetime.now().astimezone().tzinfo
        self._second: tuple[int, str] = (-1, "")  # the last second formatted, and its text

    def _stamp(self, wall: float) -> str:
        second, text = self._second  # one tuple: a thread never sees half of an update
        if int(wall) != second:
            second = int(wall)
            when = datetime.datetime.fromtimestamp(second, tz=self._zone)
            text = when.strftime("%Y-%m-%d %H:%M:%S %z")
            self._second = (second, text)
        return text

    def write(
        self, began: tuple[float, float], environ: dict[str, Any], path: str, status: int
    ) -> None:
        """The line of the request whose headers came at ``began`` (``time.time()``,
        ``time.perf_counter()``) and which is done now, its answer ``status``."""
        took_ms = (time.perf_counter() - began[1]) * 1000
        if not path.isprintable() or '"' in path or "\\" in path:
            path = "".join(map(_log_char, path))
        method, protocol = environ["REQUEST_METHOD"], environ["SERVER_PROTOCOL"]
        address = environ["REMOTE_ADDR"]
        if ":" in address:  # IPv6, bracketed as granian wrote it
            address = f"[{address}]"
        self.sink(
            f"[{self._stamp(began[0])}] {address} - "
            f'"{method} {path} {protocol}" {status} {took_ms:.3f}'
        )


def _log_char(char: str) -> str:
    if char.isprintable() and char not in '"\\':
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def environ_of(scope: Any, body: io.RawIOBase | io.BytesIO) -> dict[str, Any]:
    """The WSGI environ of an RSGI ``scope`` (PEP 3333), as granian's WSGI interface makes it:
    the path as latin-1 of its bytes, repeated headers joined (cookies with ``;``), and
    ``HTTP_HOST`` the ``Host`` header, else the request's authority, else empty. Header names
    with ``_`` are dropped: as ``HTTP_X_A`` they would pass for ``X-A`` (``X_Forwarded_For``
    for ``X-Forwarded-For``)."""
    server_host, _, server_port = scope.server.rpartition(":")
    client_host, _, client_port = scope.client.rpartition(":")
    environ: dict[str, Any] = {
        "GATEWAY_INTERFACE": "CGI/1.1",
        "REQUEST_METHOD": scope.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": scope.path.encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.query_string,
        "SERVER_NAME": server_host.strip("[]"),
        "SERVER_PORT": server_port,
        "SERVER_PROTOCOL": _PROTOCOLS.get(scope.http_version, "HTTP/1.1"),
        "REMOTE_ADDR": client_host.strip("[]"),
        "REMOTE_PORT": client_port,
        "SERVER_SOFTWARE": "Granian",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.scheme,
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
        "wsgi.file_wrapper": FileWrapper,
    }
    for name, value in scope.headers.items():
        if "_" in name:
            continue
        if name == "content-type":
            key = "CONTENT_TYPE"
        elif name == "content-length":
            key = "CONTENT_LENGTH"
        else:
            key = "HTTP_" + name.upper().replace("-", "_")
            if environ.get(key):
                separator = ";" if key == "HTTP_COOKIE" else ","
                value = environ[key] + separator + value
        environ[key] = value
    environ.setdefault("HTTP_HOST", scope.authority or "")
    return environ


def _declared_length(headers: Any) -> int | None:
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


class WSGIBridge:
    """An RSGI application (granian ``--interface rsgi``) that runs the WSGI ``app``.

    ``body_timeout``: seconds from the headers to the whole body; ``body_limit``: the bytes
    read of a body (one more is read to tell a body over it); ``threads``: the application's
    threads in this worker; ``refuse_slow_body(path)``: the answer to a body that did not
    arrive in time; ``access_log``: where each request's line goes (:class:`AccessLog`), or
    None for none.
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        body_timeout: float,
        body_limit: int,
        threads: int,
        refuse_slow_body: Callable[[str], Refusal],
        access_log: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.body_limit = body_limit
        self.refuse_slow_body = refuse_slow_body
        self.threads = AppThreads(threads, "wsgi")
        self.access_log = AccessLog(access_log) if access_log is not None else None

    async def __rsgi__(self, scope: Any, protocol: RSGIProtocol) -> None:
        if scope.proto != "http":  # the launcher runs granian with --no-ws
            return
        began = (time.time(), time.perf_counter())
        headers = scope.headers
        declared = _declared_length(headers)
        chunked = "transfer-encoding" in headers  # then the length, if any, does not count
        body: io.RawIOBase | io.BytesIO
        if declared is not None and declared > self.body_limit and not chunked:
            body = UnreadableBody("request body over the limit, not read")
        elif not chunked and (declared == 0 or (declared is None and scope.http_version != "2")):
            body = io.BytesIO()  # no body (an HTTP/2 body may come without a length)
        else:
            try:
                async with asyncio.timeout(self.body_timeout):
                    if declared is not None and not chunked:
                        # By its length (at most body_limit) the server reads no more than it.
                        body = io.BytesIO(await protocol())
                    else:
                        body = await self._read_unframed(protocol)
            except TimeoutError:
                refusal = self.refuse_slow_body(scope.path)
                protocol.response_bytes(*refusal)
                if self.access_log is not None:
                    request = environ_of(scope, io.BytesIO())
                    self.access_log.write(began, request, scope.path, refusal[0])
                return
            except Exception:  # granian's error: the body was cut off or malformed
                body = UnreadableBody("request body cut off")
        loop = asyncio.get_running_loop()
        environ = environ_of(scope, body)
        await self.threads.run(loop, self._call, protocol, environ, began, scope.path)

    async def _read_unframed(self, protocol: RSGIProtocol) -> io.RawIOBase | io.BytesIO:
        """A body without a length (chunked), ``body_limit + 1`` bytes at most.

        granian gives the chunks, then one empty chunk at the end. A body cut off or malformed
        gives an empty chunk for the error and another for the end, and so does one with
        trailers (granian's chunks cannot tell them apart): anything after the first empty
        chunk, and a stream with no empty chunk, is not taken, so a chunked body with trailers
        is refused too (checked against granian 2.8: tests/pool_admin/test_rsgi_bridge.py)."""
        most = self.body_limit + 1
        chunks: list[bytes] = []
        got = 0
        ended = False
        async for chunk in protocol:
            if ended:
                return UnreadableBody("request body cut off, malformed or with trailers")
            if not chunk:
                ended = True
                continue
            chunks.append(chunk[: most - got])
            got += len(chunks[-1])
            if got >= most:
                return io.BytesIO(b"".join(chunks))  # over the limit: not read further
        if not ended:
            return UnreadableBody("request body cut off")
        return io.BytesIO(b"".join(chunks))

    def _call(
        self,
        protocol: RSGIProtocol,
        environ: dict[str, Any],
        began: tuple[float, float],
        path: str,
    ) -> None:
        """On an application thread: the application's answer, collected whole and sent from
        here (granian takes an answer from any thread, so the client does not wait for the
        event loop to wake), then closed. Nothing is sent before the application has returned
        its last chunk, so ``start_response`` with ``exc_info`` replaces the status and headers
        until a part of the answer has been made (then it raises, PEP 3333), and an error while
        the answer is made is granian's 500 (so in the access log too)."""
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: Headers, exc_info: Any = None) -> Any:
            if started and exc_info is None:
                raise AssertionError("start_response called again without exc_info")
            if exc_info is not None and any(chunks):  # PEP 3333: the headers count as sent
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [int(status[:3]), headers]
            return chunks.append  # WSGI's write()

        status = 500  # unless an answer is handed over
        try:
            result = self.app(environ, start_response)
            try:
                file = result.whole_file() if isinstance(result, FileWrapper) else None
                if file is not None and not chunks:
                    protocol.response_file(started[0], started[1], file)
                else:
                    chunks.extend(result)
                    protocol.response_bytes(started[0], started[1], b"".join(chunks))
                status = started[0]
            finally:  # after the answer is sent: Django's close() ends the request
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        finally:
            if self.access_log is not None:
                self.access_log.write(began, environ, path, status)
