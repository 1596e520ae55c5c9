"""Usage events through the whole pipeline: producer -> Redis Stream -> consumer -> PostgreSQL.

    .venv/bin/python bench/metrics_pipeline.py [--events 200000] [--consumers 1,2]
                                               [--rate 5000 --seconds 20]

Starts a private redis-server (no persistence), uses the benchmark database (created and
migrated if missing, as bench/api.py does), and prints:

* throughput: ``--events`` outcome events queued through ``emit_event`` (the producers' own
  function, its sending thread included) while ``--consumers`` consumer processes
  (``manage.py consume_metrics``, the code ``make run`` runs) apply them; events per second
  from the first event queued until the last one is in PostgreSQL (its aggregates checked);
* lag: events produced at a steady ``--rate`` for ``--seconds``; each second the consumer
  group's lag is sampled and, for the entries a consumer has not applied yet, the age of the
  oldest, so p50/p99/max of how far behind the aggregates are.

Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from api import DEFAULT_DATABASE_URL, bench_env, prepare_django  # noqa: E402

from pool_admin.localservices import RedisServer  # noqa: E402


def consumers(count: int, env: dict[str, str], log: Path) -> list[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        return [
            subprocess.Popen(
                [sys.executable, "manage.py", "consume_metrics", "--name", f"bench-{n}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=out,
            )
            for n in range(count)
        ]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(30)


def applied_total() -> int:
    from pool_admin.config.models import UpstreamQuality

    rows = UpstreamQuality.objects.all()
    return sum(r.ok + r.banned + r.timeout + r.auth_failed for r in rows)


def wait_applied(expected: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while applied_total() < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {applied_total():,} of {expected:,} applied in {timeout} s")
        time.sleep(0.05)
    return time.monotonic()


def clear() -> None:
    from pool_admin.config.models import AppliedEntry, UpstreamQuality

    UpstreamQuality.objects.all().delete()
    AppliedEntry.objects.all().delete()


def throughput(events: int, count: int, env: dict[str, str], log: Path) -> str:
    from pool_admin.metrics.stream import (
        dropped_events,
        emit_event,
        flush_events,
        queued_events,
    )

    clear()
    procs = consumers(count, env, log)
    dropped = dropped_events()
    try:
        time.sleep(1.5)  # the consumers are up and reading
        started = time.monotonic()
        emitting = 0.0
        for n in range(events):
            if n % 1_000 == 0:
                # As fast as the sending thread takes them: the producer's queue drops a burst
                # beyond MAX_QUEUED by design; this measures what the pipeline sustains.
                while queued_events() > 20_000:
                    time.sleep(0.001)
            began = time.perf_counter()
            emit_event("outcome", upstream=f"u{n % 20}", outcome="ok" if n % 3 else "timeout")
            emitting += time.perf_counter() - began
        flush_events()
        assert dropped_events() == dropped, "events were dropped"
        done = wait_applied(events, timeout=300)
    finally:
        stop(procs)
    return (
        f"| {count} | {events:,} | {emitting / events * 1e6:.2f} | "
        f"{events / (done - started):,.0f} |"
    )


def lag(rate: int, seconds: int, env: dict[str, str], log: Path, redis_url: str) -> str:
    import redis
    from django.conf import settings

    from pool_admin.metrics.stream import emit_event

    clear()
    client = redis.Redis.from_url(redis_url)
    procs = consumers(1, env, log)
    samples: list[float] = []
    try:
        time.sleep(1.5)
        started = time.monotonic()
        sent = 0
        next_sample = started + 1
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * rate)
            for n in range(sent, due):
                emit_event("outcome", upstream=f"u{n % 20}", outcome="ok")
            sent = max(sent, due)
            now = time.monotonic()
            if now >= next_sample:
                next_sample += 1
                samples.append(_oldest_unapplied_age(client, settings.METRICS_STREAM))
            time.sleep(0.001)
        wait_applied(sent, timeout=120)
    finally:
        stop(procs)
        client.close()
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return (
        f"| {rate:,}/s for {seconds} s | {sent:,} | {statistics.median(samples):.3f} | "
        f"{p99:.3f} | {samples[-1]:.3f} |"
    )


def _oldest_unapplied_age(client, stream: str) -> float:
    """Seconds since the oldest entry not yet acknowledged was added (0: none waiting)."""
    group = client.xinfo_groups(stream)[0]
    pending = client.xpending(stream, "aggregates")
    candidates = []
    if pending["pending"]:
        candidates.append(pending["min"])
    last = group["last-delivered-id"]
    after = client.xrange(stream, min=f"({last.decode()}", count=1)
    if after:
        candidates.append(after[0][0])
    if not candidates:
        return 0.0
    oldest_ms = min(int(c.decode().partition("-")[0]) for c in candidates)
    return max(0.0, time.time() - oldest_ms / 1000)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--consumers", default="1,2")
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as folder, RedisServer(Path(folder)) as server:
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        env = {**bench_env(args.database_url, server.url, prefix),
               "METRICS_REDIS_URL": server.url, "LOG_LEVEL": "WARNING"}  # fmt: skip
        prepare_django(env)
        log = Path(folder) / "consumers.log"
        print("| consumers | events | µs per emit_event (caller) | events/s end to end |")
        print("|---|---|---|---|")
        for count in (int(c) for c in args.consumers.split(",")):
            print(throughput(args.events, count, env, log), flush=True)
        print()
        print("| steady rate | events | lag p50 s | p99 s | max s |")
        print("|---|---|---|---|---|")
        print(lag(args.rate, args.seconds, env, log, server.url), flush=True)


if __name__ == "__main__":
    main()
