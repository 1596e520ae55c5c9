"""CPU per extract request inside the web process, layer by layer (no web server, no wrk).

    .venv/bin/python bench/api_inprocess.py [--requests 3000]
                                           [--database-url postgresql://postgres@127.0.0.1:5432/pool_admin_bench]

What ``bench/api.py`` cannot tell apart: it calls, in this process, in a loop, each of

* ``pool_admin.wsgi.application`` (the web server's WSGI application: fast_extract.py first) and
  ``django_application`` (Django's handler alone) with the request the benchmark's clients send
  (``POST /api/v1/extract {"count": 1, "mode": "partial"}``, a cached key), also from 2 threads
  at once as granian's two threads per worker run it;
* ``perform_extract`` (validation, the pool with the client's limits, the usage event),
  ``RedisPool.extract`` (with the client's ``CallQuota``, as perform_extract calls it) and
  ``RedisPool.charge_call`` alone (a round trip that only takes a call unit); and fast_extract.py's
  own part (the extract replaced by a constant answer);

and prints the CPU time of this process per call (all its threads: the usage writer's too; its
usage lines go to stderr, ``2>/dev/null`` hides them).
The Redis server's own CPU is not in it. A private ``redis-server`` stocked with ``--requests``
times 6 proxies; the API client and key are made in ``--database-url`` as bench/api.py makes
them, and deleted at the end. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from api import (  # noqa: E402
    DEFAULT_DATABASE_URL,
    bench_env,
    create_client,
    delete_client,
    machine_speed,
    prepare_django,
)
from redis_pool import fill  # noqa: E402

from activity import ExtractFilters, ExtractMode, ExtractRequest, PoolOptions, RedisPool  # noqa: E402
from pool_admin.localservices import RedisServer  # noqa: E402

BODY = json.dumps({"count": 1, "mode": "partial"}).encode()


def cpu_per_call(calls: int, call: Callable[[], object], threads: int = 1) -> float:
    """CPU seconds of this process per call, ``calls`` in all split over ``threads``."""

    def run(n: int) -> None:
        for _ in range(n):
            call()

    workers = [threading.Thread(target=run, args=(calls // threads,)) for _ in range(threads)]
    began = time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (time.process_time() - began) / (calls // threads * threads)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()
    n = args.requests
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    client_name = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        prepare_django(bench_env(args.database_url, server.url, prefix))
        print(machine_speed(server.url))
        fill(RedisPool(redis.Redis.from_url(server.url), PoolOptions(prefix=prefix)), 0, 6 * n)
        key = create_client(client_name)
        try:
            measure(n, key)
        finally:
            delete_client(client_name)
    return 0


def measure(n: int, key: str) -> None:
    from pool_admin.api import fast_extract
    from pool_admin.api.auth import cached_principal
    from pool_admin.api.extracting import perform_extract
    from pool_admin.api.ratelimit import quota_of
    from pool_admin.bootstrap import get_pool
    from pool_admin.wsgi import application, django_application

    def environ() -> dict[str, Any]:
        return {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/v1/extract",
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1:8000",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(BODY)),
            "HTTP_AUTHORIZATION": f"Bearer {key}",
            "wsgi.input": io.BytesIO(BODY),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }

    def via(app: Callable[..., Any]) -> Callable[[], None]:
        def call() -> None:
            status: list[str] = []
            chunks = app(environ(), lambda s, h, exc_info=None: status.append(s))
            b"".join(chunks)
            getattr(chunks, "close", lambda: None)()
            if not status[0].startswith("200"):
                raise RuntimeError(f"extract answered {status[0]}")

        return call

    via(application)()  # verifies and caches the key (Django's path), loads the functions
    principal = cached_principal(key)
    assert principal is not None
    pool = get_pool()
    quota = quota_of(principal)

    def pool_extract() -> None:
        pool.extract(
            ExtractRequest(
                client_id=principal.client_id,
                count=1,
                mode=ExtractMode.PARTIAL,
                filters=ExtractFilters(),
                idempotency_ttl=principal.idempotency_ttl,
                request_id=uuid.uuid4().hex,
                quota=quota,
            )
        )

    rows = [
        ("building the request's environ (in every row below)", environ, 1),
        ("wsgi.application (fast_extract.py first)", via(application), 1),
        ("wsgi.application, 2 threads", via(application), 2),
        ("Django's handler alone", via(django_application), 1),
        ("perform_extract", lambda: perform_extract(principal, {"count": 1, "mode": "partial"}), 1),
        ("RedisPool.extract", pool_extract, 1),
        ("RedisPool.charge_call", lambda: pool.charge_call(principal.client_id, quota), 1),
    ]
    print(f"{n:,} calls each; CPU µs per call of this process (all threads)")
    for label, call, threads in rows:
        call()  # warm
        print(f"{cpu_per_call(n, call, threads) * 1e6:8.0f}  {label}")
    # fast_extract.py's own part: the same request with the extract replaced by a constant answer.
    constant = {"proxies": [], "requested": 1, "returned": 0, "replayed": False}
    run_extract, fast_extract.run_extract = fast_extract.run_extract, lambda *args: constant
    try:
        call = via(application)
        call()
        print(f"{cpu_per_call(n, call) * 1e6:8.0f}  fast_extract.py alone (the extract a constant)")
    finally:
        fast_extract.run_extract = run_extract


if __name__ == "__main__":
    raise SystemExit(main())
