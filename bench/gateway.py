"""The gateway control plane's costs (issue 24): snapshot builds and 304s, the ownership
manager's tick at fleet size, and what one worker costs the web tier and Redis per minute.

    .venv/bin/python bench/gateway.py [--part snapshot,tick,control,select,forward]
                                     [--database-url postgresql://postgres@127.0.0.1:5432/pool_admin_bench]

* ``snapshot``: one worker holding 1,000 and 10,000 proxies (20 gateway clients): a full build
  (``SnapshotPublisher.current`` without a tag: read, seal, issue), its size, its parts (the
  holdings read, the sealing), and an unchanged snapshot's answer (the tag matches: one O(1)
  read). Wall and CPU time of this process, and Redis's own time per call (INFO commandstats).
* ``tick``: 100 live workers sharing 100,000 live proxies over 50 upstreams: the top-up ticks
  that assign them (2,000 per tick, the policy's bound), a tick with nothing to do, and the
  tick that renews every lease at once (the worst case: all assigned together).
* ``control``: the control API in this process through the web server's WSGI application, a
  worker holding 1,000 proxies: CPU of this process and Redis time per heartbeat, 304, full
  snapshot, ACK and report (1,000 entries), then per worker per minute at the default
  intervals, and how many workers one web core and one Redis carry.
* ``select`` (not run unless asked for): the worker's request path on one core, choose +
  activate + release with 10,000 proxies in the snapshot (``bench/gateway_select.py``); no
  Redis, no database.

* ``forward``: the gateway worker's forwarding against direct, a bare uvloop forwarder
  (bench/bare_forwarder.py), squid and pproxy through one tinyproxy to a loopback nginx
  (bench/gateway_forward.py; its own ``--forward-*`` options).
  Not in the default parts: it installs Debian packages and takes about 8 minutes.

A private redis-server for each part; ``control`` uses ``--database-url`` (made and migrated
if missing) and deletes what it made. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

import gateway_forward  # noqa: E402
from api import DEFAULT_DATABASE_URL, bench_env, machine_speed, prepare_django  # noqa: E402
from redis_pool import fill  # noqa: E402

from activity import ManualClock, PoolOptions, RedisPool  # noqa: E402
from activity.ownership_manager import GroupConfig, ManagerPolicy, OwnershipManager  # noqa: E402
from activity.snapshot_publisher import ClientSet, PublisherPolicy, SnapshotPublisher  # noqa: E402
from gateway_runtime.wire import (  # noqa: E402
    GatewayClient,
    ReportEntry,
    RuntimeReportBody,
    encode_ack,
    encode_report,
    make_verifier,
    new_salt,
    seal_snapshot,
)
from pool_admin.localservices import RedisServer  # noqa: E402

MIN = timedelta(minutes=1)
CAPACITY = 8  # redis_pool.fill's max_concurrency


def clients(n: int = 20) -> ClientSet:
    return ClientSet.of(
        [
            GatewayClient(
                f"client-{i}",
                (make_verifier(f"pp_{i:012x}_{'k' * 40}", new_salt()),),
                100,
                100,
                frozenset({"u0"}),
                frozenset({"us", "de"}),
            )
            for i in range(n)
        ]
    )


class RedisTime:
    """Redis's own microseconds in FCALLs between ``start`` and ``stop`` (commandstats)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def _usec(self) -> int:
        stats = self._client.info("commandstats")
        return sum(
            v["usec"] for k, v in stats.items() if k in ("cmdstat_fcall", "cmdstat_fcall_ro")
        )

    def longest(self, call: Callable[[], object]) -> float:
        """The longest single FCALL, in ms, while ``call`` runs (Redis's slow log): how long
        one script keeps every other client waiting."""
        self._client.config_set("slowlog-log-slower-than", 0)
        self._client.config_set("slowlog-max-len", 100_000)
        self._client.slowlog_reset()
        call()
        durations = [
            e["duration"]
            for e in self._client.slowlog_get(100_000)
            if e["command"].split(b" ")[0].lower() == b"fcall"
        ]
        self._client.config_set("slowlog-log-slower-than", 10_000)
        return max(durations, default=0) / 1e3

    def measure(self, call: Callable[[], object], calls: int) -> tuple[float, float, float]:
        """(wall ms, CPU ms of this process, Redis ms) per call, the mean of ``calls``."""
        before = self._usec()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            call()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        return wall / calls * 1e3, cpu / calls * 1e3, (self._usec() - before) / calls / 1e3


def new_pool(server: RedisServer) -> tuple[RedisPool, redis.Redis]:
    client = redis.Redis.from_url(server.url, socket_timeout=120)
    return RedisPool(client, PoolOptions(prefix=f"bench{uuid.uuid4().hex[:8]}")), client


# ---------------------------------------------------------------------------------- snapshot
def bench_snapshot() -> None:
    print("\n### Snapshot build and 304 (one worker, 20 gateway clients)\n")
    print("| proxies | full build wall / CPU / Redis ms | longest script ms | bytes "
          "| seal ms | 304 wall / CPU / Redis µs |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for size in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
            pool, client = new_pool(server)
            fill(pool, 0, size)
            now = datetime.now(UTC)
            for i in range(size):
                pool.assign(now, f"p{i}", "w1", 10 * MIN)
            pool.open_session("w1", "s1", 30 * MIN)
            publisher = SnapshotPublisher(pool, ManualClock(now), PublisherPolicy())
            gateway = clients()
            timer = RedisTime(client)
            builds = 20 if size <= 1_000 else 5
            published = publisher.current("w1", "s1", gateway, None)
            assert published.sealed is not None
            full = timer.measure(lambda: publisher.current("w1", "s1", gateway, None), builds)
            longest = timer.longest(lambda: publisher.current("w1", "s1", gateway, None))
            published = publisher.current("w1", "s1", gateway, None)
            assert published.sealed is not None
            snapshot = published.sealed.snapshot
            began = time.perf_counter()
            for _ in range(builds):
                seal_snapshot(snapshot)
            seal_ms = (time.perf_counter() - began) / builds * 1e3
            tag = published.etag
            not_modified = timer.measure(lambda: publisher.current("w1", "s1", gateway, tag), 2_000)
            assert publisher.current("w1", "s1", gateway, tag).sealed is None
            print(
                f"| {size:,} | {full[0]:.1f} / {full[1]:.1f} / {full[2]:.2f} "
                f"| {longest:.1f} | {len(published.sealed.data):,} | {seal_ms:.1f} "
                f"| {not_modified[0] * 1e3:.0f} / {not_modified[1] * 1e3:.0f} "
                f"/ {not_modified[2] * 1e3:.0f} |"
            )
            client.close()


# ---------------------------------------------------------------------------------- tick
def bench_tick() -> None:
    workers, live, per_upstream = 100, 100_000, 2_000
    print(f"\n### Manager tick: {workers} workers, {live:,} live proxies\n")
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        pool, client = new_pool(server)
        upstreams = []
        for start in range(0, live, per_upstream):
            upstreams.append(f"u{start // per_upstream}")
            fill(pool, start, per_upstream, upstream=upstreams[-1])
        names = frozenset(f"w{i:03d}" for i in range(workers))
        for name in names:
            pool.open_session(name, "s1", 60 * MIN)
        clock = ManualClock(datetime.now(UTC))
        group = GroupConfig("g1", live * CAPACITY, tuple(upstreams), names)
        manager = OwnershipManager(pool, clock, ManagerPolicy())
        timer = RedisTime(client)
        topups: list[tuple[float, float, float]] = []
        assigned = 0
        while assigned < live:
            reports = []
            figures = timer.measure(lambda: reports.append(manager.tick([group], {})), 1)
            got = reports[0].groups["g1"].assigned
            if got == 0:
                break
            assigned += got
            topups.append(figures)
        print(f"- top-up: {len(topups)} ticks assigned {assigned:,} proxies "
              f"({assigned // len(topups):,} a tick); per tick wall "
              f"{statistics.median(t[0] for t in topups):.0f} ms median, "
              f"Redis {statistics.median(t[2] for t in topups):.0f} ms median")  # fmt: skip
        idle = timer.measure(lambda: manager.tick([group], {}), 5)
        print(f"- a tick with nothing to do: wall {idle[0]:.0f} ms, CPU {idle[1]:.0f} ms, "
              f"Redis {idle[2]:.0f} ms")  # fmt: skip
        clock.advance(timedelta(seconds=65))  # every lease within the 60 s renew margin
        renew_ticks: list[tuple[float, float, float]] = []
        renewed = expired = 0
        while renewed < assigned and len(renew_ticks) < 100:
            reports = []
            renew_ticks.append(timer.measure(lambda: reports.append(manager.tick([group], {})), 1))
            renewed += reports[0].groups["g1"].renewed
            expired += reports[0].expired
            clock.advance(timedelta(seconds=2))  # the beat's period
        print(f"- every lease due at once: {renewed:,} renewals over {len(renew_ticks)} ticks "
              f"({renewed // len(renew_ticks):,} a tick, {2 * len(renew_ticks)} s of ticks "
              f"against the 60 s margin; leases lapsed: {expired}); per tick wall "
              f"{statistics.median(t[0] for t in renew_ticks):.0f} ms median, Redis "
              f"{statistics.median(t[2] for t in renew_ticks):.0f} ms median, "
              f"{sum(t[2] for t in renew_ticks) * 1e3 / max(renewed, 1):.0f} µs of Redis a "
              "renewal")  # fmt: skip
        clock.advance(timedelta(seconds=31))  # past view_max_age: every kept read is re-read
        reread = timer.measure(lambda: manager.tick([group], {}), 1)
        print("- a tick after every kept holdings read aged past 30 s (20 read again a tick): wall "
              f"{reread[0]:.0f} ms, Redis {reread[2]:.0f} ms")  # fmt: skip
        client.close()


# ---------------------------------------------------------------------------------- control
#: Calls per worker per minute at the defaults (settings: GATEWAY_*; docs/gateway.md).
PER_MINUTE = {
    "heartbeat": 60 / 10,  # GATEWAY_SESSION_TTL_S 30 // 3
    "snapshot 304": 60 / 2 - 4,  # GATEWAY_SNAPSHOT_INTERVAL_S 2, less the changed ones
    "snapshot full": 4,  # and its ACK: the aligned renewal every 30 s, about two other changes
    "report": 60 / 5,  # GATEWAY_REPORT_INTERVAL_S 5
}


def bench_control(database_url: str) -> None:
    print("\n### Control API per worker (1,000 proxies held, 20 gateway clients)\n")
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        prepare_django(bench_env(database_url, server.url, prefix))
        print(machine_speed(server.url))
        client = redis.Redis.from_url(server.url, socket_timeout=120)
        pool = RedisPool(client, PoolOptions(prefix=prefix))
        fill(pool, 0, 1_000)
        made = make_workers_and_clients()
        try:
            _measure_control(made["tokens"][0], pool, client)
        finally:
            delete_made(made)


def make_workers_and_clients(
    workers: int = 1, clients: int = 20, upstreams: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A worker group (allowed ``upstreams``; none: every enabled one) of ``workers`` workers,
    a token each, and ``clients`` gateway-enabled API clients; ``delete_made`` removes them."""
    from pool_admin.config.models import (
        ApiClient,
        ApiKey,
        GatewayWorker,
        Upstream,
        WorkerGroup,
        WorkerToken,
    )

    tag = uuid.uuid4().hex[:8]
    group = WorkerGroup.objects.create(name=f"bench-{tag}", target_capacity=1)
    if upstreams:
        group.allowed_upstreams.set(Upstream.objects.filter(name__in=upstreams))
    made: list[Any] = []
    tokens: list[str] = []
    for i in range(workers):
        made.append(GatewayWorker.objects.create(name=f"bench-{tag}-w{i:04d}", group=group))
        tokens.append(WorkerToken.objects.issue(made[-1])[1])
    names = [f"bench-{tag}-{i}" for i in range(clients)]
    for name in names:
        ApiKey.objects.issue(ApiClient.objects.create(name=name, gateway_enabled=True))
    return {"group": group, "workers": made, "tokens": tokens, "clients": names}


def delete_made(made: dict[str, Any]) -> None:
    from pool_admin.config.models import ApiClient, GatewayWorker

    ApiClient.objects.filter(name__in=made["clients"]).delete()
    GatewayWorker.objects.filter(pk__in=[w.pk for w in made["workers"]]).delete()
    made["group"].delete()


def _measure_control(token: str, pool: RedisPool, client: redis.Redis) -> None:
    from pool_admin.wsgi import application

    worker_id = _worker_of(token)
    now = datetime.now(UTC)
    for i in range(1_000):
        pool.assign(now, f"p{i}", worker_id, 60 * MIN)

    def call(method: str, path: str, body: bytes = b"", **headers: str) -> tuple[str, bytes, dict]:
        environ = {
            "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1:8000", "HTTP_AUTHORIZATION": f"Bearer {token}",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr,
            "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False,
            "wsgi.version": (1, 0), **headers,
        }  # fmt: skip
        status: list[Any] = []
        chunks = application(environ, lambda s, h, exc_info=None: status.append((s, dict(h))))
        data = b"".join(chunks)
        getattr(chunks, "close", lambda: None)()
        return status[0][0], data, status[0][1]

    sid = "bench-session"
    opened = call("POST", "/api/v1/gateway/sessions", f'{{"session_id":"{sid}"}}'.encode())
    assert opened[0].startswith("200"), opened
    session = {"HTTP_GATEWAY_SESSION": sid}
    status, data, headers = call("GET", "/api/v1/gateway/snapshot", **session)
    assert status.startswith("200"), (status, data[:300])
    etag = headers["ETag"]
    from gateway_runtime.wire import decode_snapshot

    snapshot = decode_snapshot(data)
    ack = encode_ack(snapshot.ack())
    assert call("POST", "/api/v1/gateway/snapshot/ack", ack, **session)[0].startswith("200")
    entries = tuple(
        ReportEntry(p.proxy_id, p.assignment_epoch, 1 if i % 3 == 0 else 0, 0)
        for i, p in enumerate(snapshot.proxies)
    )
    sequence = [0]

    def report() -> None:
        sequence[0] += 1
        body = encode_report(
            RuntimeReportBody(sequence[0], snapshot.version, snapshot.epoch, entries)
        )
        answer = call("POST", "/api/v1/gateway/reports", body, **session)
        assert answer[0].startswith("200"), answer

    def full_and_ack() -> None:
        status, data, _ = call("GET", "/api/v1/gateway/snapshot", **session)
        assert status.startswith("200")
        fresh = decode_snapshot(data)
        assert call("POST", "/api/v1/gateway/snapshot/ack", encode_ack(fresh.ack()), **session)[
            0
        ].startswith("200")

    def heartbeat() -> None:
        call("POST", "/api/v1/gateway/sessions", f'{{"session_id":"{sid}"}}'.encode())

    timer = RedisTime(client)
    rows = {"heartbeat": timer.measure(heartbeat, 500)}
    # 304s against the snapshot the worker has (its tag stays current while nothing changes).
    status, _, headers = call("GET", "/api/v1/gateway/snapshot", **session)
    etag = headers["ETag"]
    status, _, _ = call("GET", "/api/v1/gateway/snapshot", HTTP_IF_NONE_MATCH=etag, **session)
    assert status.startswith("304"), status
    rows["snapshot 304"] = timer.measure(
        lambda: call("GET", "/api/v1/gateway/snapshot", HTTP_IF_NONE_MATCH=etag, **session), 2_000
    )
    rows["snapshot full"] = timer.measure(full_and_ack, 50)  # each a new version, and its ACK
    # Reports from sequence 1, in a session of their own, under its ACKed snapshot.
    session["HTTP_GATEWAY_SESSION"] = f"bench-session-{uuid.uuid4().hex[:6]}"
    call("POST", "/api/v1/gateway/sessions",
         f'{{"session_id":"{session["HTTP_GATEWAY_SESSION"]}"}}'.encode())  # fmt: skip
    status, data, _ = call("GET", "/api/v1/gateway/snapshot", **session)
    snapshot = decode_snapshot(data)
    assert call("POST", "/api/v1/gateway/snapshot/ack", encode_ack(snapshot.ack()), **session)[
        0
    ].startswith("200")
    rows["report"] = timer.measure(report, 300)

    print("\n| call | wall ms | CPU ms (this process) | Redis ms | a minute |")
    print("|---|---|---|---|---|")
    cpu_minute = redis_minute = 0.0
    for name, (wall, cpu, redis_ms) in rows.items():
        count = PER_MINUTE[name]
        label = "full snapshot + its ACK" if name == "snapshot full" else name
        print(f"| {label} | {wall:.2f} | {cpu:.2f} | {redis_ms:.3f} | {count:g} |")
        cpu_minute += cpu * count
        redis_minute += redis_ms * count
    print(f"\nPer worker per minute: {sum(PER_MINUTE.values()) + PER_MINUTE['snapshot full']:g} "
          f"requests (an ACK per full snapshot), web CPU {cpu_minute:.0f} ms, "
          f"Redis {redis_minute:.1f} ms (the control API's calls only)")  # fmt: skip
    print(f"One web core carries about {60_000 / cpu_minute:,.0f} workers; one Redis (one core) "
          f"about {60_000 / redis_minute:,.0f} for these calls")  # fmt: skip


def _worker_of(token: str) -> str:
    from pool_admin.api.gateway_auth import authenticate_token

    principal = authenticate_token(token)
    assert principal is not None
    return principal.worker_id


#: The parts ``--part`` takes, comma-separated; ``forward`` is bench/gateway_forward.py.
PARTS = ("snapshot", "tick", "control", "select", "forward")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", default="snapshot,tick,control", help=f"of {','.join(PARTS)}")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    gateway_forward.add_arguments(parser)
    args = parser.parse_args()
    parts = set(args.part.split(","))
    if parts - set(PARTS):
        parser.error(f"--part: unknown {','.join(sorted(parts - set(PARTS)))}; choose from "
                     f"{','.join(PARTS)}")  # fmt: skip
    if "snapshot" in parts:
        bench_snapshot()
    if "tick" in parts:
        bench_tick()
    if "control" in parts:
        bench_control(args.database_url)
    if "forward" in parts:
        gateway_forward.bench_forward(args)
    if "select" in parts:
        from gateway_select import bench_select

        bench_select()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
