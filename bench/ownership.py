"""Ownership and worker-runtime benchmark: server-side cost of assign, renew, a runtime report
of 100 entries and upstream_inventory, at 10k and 100k live proxies with 100 workers.

    .venv/bin/python bench/ownership.py [--sizes 10000,100000]

Proxies are spread over upstreams of 2,000 (upstream_inventory reads one upstream's indexes
only, so its cost must not follow the pool's size); 100 workers hold 100 assignments each and
report on all of them. Redis's own accounting, as in bench/redis_pool.py. Not part of tests.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from redis_pool import fill, server_cost

from activity import (
    PoolOptions,
    RedisPool,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)
from pool_admin.localservices import RedisServer

WORKERS, PER_WORKER, PER_UPSTREAM = 100, 100, 2000
MIN = timedelta(minutes=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    print(
        "| live proxies | assign mean / p99 us | renew mean / p99 us "
        "| report (100 entries) mean / p99 us | upstream_inventory (2,000) mean / p99 us |"
    )
    print("|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
            client = redis.Redis.from_url(server.url, socket_timeout=60)
            client.config_set("slowlog-log-slower-than", 0)
            client.config_set("slowlog-max-len", 200_000)
            pool = RedisPool(client, PoolOptions(prefix=f"bench{uuid.uuid4().hex[:8]}"))
            for start in range(0, size, PER_UPSTREAM):
                fill(pool, start, PER_UPSTREAM, upstream=f"u{start // PER_UPSTREAM}")
            now = datetime.now(UTC)
            ids = [f"p{i}" for i in range(WORKERS * PER_WORKER)]
            held: dict[str, list] = {}

            def assign_all() -> None:
                for i, pid in enumerate(ids):
                    worker = f"w{i % WORKERS}"
                    held.setdefault(worker, []).append(pool.assign(now, pid, worker, 10 * MIN))

            def renew_all() -> None:
                for worker, assignments in held.items():
                    for a in assignments:
                        pool.renew(now, a.proxy_id, worker, a.epoch, 10 * MIN)

            a = server_cost(client, assign_all)
            r = server_cost(client, renew_all)
            refs = {}
            for worker, assignments in held.items():
                pool.open_session(worker, "s1", 30 * MIN)
                view = pool.worker_assignments(worker, 1000)
                ref = SnapshotRef(1, view.epoch, "c")
                pool.issue_snapshot(worker, "s1", ref, [x.proxy_id for x in assignments])
                pool.acknowledge_snapshot(worker, "s1", 1)
                refs[worker] = ref

            def report_all() -> None:
                for sequence in range(1, 6):
                    for worker, assignments in held.items():
                        entries = tuple(
                            RuntimeEntry(x.proxy_id, x.epoch, sequence % 3, 1) for x in assignments
                        )
                        ref = refs[worker]
                        pool.write_report(
                            RuntimeReport(worker, "s1", sequence, ref.version, ref.epoch, entries)
                        )

            w = server_cost(client, report_all)
            u = server_cost(client, lambda: [pool.upstream_inventory("u0") for _ in range(200)])
            print(
                f"| {size:,} | {a[0]:.1f} / {a[2]} | {r[0]:.1f} / {r[2]} | {w[0]:.1f} / {w[2]} "
                f"| {u[0]:.1f} / {u[2]} |"
            )


if __name__ == "__main__":
    main()
