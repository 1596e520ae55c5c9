"""A WSGI layer that gives every request body a deadline: 408 when it has not arrived in time.

granian's WSGI interface calls the application as soon as the request's headers are in and
hands it a ``wsgi.input`` whose ``read`` blocks, with no time limit, until the declared bytes
have arrived (its only timeout is on the header read). So four clients that declare
``Content-Length: 1000`` and then send one byte a second hold all four application threads of
``make run`` and the server stops answering anyone.

``BodyDeadline`` reads the body before the application runs, on a *reader* thread, while the
application's thread waits at most ``timeout_s``. A body that arrived in time is handed to the
application as an in-memory ``wsgi.input``; one that did not is answered 408 and the
application's thread goes back to serving others. A read in progress cannot be interrupted
(granian offers no way), so the reader that holds it is abandoned: it ends by itself when the
client finishes the body or goes away. Abandoned readers are counted and bounded
(``max_stalled``); past the bound, requests with a body are refused at once with 503 instead of
starting another thread. Why this and not granian's RSGI interface or a front server:
docs/DECISIONS.md (2026-12-01); figures: ``bench/slow_bodies.py``, docs/PERFORMANCE.md.

Bodies over ``max_body`` are not read here: the application refuses them from the declared
length alone (Django's ``RequestDataTooBig``, the API's 413) without reading, and a response
that leaves the body unread makes granian close the connection.
"""

from __future__ import annotations

import io
import json
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

#: Seconds a request body has to arrive in full once the headers are in. An extract's or a
#: login's body is a few hundred bytes: any client not stalled on purpose sends it in
#: milliseconds; a client on a very slow link still has seconds.
BODY_TIMEOUT_S = 5.0
#: Abandoned readers (each a thread blocked on a stalled body) one process keeps at most.
#: Each costs a thread's stack (tens of KiB resident) and the bytes received so far.
MAX_STALLED_READERS = 256


class _Reader:
    """A thread that performs one blocking body read at a time for whoever hands it one.

    Two locks, each held while its event has not happened, are the whole handshake: the
    caller releases ``_job_ready``, the reader releases ``_job_done``. ``_mutex`` settles the
    race between a caller giving up and the read finishing at that moment.
    """

    def __init__(self, on_abandoned_exit: Callable[[], None]) -> None:
        self._job_ready = threading.Lock()
        self._job_ready.acquire()
        self._job_done = threading.Lock()
        self._job_done.acquire()
        self._mutex = threading.Lock()
        self._job: tuple[Any, int] = (None, 0)
        self._outcome: bytes | Exception = b""
        self._abandoned = False
        self._on_abandoned_exit = on_abandoned_exit
        threading.Thread(target=self._serve, name="body-reader", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._job_ready.acquire()
            stream, size = self._job
            try:
                outcome: bytes | Exception = stream.read(size)
            except Exception as exc:  # handed to the caller, raised on its thread
                outcome = exc
            with self._mutex:
                self._job = (None, 0)  # the stream is not kept alive past its request
                if self._abandoned:
                    self._on_abandoned_exit()
                    return
                self._outcome = outcome
                self._job_done.release()

    def read(self, stream: Any, size: int, timeout_s: float) -> bytes | None:
        """``stream.read(size)``, or None when it has not returned within ``timeout_s``; then
        this reader is abandoned and must not be used again."""
        self._job = (stream, size)
        self._job_ready.release()
        if not self._job_done.acquire(timeout=timeout_s):
            with self._mutex:
                if not self._job_done.acquire(blocking=False):  # still not done: give up
                    self._abandoned = True
                    return None
        outcome, self._outcome = self._outcome, b""
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class BodyDeadline:
    """WSGI middleware: the wrapped application sees only bodies that arrived within
    ``timeout_s``, read in full into memory (at most ``max_body`` bytes)."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        max_body: int,
        concurrency: int,
        timeout_s: float = BODY_TIMEOUT_S,
        max_stalled: int = MAX_STALLED_READERS,
    ) -> None:
        if timeout_s <= 0 or max_body < 0 or max_stalled < 1 or concurrency < 1:
            raise ValueError(
                "timeout_s must be > 0, max_body >= 0, max_stalled and concurrency >= 1"
            )
        self._app = app
        # Tokens of the right to run the application: the server's threads outnumber them
        # (most of those threads only wait for bodies), and more Python threads running at
        # once would only fight over the GIL. A SimpleQueue blocks in C: the cheapest gate.
        self._turns: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(concurrency):
            self._turns.put(None)
        self._max_body = max_body
        self._timeout_s = timeout_s
        self._max_stalled = max_stalled
        self._idle: list[_Reader] = []  # list.pop/append are atomic: no lock on the way
        self._stalled = 0
        self._stalled_lock = threading.Lock()

    @property
    def stalled_readers(self) -> int:
        """Readers currently blocked on a body that missed its deadline."""
        return self._stalled

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        size = self._body_size(environ)
        if size == 0:
            return self._run(environ, start_response)
        if self._stalled >= self._max_stalled:
            return _refuse(start_response, 503, "server_busy", "Too many stalled request bodies")
        body = self._read(environ["wsgi.input"], size)
        if body is None:
            detail = f"The request body did not arrive within {self._timeout_s:g} s"
            return _refuse(start_response, 408, "request_timeout", detail)
        if len(body) > self._max_body:  # chunked, and longer than any body the app accepts
            detail = f"The request body is over {self._max_body} bytes"
            return _refuse(start_response, 413, "payload_too_large", detail)
        environ["wsgi.input"] = io.BytesIO(body)
        if "CONTENT_LENGTH" not in environ:  # chunked: the length is known now
            environ["CONTENT_LENGTH"] = str(len(body))
        return self._run(environ, start_response)

    def _run(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        self._turns.get()
        try:
            return self._app(environ, start_response)
        finally:
            self._turns.put(None)

    def _body_size(self, environ: dict[str, Any]) -> int:
        """Bytes to read ahead of the application: 0 for none (no body, a length the
        application refuses by itself, or one it cannot parse and refuses as well)."""
        declared = environ.get("CONTENT_LENGTH")
        if declared:
            try:
                length = int(declared)
            except ValueError:
                return 0
            return length if 0 < length <= self._max_body else 0
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            return self._max_body + 1  # read up to the end, or one byte past the limit
        return 0

    def _read(self, stream: Any, size: int) -> bytes | None:
        try:
            reader = self._idle.pop()
        except IndexError:
            reader = _Reader(self._abandoned_reader_exited)
        body = reader.read(stream, size, self._timeout_s)
        if body is None:
            with self._stalled_lock:
                self._stalled += 1
        else:
            self._idle.append(reader)
        return body

    def _abandoned_reader_exited(self) -> None:
        with self._stalled_lock:
            self._stalled -= 1


_STATUS_TEXT = {
    408: ("Request Timeout", "Request timeout"),
    413: ("Content Too Large", "Request body too large"),
    503: ("Service Unavailable", "Service unavailable"),
}


def _refuse(start_response: StartResponse, status: int, code: str, detail: str) -> list[bytes]:
    """A problem+json answer that closes the connection (the body, if any, is left unread)."""
    reason, title = _STATUS_TEXT[status]
    problem = {
        "type": f"urn:proxy-pool:problem:{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    content = json.dumps(problem).encode()
    headers = [
        ("Content-Type", "application/problem+json"),
        ("Content-Length", str(len(content))),
        ("Connection", "close"),
        ("Cache-Control", "no-store"),
    ]
    if status == 503:
        headers.append(("Retry-After", "5"))
    start_response(f"{status} {reason}", headers)
    return [content]


def guarded_wsgi_application() -> WSGIApp:
    """The web server's application (``launcher.web_command``, granian ``--factory``): the
    project's WSGI application behind ``BodyDeadline``, run by ``WEB_THREADS`` at a time."""
    from django.conf import global_settings, settings

    from pool_admin.launcher import WEB_THREADS
    from pool_admin.wsgi import application

    # None means "no limit" to Django; the guard keeps Django's default then.
    max_body = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return BodyDeadline(application, max_body=max_body, concurrency=WEB_THREADS)
