"""Fetch-to-available: one fetch of ``--proxies`` proxies end to end (``FetchJob.run``),
from the vendor request to every proxy AVAILABLE in the pool, on loopback.

    .venv/bin/python bench/fill.py [--proxies 1000] [--servers 4] [--concurrency 200] [--rounds 3]

Starts ``--servers`` tinyproxy processes (Debian's, Basic auth) with ``proxies / servers`` logins
each (every login an exit of its own), a vendor answering in Webshare's shape with all of them
(tests/harness/webshare_vendor.py), a check URL server (tests/harness/check_target.py) and a
private ``redis-server``; then, per round, under a fresh pool prefix, runs a claimed fetch job
(activity/fetch_job.py, an in-memory scheduler) and prints
the time from the fetch's start to the vendor's parsed answer, to the upsert done, to the first
round of checks applied (its proxies AVAILABLE) and to the last (every proxy AVAILABLE: the
worst proxy's fetch-to-available time). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from activity import PoolOptions, RedisPool  # noqa: E402
from activity.checker import CheckTarget  # noqa: E402
from activity.clock import SystemClock  # noqa: E402
from activity.credentials import FetchCredentials, NoCredentials  # noqa: E402
from activity.fetch_job import FetchJob, FetchPlan  # noqa: E402
from activity.providers.presets import PRESETS, UpstreamOptions  # noqa: E402
from activity.reconciler import UpstreamTarget  # noqa: E402
from activity.scheduler import AccountLimits, Claim, MemoryScheduler  # noqa: E402
from pool_admin.forward_proxies import Tinyproxy  # noqa: E402
from pool_admin.localservices import RedisServer  # noqa: E402
from tests.harness.check_target import check_target  # noqa: E402
from tests.harness.webshare_vendor import vendor, webshare  # noqa: E402


class Timed:
    """The pool, with the moment of each step's end recorded."""

    def __init__(self, pool: RedisPool) -> None:
        self.pool = pool
        self.marks: dict[str, float] = {}

    def inventory(self, upstream_id: str) -> int:
        return self.pool.inventory(upstream_id)

    def upsert_fetched(self, batch):
        self.marks.setdefault("parsed", time.perf_counter())
        result = self.pool.upsert_fetched(batch)
        self.marks["upserted"] = time.perf_counter()
        return result

    def apply_health(self, updates):
        result = self.pool.apply_health(updates)
        self.marks.setdefault("checked", time.perf_counter())  # the first round applied
        self.marks["applied"] = time.perf_counter()
        return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxies", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    per_server = args.proxies // args.servers
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        server = stack.enter_context(RedisServer(Path(tmp) / "redis"))
        target = stack.enter_context(check_target())
        listed = []
        for n in range(args.servers):
            logins = [(f"u{n}x{i}", f"p{n}x{i}") for i in range(per_server)]
            proxy = stack.enter_context(Tinyproxy(Path(tmp), *logins[0], more_users=logins[1:]))
            listed += [(proxy.port, user, password) for user, password in logins]
        url = stack.enter_context(vendor(webshare(*listed)))
        client = redis.Redis.from_url(server.url)
        options = UpstreamOptions(
            "http", timedelta(minutes=10), len(listed), allow_local_hosts=True
        )
        print(f"{len(listed)} proxies over {args.servers} tinyproxy processes, check concurrency "
              f"{args.concurrency}")  # fmt: skip
        print("| round | vendor answer parsed s | upserted s | first AVAILABLE s | all AVAILABLE s "
              "| available |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for round_ in range(1, args.rounds + 1):
            credentials = FetchCredentials(NoCredentials())
            pool = RedisPool(client, PoolOptions(prefix=f"b{uuid.uuid4().hex[:10]}"),
                             credentials=credentials)  # fmt: skip
            timed = Timed(pool)
            plan = FetchPlan(
                target=UpstreamTarget("bench", len(listed), timedelta(seconds=5)),
                url=url, format=PRESETS["webshare_list"].format(options),
                count_param="page_size", check=CheckTarget(target.url()), check_timeout=5,
                check_concurrency=args.concurrency,
            )  # fmt: skip
            clock, scheduler = SystemClock(), MemoryScheduler()
            limits = AccountLimits(proxies_per_minute=len(listed))
            scheduler.schedule("bench", "bench", clock.now())
            claim = scheduler.claim(clock.now(), "bench", limits, timedelta(minutes=2))
            assert isinstance(claim, Claim)
            lease = timedelta(minutes=2)
            job = FetchJob(plan, pool=timed, scheduler=scheduler, claim=claim, limits=limits,
                           lease=lease, handover=credentials, clock=clock)  # fmt: skip
            started = time.perf_counter()
            report = job.run()
            marks = {k: v - started for k, v in timed.marks.items()}
            print(f"| {round_} | {marks['parsed']:.3f} | {marks['upserted']:.3f} "
                  f"| {marks['checked']:.3f} | {marks['applied']:.3f} "
                  f"| {report.checks.states.get('available', 0)} |")  # fmt: skip
            pool.close()
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
