"""Usage events through the whole pipeline: producer -> Redis Stream -> consumer -> PostgreSQL.

    .venv/bin/python bench/metrics_pipeline.py [--events 200000] [--consumers 1,2]
                                               [--rate 5000 --seconds 20]

Starts a private redis-server (no persistence), uses the benchmark database (created and
migrated if missing, as bench/api.py does), and prints:

* throughput: ``--events`` outcome events queued through ``emit_event`` (the producers' own
  function, its sending thread included) while ``--consumers`` consumer processes
  (``manage.py consume_metrics``, the code ``make run`` runs) apply them; events per second
  from the first event queued until the last one is in PostgreSQL (its aggregates checked);
* lag: events produced at a steady ``--rate`` for ``--seconds``, ten a second of them
  markers whose arrival in PostgreSQL is watched (every 10 ms): p50/p99/max of the time from
  ``emit_event`` to the committed row, the producer's 0.1 s queue included.

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
MARKER_EVERY_S = 0.1
POLL_S = 0.01
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


def lag(rate: int, seconds: int, env: dict[str, str], log: Path) -> str:
    """Events at a steady ``rate``; every ``MARKER_EVERY_S`` one of them is a marker (an
    upstream label of its own), and PostgreSQL is polled every ``POLL_S`` for the markers'
    rows: each marker's lag is from its ``emit_event`` call to its row's commit being seen, so
    the producer's queue, the stream, the consumer and the commit are all in it (resolution
    ``POLL_S``, an overstatement at most)."""
    from pool_admin.config.models import UpstreamQuality
    from pool_admin.metrics.stream import emit_event

    clear()
    procs = consumers(1, env, log)
    outstanding: dict[str, float] = {}
    lags: list[float] = []

    def poll() -> None:
        if not outstanding:
            return
        found = list(UpstreamQuality.objects.filter(upstream__in=list(outstanding))
                     .values_list("upstream", flat=True))  # fmt: skip
        seen = time.monotonic()
        for label in found:
            lags.append(seen - outstanding.pop(label))

    try:
        time.sleep(1.5)
        started = time.monotonic()
        sent = markers = 0
        next_marker = next_poll = started
        while time.monotonic() - started < seconds:
            due = int((time.monotonic() - started) * rate)
            for n in range(sent, due):
                emit_event("outcome", upstream=f"u{n % 20}", outcome="ok")
            sent = max(sent, due)
            now = time.monotonic()
            if now >= next_marker:
                next_marker += MARKER_EVERY_S
                label = f"lag-{markers}"
                outstanding[label] = time.monotonic()
                emit_event("outcome", upstream=label, outcome="ok")
                markers += 1
            if now >= next_poll:
                next_poll += POLL_S
                poll()
            time.sleep(0.001)
        deadline = time.monotonic() + 120
        while outstanding and time.monotonic() < deadline:
            poll()
            time.sleep(POLL_S)
        assert not outstanding, f"{len(outstanding)} markers never arrived"
        wait_applied(sent + markers, timeout=120)
    finally:
        stop(procs)
    lags.sort()
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    return (
        f"| {rate:,}/s for {seconds} s | {sent + markers:,} | {len(lags)} | "
        f"{statistics.median(lags):.3f} | {p99:.3f} | {lags[-1]:.3f} |"
    )


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
        print("| steady rate | events | markers | lag p50 s | p99 s | max s |")
        print("|---|---|---|---|---|---|")
        print(lag(args.rate, args.seconds, env, log), flush=True)


if __name__ == "__main__":
    main()
