"""A fleet of simulated gateway workers against the real control plane (issue 26): what each
worker costs the web tier, Redis and the ownership manager, and where one of them saturates.

    .venv/bin/python bench/fleet.py [--workers 0,50,100,200,400] [--duration 60]
        [--extract-rate 50] [--upsert-rate R] [--proxies 60000] [--upstreams 20] [--hold 100]
        [--busy-share 0.3] [--warmup-max 150] [--web-workers N]
        [--database-url postgresql://postgres@127.0.0.1:5432/pool_admin_bench]

* A private ``redis-server`` (no persistence), stocked with ``--proxies`` AVAILABLE proxies over
  ``--upstreams`` upstreams configured in the database (gateway share 90%); one worker group
  allowed those upstreams, as many workers as the largest level (a token each), 20 gateway
  clients, and an API client for the extracts; all deleted at the end.
* The web server as ``make run`` runs it (bench/api.py ``start_web``: granian, one worker per
  core), and the ownership manager's tick as Celery beat runs it: ``run_ownership_tick`` (the
  task's body: groups read from PostgreSQL, the tick lease, the tick) every
  ``OWNERSHIP_TICK_PERIOD`` (2 s) in a process of its own; a tick that overruns its period is
  followed at once by the next (beat drops the runs that expired meanwhile).
* The fleet (bench/fleet_sim.py): each simulated worker is the real worker's ``ControlClient``
  with its own token, session and connections, at the intervals the session's answer gives
  (defaults: heartbeat 10 s, snapshot poll 2 s, report 5 s), started at random within 2 s;
  ``--busy-share`` of its held proxies busy (one connection each, re-drawn every 5 s) and some
  traffic counted, so reports carry entries. All in this one asyncio process.
* Beside it, a steady ``--extract-rate`` of one-proxy extracts through the web server (open
  loop) and ``--upsert-rate`` proxies a second upserted and marked AVAILABLE straight into the
  pool, as fetches do (default: the extract rate, so the stock stays level).
* Levels: for each ``--workers`` N, in order, the fleet grows to N, the group's target to
  N x ``--hold`` proxies, and the bench waits (at most ``--warmup-max`` s) until 95% of them are
  held; then a window of ``--duration`` s is measured. Level 0 is the baseline (extracts and
  upserts only); per-worker costs are above it.

Prints the machine, commit and speed, then tables. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
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
    setup_django,
    start_web,
    stop_web,
)
from console import configure  # noqa: E402
from fleet_report import TICK_PERIOD_S, Probe, Row, print_tables, probe  # noqa: E402
from fleet_sim import CallStats, SimWorker, extract_load  # noqa: E402
from gateway import delete_made, make_workers_and_clients  # noqa: E402
from redis_pool import fill  # noqa: E402

from activity import PoolOptions, RedisPool  # noqa: E402
from pool_admin.localservices import RedisServer  # noqa: E402

CAPACITY = 8  # redis_pool.fill's max_concurrency: a held proxy counts 8 toward a target
GATEWAY_SHARE_PERCENT = 90


# ------------------------------------------------------------------------- the manager's tick
def tick_loop(out: Path, max_seconds: float) -> int:
    """Run ``run_ownership_tick`` every ``TICK_PERIOD_S`` until SIGTERM or ``max_seconds``;
    each tick a JSON line in ``out``: when it began, its wall time, what it did."""
    setup_django(dict(os.environ))
    from pool_admin.gateway_tasks import run_ownership_tick

    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    end = time.monotonic() + max_seconds
    due = time.monotonic()
    with out.open("a") as log:
        while not stopping and time.monotonic() < end:
            began, t0 = time.time(), time.monotonic()
            try:
                report = run_ownership_tick()
            except Exception as exc:  # Celery would log it and run the next: so does this
                report = None
                print(f"tick failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            line: dict[str, Any] = {"at": began, "s": time.monotonic() - t0}
            if report is not None:
                tally = [t for t in report.groups.values()]
                line |= {
                    "assigned": sum(t.assigned for t in tally),
                    "renewed": sum(t.renewed for t in tally),
                    "cut_short": report.cut_short,
                }
            log.write(json.dumps(line) + "\n")
            log.flush()
            due += TICK_PERIOD_S
            if due < time.monotonic():
                due = time.monotonic()  # overran: the next at once, the missed ones dropped
            time.sleep(max(0.0, due - time.monotonic()))
    return 0


def start_ticks(env: dict[str, str], out: Path, max_seconds: float) -> subprocess.Popen[bytes]:
    argv = [sys.executable, __file__, "--tick-loop", str(out), "--tick-max-seconds",
            str(int(max_seconds))]  # fmt: skip
    with (out.parent / "ticks.stderr").open("wb") as err:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stderr=err, start_new_session=True)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------- the levels
@dataclass
class World:
    base: str
    api_key: str
    tokens: list[str]
    clients: list[str]
    group_pk: int
    pool: RedisPool
    upstreams: list[str]
    redis_client: redis.Redis
    web_pid: int
    tick_pid: int
    tick_log: Path
    next_proxy: int


def set_target(group_pk: int, proxies: int) -> None:
    from pool_admin.config.models import WorkerGroup

    WorkerGroup.objects.filter(pk=group_pk).update(target_capacity=max(1, proxies * CAPACITY))


async def upsert_load(world: World, rate: int, stop: asyncio.Event) -> None:
    """``rate`` new proxies a second, upserted and marked AVAILABLE (bench/redis_pool.py
    ``fill``), the upstreams in turn: what the fetches and checks write."""
    turn = 0
    while rate > 0 and not stop.is_set():
        began = time.monotonic()
        upstream = world.upstreams[turn % len(world.upstreams)]
        await asyncio.to_thread(fill, world.pool, world.next_proxy, rate, upstream)
        world.next_proxy += rate
        turn += 1
        timeout = max(0.0, 1.0 - (time.monotonic() - began))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=timeout)


async def run_levels(args: argparse.Namespace, levels: list[int], world: World) -> list[Row]:
    stats, stop = CallStats(), asyncio.Event()
    loads = [
        asyncio.create_task(
            extract_load(world.base, world.api_key, args.extract_rate, stats, stop)
        ),
        asyncio.create_task(upsert_load(world, args.upsert_rate, stop)),
    ]
    sims: list[SimWorker] = []
    running: list[asyncio.Task[None]] = []
    rows: list[Row] = []
    rng = random.Random(26)  # start times, not a secret
    try:
        for n in levels:
            await asyncio.to_thread(set_target, world.group_pk, n * args.hold)
            while len(sims) < n:
                sim = SimWorker(world.base, world.tokens[len(sims)], stats, world.clients,
                                args.busy_share)  # fmt: skip
                sims.append(sim)
                running.append(asyncio.create_task(sim.run(stop, rng.uniform(0, 2))))
            warm = await warm_up(sims, n * args.hold, args.warmup_max)
            load = Path("/proc/loadavg").read_text().split()[:3]
            print(f"level {n}: {sum(s.held() for s in sims):,} proxies held after {warm:.0f} s "
                  f"of warm-up; load average {' '.join(load)}; measuring {args.duration:g} s",
                  flush=True)  # fmt: skip
            before = probe(world.web_pid, world.tick_pid, world.redis_client)
            stats.reset()
            await asyncio.sleep(args.duration)
            after = probe(world.web_pid, world.tick_pid, world.redis_client)
            held = sum(s.held() for s in sims)
            rows.append(Row(n, held, stats_copy(stats), before, after, ticks(world, before, after)))
    finally:
        stop.set()
        await asyncio.wait([*running, *loads], timeout=60)
    return rows


async def warm_up(sims: list[SimWorker], wanted: int, bound: float) -> float:
    """Seconds until the fleet holds 95% of ``wanted`` proxies (at most ``bound``); at least
    one snapshot interval, so every new worker has its session."""
    began = time.monotonic()
    await asyncio.sleep(min(bound, 4.0))
    while time.monotonic() - began < bound:
        if sum(s.held() for s in sims) >= 0.95 * wanted:
            break
        await asyncio.sleep(2.0)
    return time.monotonic() - began


def stats_copy(stats: CallStats) -> CallStats:
    copy = CallStats()
    copy.counts.update(stats.counts)
    copy.errors.update(stats.errors)
    for kind, samples in stats.latencies.items():
        copy.latencies[kind] = list(samples)
    return copy


def ticks(world: World, before: Probe, after: Probe) -> list[dict[str, Any]]:
    """The ticks that began within the window."""
    lines = world.tick_log.read_text().splitlines() if world.tick_log.exists() else []
    parsed = (json.loads(line) for line in lines if line)
    return [t for t in parsed if before.epoch <= t["at"] < after.epoch]


# ------------------------------------------------------------------------- set-up and tear-down
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers",
        default="0,50,100,200,400",
        help="the fleet sizes measured, comma-separated, one level each (0: the baseline)",
    )
    parser.add_argument(
        "--duration", type=float, default=60.0, help="seconds measured per level, once filled"
    )
    parser.add_argument(
        "--extract-rate", type=float, default=50.0, help="one-proxy extracts a second beside"
    )
    parser.add_argument(
        "--upsert-rate",
        type=int,
        default=None,
        help="proxies upserted a second (default: as extracts)",
    )
    parser.add_argument("--proxies", type=int, default=60_000, help="the pool's size")
    parser.add_argument(
        "--upstreams", type=int, default=20, help="upstreams the pool is spread over"
    )
    parser.add_argument("--hold", type=int, default=100, help="proxies each worker holds")
    parser.add_argument(
        "--busy-share", type=float, default=0.3, help="share of its proxies a worker reports busy"
    )
    parser.add_argument(
        "--warmup-max", type=float, default=150.0, help="seconds a level may take to fill"
    )
    parser.add_argument(
        "--web-workers", type=int, default=os.cpu_count() or 1, help="granian worker processes"
    )
    parser.add_argument(
        "--database-url", default=DEFAULT_DATABASE_URL, help="PostgreSQL for the configuration"
    )
    parser.add_argument("--tick-loop", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tick-max-seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tick_loop:
        return tick_loop(args.tick_loop, args.tick_max_seconds)
    levels = sorted({int(n) for n in args.workers.split(",")})
    if args.upsert_rate is None:
        args.upsert_rate = round(args.extract_rate)
    if levels[0] < 0 or args.hold < 1 or levels[-1] * args.hold > args.proxies:
        parser.error("workers x --hold must fit in --proxies, every level >= 0")
    if not 0 <= args.busy_share <= 1 or args.duration <= 0 or args.extract_rate < 0:
        parser.error("--busy-share 0..1, --duration > 0, --extract-rate >= 0")
    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        return run(args, levels, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, levels: list[int], tmp: Path) -> int:
    prefix, client_name = f"bench{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    made: dict[str, Any] | None = None
    names: list[str] = []
    web = ticker = None
    with RedisServer(tmp / "redis") as server:
        env = bench_env(args.database_url, server.url, prefix)
        try:
            prepare_django(env)
            head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                  capture_output=True, text=True).stdout.strip()  # fmt: skip
            print(f"machine: {os.cpu_count()} cores, {Path('/proc/loadavg').read_text().strip()}"
                  f" (load average at start); commit {head}")  # fmt: skip
            print(machine_speed(server.url), flush=True)
            client = redis.Redis.from_url(server.url, socket_timeout=60)
            pool = RedisPool(client, PoolOptions(prefix=prefix))
            names = configure(args.upstreams)
            from pool_admin.config.models import Upstream

            Upstream.objects.filter(name__in=names).update(
                gateway_share_percent=GATEWAY_SHARE_PERCENT
            )
            per = args.proxies // len(names)
            for i, name in enumerate(names):
                fill(pool, i * per, per, upstream=name)
            made = make_workers_and_clients(levels[-1], 20, tuple(names))
            key = create_client(client_name)
            web, base, argv = start_web(env, tmp, args.web_workers)
            bound = len(levels) * (args.warmup_max + args.duration) + 120
            ticker = start_ticks(env, tmp / "ticks.jsonl", bound)
            print(f"web server: {' '.join(argv[1:])}; pool {args.proxies:,} proxies over "
                  f"{len(names)} upstreams; each worker to hold {args.hold}")  # fmt: skip
            world = World(base, key, made["tokens"], made["clients"], made["group"].pk, pool,
                          names, client, web.pid, ticker.pid, tmp / "ticks.jsonl",
                          args.proxies)  # fmt: skip
            rows = asyncio.run(run_levels(args, levels, world))
            failures = (tmp / "ticks.stderr").read_text(errors="replace").splitlines()
            if failures or ticker.poll() is not None:
                print(f"manager's process (exit {ticker.poll()}), its last error lines:")
                print("\n".join(failures[-8:]))
            print_tables(rows, args, os.cpu_count() or 1)
            return 0
        finally:
            if ticker is not None:
                stop_process(ticker)
            if web is not None:
                stop_web(web)
            cleanup(made, names, client_name)


def cleanup(made: dict[str, Any] | None, names: list[str], client_name: str) -> None:
    from pool_admin.config.models import ProviderAccount, Upstream

    if made is not None:
        delete_made(made)
    delete_client(client_name)
    accounts = set(Upstream.objects.filter(name__in=names).values_list("account", flat=True))
    Upstream.objects.filter(name__in=names).delete()
    ProviderAccount.objects.filter(pk__in=accounts).delete()


if __name__ == "__main__":
    sys.exit(main())
