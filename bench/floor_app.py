"""The WSGI app bench/web_floor.py serves: it answers an extract-sized body after
``FLOOR_CALLS`` trivial EVALSHA calls through redis-py to ``FLOOR_REDIS_URL``, and does nothing
else. Not the project's code: a floor to set the extract API's figures against. Served through
the RSGI bridge as the project's application is (``rsgi_application``), or as plain WSGI."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import redis

from activity.log_batches import LogBatches
from pool_admin.rsgi_bridge import WSGIBridge

BODY = b'{"proxies":[{"id":"x"}],"requested":1,"returned":1,"replayed":false}'
CALLS = int(os.environ.get("FLOOR_CALLS", "0"))
_client = redis.Redis.from_url(os.environ.get("FLOOR_REDIS_URL", "redis://127.0.0.1:6379/0"))
_sha = _client.script_load("return 1") if CALLS else ""


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    for _ in range(CALLS):
        _client.evalsha(_sha, 0)
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    start_response("200 OK", headers)
    return [BODY]


def _refuse(path: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return 408, [("Content-Length", "0"), ("Connection", "close")], b""


# The access log as settings.LOGGING writes it: each batch of lines to standard output.
_access = logging.getLogger("pool_admin.access")
_access.setLevel(logging.INFO)
_access.propagate = False
_handler = logging.StreamHandler(sys.stdout)
_handler.setFormatter(logging.Formatter("%(message)s"))
_access.addHandler(_handler)
_access_lines = LogBatches(_access, name="access log", max_queued=10_000, interval_s=0.2)

#: The same application as the web server serves the project's (pool_admin/rsgi.py), access log
#: included (the ``wsgi`` and ``haproxy`` floors have granian's: bench/web_floor.py).
rsgi_application = WSGIBridge(
    application,
    body_timeout=5,
    body_limit=2_621_440,
    threads=int(os.environ.get("FLOOR_THREADS", "2")),
    refuse_slow_body=_refuse,
    access_log=_access_lines.add,
)


class _OnTheLoop:
    """In place of the bridge's threads: the call made on the event loop itself, so a floor
    without the thread hand-off (``rsgi-inline`` in bench/web_floor.py). Never for the project:
    an application call would stop the loop, and every other request of the worker with it."""

    def run(self, loop: Any, call: Callable[..., Any], *args: Any) -> Any:
        future = loop.create_future()
        future.set_result(call(*args))
        return future


#: The bridge with the application run on the event loop: what the thread hand-off costs.
rsgi_inline_application = WSGIBridge(
    application,
    body_timeout=5,
    body_limit=2_621_440,
    threads=1,
    refuse_slow_body=_refuse,
    access_log=_access_lines.add,
)
rsgi_inline_application.threads = _OnTheLoop()  # type: ignore[assignment]
