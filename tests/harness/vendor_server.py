"""A local HTTP server that answers as a misbehaving vendor would, for fetch tests: a real
socket, a real HTTP exchange, each fault on its own path.

* ``/ok``: a small JSON answer; ``/echo``: the request's query and headers as JSON;
* ``/status/N``: HTTP status N (``?retry_after=V``: with ``Retry-After: V``);
* ``/trickle``: ``Content-Length: 1000``, then a byte every 0.1 s;
* ``/drip``: ``Content-Length: 1000``, then a byte every 0.45 s (inside a 0.5 s read timeout);
* ``/endless``: a chunked answer of 64 KiB chunks until the client goes;
* ``/declared-huge``: ``Content-Length`` of 200 MB, then a few bytes and a pause;
* ``/gzip``: a gzip-compressed answer, whatever the client asked;
* ``/silent``: the request read, then no answer for 5 s;
* ``/hang``: the request read, then no answer at all (until the server stops, 10 minutes at most).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

OK_BODY = b'{"code": 0, "data": {"proxy_list": ["10.0.0.1:8080,60"]}}'


class _Vendor(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urlsplit(self.path)
        with contextlib.suppress(OSError):
            if path.path == "/ok":
                self._send(200, OK_BODY, Content_Type="application/json")
            elif path.path == "/echo":
                shown = {"query": dict(parse_qsl(path.query)), "headers": dict(self.headers)}
                self._send(200, json.dumps(shown).encode())
            elif path.path.startswith("/status/"):
                query = dict(parse_qsl(path.query))
                wait = {"Retry_After": query["retry_after"]} if "retry_after" in query else {}
                self._send(int(path.path.rsplit("/", 1)[1]), b"{}", **wait)
            elif path.path == "/gzip":
                self._send(200, gzip.compress(OK_BODY), Content_Encoding="gzip")
            elif path.path == "/trickle":
                self._drip(bytes_=1000, every=0.1)
            elif path.path == "/drip":
                self._drip(bytes_=20, every=0.45)
            elif path.path == "/endless":
                self._stream_head(Transfer_Encoding="chunked")
                chunk = b"y" * 65536
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            elif path.path == "/declared-huge":
                self._stream_head(Content_Length=str(200 * 1024 * 1024))
                self.wfile.write(b"z" * 10)
                self.wfile.flush()
                time.sleep(5)
            elif path.path == "/silent":
                time.sleep(5)
            elif path.path == "/hang":
                self.server.stopping.wait(600)  # type: ignore[attr-defined]
            else:
                self._send(404, b"{}")

    def _drip(self, bytes_: int, every: float) -> None:
        """A ``Content-Length: 1000`` answer, ``bytes_`` of it sent, one byte each ``every`` s."""
        self._stream_head(Content_Length="1000")
        for _ in range(bytes_):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(every)

    def _stream_head(self, **headers: str) -> None:
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.flush()


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A test's HTTP server: a client hanging up mid-request (as the tests' own short
    timeouts make clients do) is the scenario, not an error worth a traceback in the run's
    output; anything else still prints one."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextlib.contextmanager
def vendor_server() -> Iterator[str]:
    """The base URL of a vendor server on a free loopback port, for the block's duration."""
    server = LoopbackHTTPServer(("127.0.0.1", 0), _Vendor)
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
