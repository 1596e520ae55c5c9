"""The WSGI app bench/web_floor.py serves: it answers an extract-sized body after
``FLOOR_CALLS`` trivial EVALSHA calls through redis-py to ``FLOOR_REDIS_URL``, and does nothing
else. Not the project's code: a floor to set the extract API's figures against."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import redis

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
