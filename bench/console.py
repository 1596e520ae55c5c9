"""The live console's overview with a full pool: how long one render takes, the way an operator's
browser asks for it (a logged-in staff request through Django's handler, the whole page and its
live part).

    .venv/bin/python bench/console.py [--proxies 100000] [--upstreams 10] [--requests 200]
                                      [--database-url postgresql://postgres@127.0.0.1:5432/pool_admin_bench]

Starts a private redis-server (no persistence) and stocks it with ``--proxies`` AVAILABLE
proxies over ``--upstreams`` upstreams (configured in the benchmark database, one account),
a running fetch for each, and an hour of usage aggregates; then times ``--requests`` GETs of
``/admin/console/`` and of ``/admin/console/?part=live`` (after 5 warm-up requests) and prints
p50/p99/max in ms. The issue's target: under 200 ms with 100,000 proxies. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from api import DEFAULT_DATABASE_URL, bench_env, prepare_django  # noqa: E402
from redis_pool import fill  # noqa: E402

from pool_admin.localservices import RedisServer  # noqa: E402


def configure(upstreams: int) -> list[str]:
    from pool_admin.config.models import ProviderAccount, Upstream

    account = ProviderAccount.objects.create(name=f"bench-{uuid.uuid4().hex[:6]}",
                                             api_calls_per_minute=600)  # fmt: skip
    names = [f"{account.name}-u{i}" for i in range(upstreams)]
    for name in names:
        Upstream.objects.create(
            name=name,
            account=account,
            kind="preset",
            preset="webshare_list",
            endpoint_url="http://vendor.invalid/",
        )
    return names


def aggregates(names: list[str]) -> None:
    from pool_admin.metrics.aggregates import apply_events
    from pool_admin.metrics.events import Event

    now = datetime.now(UTC)
    events = []
    for minute in range(60):
        ms = int((now - timedelta(minutes=minute)).timestamp() * 1000)
        for name in names:
            events += [
                Event("fetch", ms, {"upstream": name, "received": 100, "inserted": 90,
                                    "refreshed": 5, "available": 80, "dropped": {"bad_port": 2}}),
                Event("check", ms, {"upstream": name, "source": "intake",
                                    "states": {"available": 80, "unhealthy": 10},
                                    "latency_ms": 9_000, "timed": 90}),
                Event("expired", ms, {"upstream": name, "used": 70, "unused": 20}),
            ]  # fmt: skip
    apply_events(events)


def timed(client, url: str, requests: int) -> str:
    for _ in range(5):
        assert client.get(url).status_code == 200
    spent = []
    for _ in range(requests):
        began = time.perf_counter()
        response = client.get(url)
        spent.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    spent.sort()
    p99 = spent[min(len(spent) - 1, int(len(spent) * 0.99))]
    p50 = statistics.median(spent)
    return f"| `{url}` | {requests} | {p50:.1f} | {p99:.1f} | {spent[-1]:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxies", type=int, default=100_000)
    parser.add_argument("--upstreams", type=int, default=10)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder, RedisServer(Path(folder)) as server:
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        env = {**bench_env(args.database_url, server.url, prefix), "LOG_LEVEL": "WARNING",
               "ALLOWED_HOSTS": "testserver"}  # fmt: skip
        prepare_django(env)
        from django.contrib.auth import get_user_model
        from django.test import Client

        from activity.scheduler.types import AccountLimits
        from pool_admin.bootstrap import get_pool, get_scheduler

        names = configure(args.upstreams)
        pool, per = get_pool(), args.proxies // args.upstreams
        for i, name in enumerate(names):
            fill(pool, i * per, per, upstream=name)
        sched, now = get_scheduler(), datetime.now(UTC)
        for name in names:
            sched.schedule(names[0].rsplit("-u", 1)[0], name, now)
        for _ in names:
            sched.claim(now, names[0].rsplit("-u", 1)[0], AccountLimits(concurrency=64),
                        timedelta(minutes=5))  # fmt: skip
        aggregates(names)
        user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:6]}",
                                                    is_staff=True)  # fmt: skip
        client = Client()
        client.force_login(user)
        print(f"pool: {sum(pool.inventory(n) for n in names):,} proxies over {len(names)} "
              "upstreams")  # fmt: skip
        print("| request | n | p50 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|")
        print(timed(client, "/admin/console/", args.requests), flush=True)
        print(timed(client, "/admin/console/?part=live", args.requests), flush=True)
        user.delete()


if __name__ == "__main__":
    main()
