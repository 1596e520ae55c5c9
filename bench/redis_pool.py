"""RedisPool benchmark: server-side cost of extract, upsert throughput, client extract rate.

    .venv/bin/python bench/redis_pool.py [--sizes 10000,100000,1000000]

Starts a private redis-server (no persistence) so nothing else is measured, fills it to each
size, and reads Redis's own accounting: INFO commandstats for the mean, and the slow log at a
zero threshold for per-call microseconds (p99) of the pool's FCALLs. Each figure is printed
next to a trivial EVALSHA (`return 1`) measured in the same run. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from activity import (
    ExtractFilters,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    PoolOptions,
    ProxyState,
    RedisPool,
)
from pool_admin.localservices import RedisServer

REGIONS = [f"r{i}" for i in range(10)]
TTL = timedelta(hours=2)


def _proxies(start: int, n: int, now: datetime) -> list[FetchedProxy]:
    return [
        FetchedProxy(
            f"p{i}",
            f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:8080",
            f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
            8080,
            "http" if i % 2 else "socks5",
            now + TTL + timedelta(milliseconds=i),
            region=REGIONS[i % 10],
            carrier="att",
            max_concurrency=8,
        )
        for i in range(start, start + n)
    ]


def fill(pool: RedisPool, start: int, n: int, upstream: str = "u1") -> float:
    """Upsert and mark AVAILABLE `n` proxies; returns upsert proxies/s (batches of 500)."""
    now = datetime.now(UTC)
    spent = 0.0
    for offset in range(start, start + n, 500):
        batch = _proxies(offset, min(500, start + n - offset), now)
        began = time.perf_counter()
        pool.upsert_fetched(FetchedBatch(upstream, batch, 10**8, timedelta(seconds=5), now))
        spent += time.perf_counter() - began
        for h in range(0, len(batch), 1000):
            pool.apply_health(
                [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in batch[h : h + 1000]]
            )
    return n / spent


def server_cost(client: redis.Redis, run, command: str = "fcall") -> tuple[float, float, float]:
    """(mean, p50, p99) microseconds of one command as Redis itself accounts them."""
    client.config_resetstat()
    client.slowlog_reset()
    run()
    stats = client.info("commandstats")[f"cmdstat_{command}"]
    per_call = sorted(
        entry["duration"]
        for entry in client.slowlog_get(100_000)
        if entry["command"].split(b" ")[0].lower() == command.encode()
    )
    p50 = per_call[len(per_call) // 2]
    p99 = per_call[min(len(per_call) - 1, int(len(per_call) * 0.99))]
    return stats["usec_per_call"], p50, p99


#: The least any extraction of one proxy does, whatever the design: pick a member of an index,
#: read its record to re-check it, mark it taken, take it out of that index. No counters, no
#: idempotency, no other index. Measured beside the trivial script to show where 3x lies.
FLOOR_SCRIPT = """
local m = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
local v = redis.call('HGET', KEYS[2], m)
redis.call('HSET', KEYS[2], m, v .. 'x')
redis.call('ZREM', KEYS[1], m)
return m
"""


def stock_floor(client: redis.Redis, start: int, n: int) -> None:
    """`n` more members in the floor script's index and hash (the pool's sizes)."""
    for offset in range(start, start + n, 5_000):
        members = range(offset, min(start + n, offset + 5_000))
        pipe = client.pipeline(transaction=False)
        pipe.zadd("floor:{activity}:index", {f"p{i}": i for i in members})
        pipe.hset("floor:{activity}:hot", mapping={f"p{i}": "available|0|0" for i in members})
        pipe.execute()


def _client_rate(url: str, prefix: str, seconds: float, queue) -> None:
    pool = RedisPool(redis.Redis.from_url(url, socket_timeout=10), PoolOptions(prefix=prefix))
    calls, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        pool.extract(ExtractRequest("bench", 1))
        calls += 1
    queue.put(calls)


def client_rate(url: str, prefix: str, processes: int, seconds: float = 5.0) -> float:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [
        context.Process(target=_client_rate, args=(url, prefix, seconds, queue))
        for _ in range(processes)
    ]
    for w in workers:
        w.start()
    total = sum(queue.get(timeout=seconds + 60) for _ in workers)
    for w in workers:
        w.join()
    return total / seconds


def _upsert_rate(url: str, prefix: str, upstream: str, start: int, n: int, queue, go) -> None:
    pool = RedisPool(redis.Redis.from_url(url, socket_timeout=30), PoolOptions(prefix=prefix))
    now = datetime.now(UTC)
    batches = [_proxies(offset, 500, now) for offset in range(start, start + n, 500)]
    queue.put("ready")
    go.wait()  # every process starts upserting at once
    began = time.perf_counter()
    for batch in batches:
        pool.upsert_fetched(FetchedBatch(upstream, batch, 10**8, timedelta(seconds=5), now))
    queue.put((began, time.perf_counter(), n))


def upsert_rate(url: str, prefix: str, processes: int, per_process: int) -> float:
    """Proxies/s upserted (new proxies, batches of 500) by `processes` processes at once, each
    into its own upstream of one namespace (as several fetch workers do); wall clock from the
    first start to the last finish."""
    context = multiprocessing.get_context("spawn")
    queue, go = context.Queue(), context.Event()
    workers = [
        context.Process(
            target=_upsert_rate,
            args=(url, prefix, f"up{i}", 10_000_000 * (i + 1), per_process, queue, go),
        )
        for i in range(processes)
    ]
    for w in workers:
        w.start()
    for _ in workers:
        assert queue.get(timeout=600) == "ready"
    go.set()
    spans = [queue.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    return processes * per_process / (max(s[1] for s in spans) - min(s[0] for s in spans))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--upsert", type=int, default=100_000, help="new proxies per process")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        client = redis.Redis.from_url(server.url, socket_timeout=30)
        client.config_set("slowlog-log-slower-than", 0)
        client.config_set("slowlog-max-len", 200_000)
        print(
            f"machine: {platform.processor() or platform.machine()}, "
            f"{multiprocessing.cpu_count()} cores, Python {platform.python_version()}, "
            f"Redis {client.info('server')['redis_version']}"
        )
        trivial = client.register_script("return 1")
        floor = client.register_script(FLOOR_SCRIPT)
        floor_keys = ["floor:{activity}:index", "floor:{activity}:hot"]
        floor_stocked = 0
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        pool = RedisPool(client, PoolOptions(prefix=prefix))
        stocked = 0
        print(
            "| live proxies | upsert proxies/s | trivial EVALSHA mean / p99 us "
            "| 4-command floor mean / p99 us "
            "| extract(1) mean / p99 us | extract(10, 2 filters) mean / p99 us |"
        )
        print("|---|---|---|---|---|---|")
        for size in sizes:
            missing = size - pool.inventory("u1")
            rate = fill(pool, stocked, missing)
            stocked += missing
            t_mean, _, t_p99 = server_cost(
                client, lambda: [trivial() for _ in range(args.calls)], "evalsha"
            )
            stock_floor(client, floor_stocked, size + args.calls - client.zcard(floor_keys[0]))
            floor_stocked = size + args.calls
            l_mean, _, l_p99 = server_cost(
                client, lambda: [floor(keys=floor_keys) for _ in range(args.calls)], "evalsha"
            )
            e_mean, _, e_p99 = server_cost(
                client, lambda: [pool.extract(ExtractRequest("b", 1)) for _ in range(args.calls)]
            )
            fill(pool, stocked, args.calls)  # top the pool up again
            stocked += args.calls
            filters = ExtractFilters(region="r3", protocol="http")
            f_mean, _, f_p99 = server_cost(
                client,
                lambda: [
                    pool.extract(ExtractRequest("b", 10, filters=filters))
                    for _ in range(args.calls // 10)
                ],
            )
            print(
                f"| {size:,} | {rate:,.0f} | {t_mean:.1f} / {t_p99} | {l_mean:.1f} / {l_p99} "
                f"| {e_mean:.1f} / {e_p99} "
                f"| {f_mean:.1f} / {f_p99} |"
            )
        client.config_set("slowlog-log-slower-than", 10_000)
        for processes in (1, 4):
            rate = client_rate(server.url, prefix, processes)
            print(f"python extract calls/s from {processes} process(es): {rate:,.0f}")
        for processes in (1, 2):
            rate = upsert_rate(server.url, f"up{uuid.uuid4().hex[:8]}", processes, args.upsert)
            print(f"upsert proxies/s, batches of 500, {processes} process(es) at once: {rate:,.0f}")


if __name__ == "__main__":
    main()
