"""The usage stream's consumer on real Redis and PostgreSQL (pool_admin/metrics/consumer.py):
events become per-minute aggregates exactly once, with consumers killed at any point between
read and commit and between commit and acknowledgement, two of them in the group; malformed
entries go to the dead-letter stream and stop nothing."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import replace

import orjson
import pytest
import redis

from pool_admin.config.models import AppliedEntry, UpstreamQuality, UsageTotal
from pool_admin.metrics.consumer import Consumer, ConsumerOptions
from pool_admin.metrics.events import encode_event, entry_of
from pool_admin.metrics.group import stream_id
from pool_admin.metrics.phases import Phase
from tests.harness.commands import REPO, database_url_of_test_db
from tests.harness.metrics import consumer_running, entry, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the consumers' processes see what is committed
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
]

OUTCOMES = ("ok", "banned", "timeout", "auth_failed")
AT_MS = 29_666_666 * 60_000  # a minute's start: every event counts in that minute's rows


@pytest.fixture
def options(unique_prefix) -> ConsumerOptions:
    return ConsumerOptions(stream=f"{unique_prefix}:{{metrics}}:events", group="aggregates",
                           dead_letter=f"{unique_prefix}:{{metrics}}:dead", batch=50, block_ms=100,
                           claim_idle_ms=300, claim_every_s=0.2, max_deliveries=50)  # fmt: skip


def produce(client: redis.Redis, options: ConsumerOptions, n: int, seed: int) -> Counter:
    """``n`` entries of 1 to 20 outcome events each, over three upstreams (as producer
    processes send them); what they add up to."""
    rng = random.Random(seed)
    totals: Counter[tuple[str, str]] = Counter()
    pipe = client.pipeline(transaction=False)
    for _ in range(n):
        events = []
        for _ in range(rng.randint(1, 20)):
            upstream, outcome = f"u{rng.randrange(3)}", rng.choice(OUTCOMES)
            totals[(upstream, outcome)] += 1
            fields = {"upstream": upstream, "outcome": outcome}
            events.append(("outcome", AT_MS + rng.randrange(60_000), fields))
        pipe.xadd(options.stream, entry(*events))  # type: ignore[arg-type]
    pipe.execute()
    return totals


def stored() -> Counter:
    totals: Counter[tuple[str, str]] = Counter()
    for row in UpstreamQuality.objects.all():
        for outcome in OUTCOMES:
            if getattr(row, outcome):
                totals[(row.upstream, outcome)] += getattr(row, outcome)
    return totals


def drain(consumer: Consumer) -> None:
    consumer.ensure_group()
    while consumer.step() or consumer.state.phase is not Phase.READING:
        pass
    while consumer.step():
        pass


def test_events_become_per_minute_rows_once(redis_client, options):
    totals = produce(redis_client, options, 500, seed=1)
    consumer = Consumer(redis_client, "c1", options)
    drain(consumer)
    assert stored() == totals
    assert UpstreamQuality.objects.count() == 3  # one row per upstream and minute
    assert AppliedEntry.objects.count() == 500  # one per entry, each of many events
    # The same entries delivered again (a consumer that died after its commit) add nothing.
    entries = redis_client.xrange(options.stream)
    assert consumer.handle(entries) == 0
    assert stored() == totals
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


def test_a_malformed_entry_is_dead_lettered_with_its_reason_and_stops_nothing(
    redis_client, options
):
    totals = produce(redis_client, options, 20, seed=2)
    redis_client.xadd(options.stream, {"e": b"[not json"})
    # One event of an entry is bad: it alone is dead-lettered, the entry's others count.
    good = encode_event("outcome", AT_MS, {"upstream": "u1", "outcome": "ok"})
    bad = orjson.dumps(["outcome", AT_MS, {"upstream": "u1", "outcome": "great"}])
    redis_client.xadd(options.stream, entry_of([good, good, bad]))  # type: ignore[arg-type]
    totals[("u1", "ok")] += 2
    redis_client.xadd(options.stream, {"hello": "world"})
    redis_client.xadd(options.stream, {"e": b'{"not": "a list"}'})
    redis_client.xadd(options.stream, {"e": b'[["outcome", 1], "x"]'})
    totals += produce(redis_client, options, 20, seed=3)
    drain(Consumer(redis_client, "c1", options))
    assert stored() == totals
    # By entry in the stream's order, and event (refusals are told in the transaction that
    # applies their entry's other events; unreadable entries after it).
    dead = sorted((fields for _, fields in redis_client.xrange(options.dead_letter)),
                  key=lambda f: (stream_id(f[b"id"]), int(f.get(b"index", -1))))  # fmt: skip
    assert [(fields[b"reason"], fields.get(b"index")) for fields in dead] == [
        (b"unreadable", None),
        (b"outcome: bad outcome", b"2"),
        (b"not an event entry", None),
        (b"not a list of events", None),
        (b"not an event", b"0"),
        (b"not an event", b"1"),
    ]
    assert b'"great"' in dead[1][b"event"]  # what the event was, for whoever looks
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


def test_an_event_postgresql_refuses_is_dead_lettered_alone_and_stops_nothing(
    redis_client, options
):
    """An event that checks but that PostgreSQL refuses every time (here a total past
    ``bigint``) would hold its batch forever: it alone is dead-lettered, its entry's other
    events and the batch's other entries count, and what it would have added is nowhere."""
    UsageTotal.objects.create(family="fetched", labels="u-full", value=2**63 - 10)
    totals = produce(redis_client, options, 10, seed=4)
    good = ("outcome", AT_MS, {"upstream": "u1", "outcome": "ok"})
    overflow = ("fetch", AT_MS, {"upstream": "u-full", "received": 100, "inserted": 100,
                                  "refreshed": 0, "available": 0})  # fmt: skip
    redis_client.xadd(options.stream, entry(good, overflow, good))  # type: ignore[arg-type]
    totals[("u1", "ok")] += 2
    totals += produce(redis_client, options, 10, seed=5)
    consumer = Consumer(redis_client, "c1", options)
    drain(consumer)
    assert stored() == totals
    dead = redis_client.xrange(options.dead_letter)
    assert [(f[b"reason"], f[b"index"]) for _, f in dead] == [(b"apply failed: DataError", b"1")]
    assert orjson.loads(dead[0][1][b"event"])[2]["upstream"] == "u-full"
    assert UsageTotal.objects.get(family="fetched", labels="u-full").value == 2**63 - 10
    assert not UpstreamQuality.objects.filter(upstream="u-full").exists()
    assert AppliedEntry.objects.count() == 21
    assert (consumer.applied, consumer.dead) == (21, 1)
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


# A consumer process that dies (os._exit) at a random point, as a kill -9 would: after reading
# a batch (before its commit) or after its commit (before the acknowledgement).
_DYING = textwrap.dedent(
    """
    import os, random, sys, threading
    import django
    django.setup()
    import redis
    from pool_admin.metrics.consumer import Consumer, ConsumerOptions
    stream, dead, name, url, seed = sys.argv[1:6]
    rng = random.Random(int(seed))
    def fault(point):
        if rng.random() < 0.08:
            os._exit(17)
    options = ConsumerOptions(stream=stream, group="aggregates", dead_letter=dead, batch=50,
                              block_ms=100, claim_idle_ms=300, claim_every_s=0.2,
                              max_deliveries=50)
    Consumer(redis.Redis.from_url(url), name, options, fault=fault).run(threading.Event())
    """
)


def test_consumers_killed_anywhere_lose_nothing_and_count_nothing_twice(
    redis_client, redis_url, options, tmp_path
):
    totals = produce(redis_client, options, 3_000, seed=4)
    env = {"DATABASE_URL": database_url_of_test_db(), "POOL_DEV": "1",
           "DJANGO_SETTINGS_MODULE": "pool_admin.settings", "PATH": "/usr/bin:/bin"}  # fmt: skip
    seeds = iter(range(10_000))
    deaths = 0

    log = tmp_path / "consumers.log"

    def start(name: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:  # the child has its own copy of the descriptor
            return subprocess.Popen(
                [sys.executable, "-c", _DYING, options.stream, options.dead_letter, name,
                 redis_url, str(next(seeds))],
                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=out,
            )  # fmt: skip

    # Two consumers; a dead one comes back under its name (its pending entries first) or, every
    # other time, under a new one (the old name's entries are then claimed by XAUTOCLAIM).
    names = ["a", "b"]
    running = {name: start(name) for name in names}
    deadline = time.monotonic() + 120
    try:
        while True:
            for name, proc in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                assert code == 17, log.read_text()[-2000:]
                deaths += 1
                del running[name]
                again = name if deaths % 2 else f"{name[0]}{deaths}"
                running[again] = start(again)
            groups = redis_client.xinfo_groups(options.stream)
            if groups and groups[0]["pending"] == 0 and groups[0]["lag"] == 0:
                break
            assert time.monotonic() < deadline, groups
            time.sleep(0.05)
    finally:
        for proc in running.values():
            proc.kill()
            proc.wait()
    assert deaths >= 5  # the faults happened, at both points, many times over
    assert stored() == totals
    assert AppliedEntry.objects.count() == 3_000
    assert redis_client.xlen(options.dead_letter) == 0


def test_a_batch_that_failed_is_read_again_and_applied_once(redis_client, options):
    """A failure while handling a batch leaves it pending and nothing of it in memory: once
    both stores answer, the consumer reads its own pending entries again and applies them
    once. Reading them again counts no delivery (the probe may pass while writes fail, a
    read-only primary say: good entries must not reach the dead-letter limit meanwhile); a
    restart does (test_upkeep.py)."""
    from django.db import OperationalError

    from pool_admin.metrics.aggregates import apply_events

    totals = produce(redis_client, options, 5, seed=9)
    failures = iter(range(2))
    deliveries: list[int] = []

    def flaky(events):
        if next(failures, None) is not None:
            raise OperationalError("the server closed the connection")
        pending = redis_client.xpending_range(options.stream, options.group, "-", "+", 10)
        deliveries.extend(int(p["times_delivered"]) for p in pending)
        apply_events(events)

    # Failures shorter than the claim time (after it: test_upkeep.py's poison batch).
    consumer = Consumer(redis_client, "c1", replace(options, claim_idle_ms=60_000),
                        apply=flaky)  # fmt: skip
    with consumer_running(consumer):
        wait_until(lambda: consumer.applied == 5, seconds=20)
    assert deliveries == [1] * 5  # read once; read again after each failure, not delivered
    assert (consumer.applied, consumer.duplicates) == (5, 0)
    assert stored() == totals
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0
