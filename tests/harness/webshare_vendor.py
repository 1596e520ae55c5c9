"""A vendor API answering in Webshare's proxy-list shape (results with per-proxy logins), for
the fetch tests: a real HTTP server on loopback, in a thread."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlsplit

from tests.harness.vendor_server import LoopbackHTTPServer


class VendorURL(str):
    """The vendor's URL, the request paths it was asked, in order (``asked``), when each came
    (``asked_at``, ``time.monotonic()``), and the most requests it was answering at once
    (``most_at_once``)."""

    asked: list[str]
    asked_at: list[float]
    most_at_once: int


Document = dict | bytes


@contextlib.contextmanager
def vendor(
    document: Document | Callable[[dict[str, str]], Document],
    *,
    delay: float = 0.0,
    hold: threading.Event | None = None,
) -> Iterator[VendorURL]:
    """A vendor API answering every GET with ``document`` as JSON (or, as bytes, as plain
    text; as a function, what it makes of the request's query), ``delay`` seconds after the
    request came, and not before ``hold`` is set (at most 30 s) when one is given; its URL."""
    asked: list[str] = []
    lock = threading.Lock()
    busy = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            with lock:
                asked.append(self.path)
                url.asked_at.append(time.monotonic())
                busy[0] += 1
                url.most_at_once = max(url.most_at_once, busy[0])
            try:
                if hold is not None:
                    hold.wait(30)
                time.sleep(delay)
                self._answer()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client went away (a test killed it): nobody to answer
            finally:
                with lock:
                    busy[0] -= 1

        def _answer(self) -> None:
            query = dict(parse_qsl(urlsplit(self.path).query))
            answer = document(query) if callable(document) else document
            text = isinstance(answer, bytes)
            body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = LoopbackHTTPServer(("127.0.0.1", 0), Handler)
    url = VendorURL(f"http://127.0.0.1:{server.server_address[1]}/api/v2/proxy/list/")
    url.asked, url.asked_at, url.most_at_once = asked, [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def webshare(*proxies: tuple[int, str, str]) -> dict:
    results = [
        {"id": f"d-{n}", "username": user, "password": password, "proxy_address": "127.0.0.1",
         "port": port, "valid": True, "country_code": "US"}
        for n, (port, user, password) in enumerate(proxies)
    ]  # fmt: skip
    return {"count": len(results), "next": None, "previous": None, "results": results}
