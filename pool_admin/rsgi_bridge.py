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
  ``body_limit`` is not read at all: the application gets the declared length and a body
  whose read fails, so it refuses the request by its length (Django: 413) and can never
  misread a partial body;
* only then is the WSGI application called, on a pool of ``threads`` threads, with the body in
  memory: an application thread never waits on a client.

The answer is collected on the application thread up to :data:`BUFFERED_ANSWER` bytes and handed
to granian whole from that thread (every API and admin answer); a longer one (a static file) is
streamed from the event loop, each next chunk made on an application thread, so a slow reader
holds no thread either.

Bounds: granian's ``--backpressure`` bounds the requests a worker runs at once (``make run``:
``launcher.WEB_BACKPRESSURE``), and so the bodies in memory (each ``body_limit + 1`` at most)
and the requests waiting for a thread.

No Django here: the bridge is given the application and its limits (pool_admin/rsgi.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = list[tuple[str, str]]
#: An answer made without the application: status, headers, body.
Refusal = tuple[int, Headers, bytes]

#: Bytes of an answer collected before it is streamed instead (larger than any API or admin
#: page; static files above it are streamed).
BUFFERED_ANSWER = 256 * 1024
#: HTTP versions as RSGI names them, as WSGI's SERVER_PROTOCOL names them.
#: What ``next`` gives for the end of a streamed answer (an empty chunk is not the end).
_END: Any = object()
_PROTOCOLS = {"1": "HTTP/1.0", "1.0": "HTTP/1.0", "1.1": "HTTP/1.1", "2": "HTTP/2"}


class RSGIProtocol(Protocol):
    """The part of granian's ``RSGIHTTPProtocol`` the bridge uses."""

    async def __call__(self) -> bytes: ...
    def __aiter__(self) -> Any: ...
    def response_bytes(self, status: int, headers: Headers, body: bytes) -> None: ...
    def response_stream(self, status: int, headers: Headers) -> Any: ...


class BodyNotRead(io.RawIOBase):
    """The body of a request whose declared length is over the limit: it was not read, and
    reading it fails, so no application can take a part of it for the whole."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError("request body over the limit, not read")


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


class _Answer(NamedTuple):
    status: int
    headers: Headers
    chunks: list[bytes]
    #: The rest of a long answer, still to be made (None: ``chunks`` is all of it).
    rest: Iterator[bytes] | None
    result: Iterable[bytes]


def environ_of(scope: Any, body: io.RawIOBase | io.BytesIO) -> dict[str, Any]:
    """The WSGI environ of an RSGI ``scope`` (PEP 3333), as granian's WSGI interface makes it:
    the path as latin-1 of its bytes, repeated headers joined (cookies with ``;``), and an
    empty ``HTTP_HOST`` when the request had none. Header names with ``_`` are dropped: as
    ``HTTP_X_A`` they would pass for ``X-A`` (``X_Forwarded_For`` for ``X-Forwarded-For``)."""
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
        "HTTP_HOST": "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.scheme,
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.input_terminated": True,
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
    arrive in time.
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        body_timeout: float,
        body_limit: int,
        threads: int,
        refuse_slow_body: Callable[[str], Refusal],
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.body_limit = body_limit
        self.refuse_slow_body = refuse_slow_body
        self.threads = AppThreads(threads, "wsgi")

    async def __rsgi__(self, scope: Any, protocol: RSGIProtocol) -> None:
        if scope.proto != "http":  # the launcher runs granian with --no-ws
            return
        headers = scope.headers
        declared = _declared_length(headers)
        chunked = "transfer-encoding" in headers  # then the length, if any, does not count
        if declared is not None and declared > self.body_limit and not chunked:
            body: io.RawIOBase | io.BytesIO = BodyNotRead()
        elif not chunked and (declared == 0 or (declared is None and scope.http_version != "2")):
            body = io.BytesIO()  # no body (an HTTP/2 body may come without a length)
        else:
            try:
                async with asyncio.timeout(self.body_timeout):
                    # By its length (at most body_limit) the server reads no more than it.
                    by_length = declared is not None and not chunked
                    body = io.BytesIO(await protocol() if by_length else await self._read(protocol))
            except TimeoutError:
                protocol.response_bytes(*self.refuse_slow_body(scope.path))
                return
            except Exception:  # the client went away mid-body: nobody to answer
                return
        loop = asyncio.get_running_loop()
        answer = await self.threads.run(loop, self._call, protocol, environ_of(scope, body))
        if answer is not None:
            await self._stream(loop, protocol, answer)

    async def _read(self, protocol: RSGIProtocol) -> bytes:
        """The body, ``body_limit + 1`` bytes at most."""
        most = self.body_limit + 1
        chunks: list[bytes] = []
        got = 0
        async for chunk in protocol:
            chunks.append(chunk[: most - got])
            got += len(chunks[-1])
            if got >= most:
                break
        return b"".join(chunks)

    def _call(self, protocol: RSGIProtocol, environ: dict[str, Any]) -> _Answer | None:
        """On an application thread: the application's answer, collected to
        :data:`BUFFERED_ANSWER` bytes. Whole, it is sent from here (granian takes an answer
        from any thread; the client need not wait for the event loop to wake) and closed, and
        the result is None; else the answer so far, to be streamed."""
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: Headers, exc_info: Any = None) -> Any:
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [int(status[:3]), headers]
            return written.append  # WSGI's write(), before the answer is returned

        result = self.app(environ, start_response)
        chunks = written
        size = sum(map(len, chunks))
        rest: Iterator[bytes] | None = None
        try:
            iterator = iter(result)
            for chunk in iterator:
                if chunk:
                    chunks.append(chunk)
                    size += len(chunk)
                if size > BUFFERED_ANSWER:
                    rest = iterator
                    break
            if rest is None:
                protocol.response_bytes(started[0], started[1], b"".join(chunks))
                return None
        finally:
            if rest is None:  # after the answer is sent: Django's close() ends the request
                _close(result)
        return _Answer(started[0], started[1], chunks, rest, result)

    async def _stream(
        self, loop: asyncio.AbstractEventLoop, protocol: RSGIProtocol, answer: _Answer
    ) -> None:
        assert answer.rest is not None
        try:
            transport = protocol.response_stream(answer.status, answer.headers)
            for chunk in answer.chunks:
                await transport.send_bytes(chunk)
            while (chunk := await self.threads.run(loop, next, answer.rest, _END)) is not _END:
                if chunk:
                    await transport.send_bytes(chunk)
        except Exception:  # noqa: S110  (the client went away mid-answer)
            pass
        finally:
            await self.threads.run(loop, _close, answer.result)


def _close(result: Iterable[bytes]) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()
