"""The consumer group's upkeep and the consumer's recoveries on real Redis and PostgreSQL
(pool_admin/metrics/group.py, applying.py, consumer.py): applied IDs pruned only when no
delivery can come again, a committed batch never applied twice, poison entries of a consumer's
own pending list set aside, idle consumers forgotten, a lost group made again, and entries
trimmed unread counted once."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from pool_admin.config.models import AppliedEntry
from pool_admin.metrics.applying import prune_applied
from pool_admin.metrics.consumer import Consumer, ConsumerOptions
from pool_admin.metrics.group import StreamGroup, lost_total, stream_id
from pool_admin.metrics.phases import PhaseEvent
from tests.harness.metrics import consumer_running, entry, wait_until
from tests.pool_admin.metrics.test_consumer import AT_MS, drain, produce, stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def options(unique_prefix) -> ConsumerOptions:
    return ConsumerOptions(stream=f"{unique_prefix}:{{metrics}}:events", group="aggregates",
                           dead_letter=f"{unique_prefix}:{{metrics}}:dead", batch=10, block_ms=50,
                           claim_idle_ms=60_000, claim_every_s=0.05,
                           max_deliveries=3)  # fmt: skip


def test_applied_ids_of_pending_entries_are_kept_though_trimmed(redis_client, options):
    """A consumer that committed and died leaves its batch pending; the stream trims it; the
    applied IDs must outlive the trimming, or the claim that hands it out again (its content
    gone, its ID still there) could not tell it was applied."""
    produce(redis_client, options, 30, seed=1)
    dying = Consumer(redis_client, "dying", options)
    dying.ensure_group()
    assert dying.step() == 0  # its own pending entries first: none

    def die(point: str) -> None:
        if point == "committed":
            raise SystemExit

    dying._fault = die
    with pytest.raises(SystemExit):
        dying.step()  # ten entries committed, not acknowledged
    redis_client.xtrim(options.stream, maxlen=5, approximate=False)
    assert _prune(redis_client, options) == 0
    assert AppliedEntry.objects.count() == 10
    redis_client.xack(options.stream, options.group,
                      *[p["message_id"] for p in redis_client.xpending_range(
                          options.stream, options.group, "-", "+", 100)])  # fmt: skip
    assert _prune(redis_client, options) == 10


def test_a_committed_batch_whose_acknowledgement_failed_is_not_applied_again(
    redis_client, options, monkeypatch
):
    """Its entries stay pending, so their applied IDs stay too, even with the stream trimmed
    past them meanwhile: read again (empty, trimmed), they are found applied, neither added
    twice nor counted lost."""
    totals = produce(redis_client, options, 5, seed=2)
    consumer = Consumer(redis_client, "c1", options)
    consumer.ensure_group()
    real_xack = redis_client.xack
    failures = iter([redis.ConnectionError("lost")])

    def flaky_xack(*args):
        error = next(failures, None)
        if error is not None:
            raise error
        return real_xack(*args)

    monkeypatch.setattr(redis_client, "xack", flaky_xack)
    assert consumer.step() == 0  # its own pending entries: none
    with pytest.raises(redis.ConnectionError):
        consumer.step()
    assert stored() == totals
    redis_client.xtrim(options.stream, maxlen=0, approximate=False)
    assert _prune(redis_client, options) == 0
    consumer._on(PhaseEvent.FAILED)  # as run() has it after a failure
    assert consumer.step() == 0
    consumer.upkeep()  # settles them: applied before they were trimmed
    assert stored() == totals
    assert lost_total(redis_client, options.stream) == 0
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


def test_an_entry_a_consumer_keeps_dying_on_is_dead_lettered_under_its_own_name(
    redis_client, options
):
    """A consumer restarted under its old name reads its own pending entries first: one that
    was delivered more than max_deliveries times goes to the dead-letter stream."""
    produce(redis_client, options, 1, seed=3)
    Consumer(redis_client, "c1", options).ensure_group()
    for _ in range(4):  # four deliveries, each ending in a crash before any commit
        redis_client.xreadgroup(options.group, "c1", {options.stream: "0" if _ else ">"})
    consumer = Consumer(redis_client, "c1", options)
    drain(consumer)
    dead = redis_client.xrange(options.dead_letter)
    assert [fields[b"reason"] for _, fields in dead] == [b"delivered 5 times"]
    assert stored() == {}
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


def test_idle_consumers_with_nothing_pending_are_forgotten(redis_client, options):
    produce(redis_client, options, 3, seed=4)
    Consumer(redis_client, "keep", options).ensure_group()
    for name in ("old-1", "old-2", "busy"):
        redis_client.xreadgroup(options.group, name, {options.stream: ">"}, count=1)
    for name in ("old-1", "old-2"):  # they finished their entries
        redis_client.xack(options.stream, options.group,
                          *[p["message_id"] for p in redis_client.xpending_range(
                              options.stream, options.group, "-", "+", 10, name)])  # fmt: skip
    time.sleep(0.05)
    gone = StreamGroup(redis_client, options.stream, options.group, "keep").forget_idle(20)
    names = {c["name"] for c in redis_client.xinfo_consumers(options.stream, options.group)}
    assert (gone, names) == (2, {b"busy"})  # "keep" never read: it was never a consumer


def test_a_group_lost_with_the_streams_redis_is_made_again(redis_client, options):
    consumer = Consumer(redis_client, "c1", options)
    with consumer_running(consumer):
        first = produce(redis_client, options, 5, seed=5)
        wait_until(lambda: stored() == first)
        redis_client.delete(options.stream)  # the Redis restarted empty
        second = produce(redis_client, options, 5, seed=6)
        wait_until(lambda: stored() == first + second, seconds=15)


def test_entries_trimmed_before_any_consumer_read_them_are_counted_once(redis_client, options):
    """Each gap between what the group read and the stream's first entry is counted once, the
    second as exactly as the first (Redis 7.0's read counter alone would be short by the
    first gap for good), and the group's lag stays true."""
    produce(redis_client, options, 10, seed=7)
    consumer = Consumer(redis_client, "c1", options)
    drain(consumer)
    assert lost_total(redis_client, options.stream) == 0
    for gap, (produced, kept) in enumerate([(10, 4), (12, 3)], start=1):
        produce(redis_client, options, produced, seed=20 + gap)
        redis_client.xtrim(options.stream, maxlen=kept, approximate=False)
        drain(consumer)
        assert consumer.applied == 10 + (4 if gap == 1 else 7)
    assert lost_total(redis_client, options.stream) == 6 + 9
    group = redis_client.xinfo_groups(options.stream)[0]
    assert (group["lag"], group["entries-read"]) == (0, 10 + 10 + 12)
    drain(consumer)
    assert lost_total(redis_client, options.stream) == 15  # told once


def test_pending_entries_trimmed_before_they_were_applied_are_counted(redis_client, options):
    produce(redis_client, options, 6, seed=10)
    consumer = Consumer(redis_client, "c1", options)
    consumer.ensure_group()
    entries = redis_client.xreadgroup(options.group, "c1", {options.stream: ">"})[0][1]
    redis_client.xtrim(options.stream, maxlen=2, approximate=False)
    assert len(entries) == 6
    drain(consumer)  # its own pending entries: four of them come back without content
    assert consumer.applied == 2
    assert lost_total(redis_client, options.stream) == 0  # not settled yet
    consumer.upkeep()
    assert lost_total(redis_client, options.stream) == 4
    consumer.upkeep()
    assert lost_total(redis_client, options.stream) == 4  # once
    assert redis_client.xinfo_groups(options.stream)[0]["pending"] == 0


def test_a_trimmed_entry_two_consumers_meet_is_counted_once(redis_client, options):
    """One consumer reads its own pending entries (the trimmed ones come back empty) while
    another's claim drops the same entries from the pending list: each is settled once."""
    produce(redis_client, options, 4, seed=11)
    a, b = Consumer(redis_client, "a", options), Consumer(redis_client, "b", options)
    a.ensure_group()
    redis_client.xreadgroup(options.group, "a", {options.stream: ">"})
    redis_client.xtrim(options.stream, maxlen=1, approximate=False)
    entries, _ = a.group.read_own(10, count_delivery=False)
    assert [fields is None for _, fields in entries] == [True, True, True, False]
    assert b.group.claim(0, "0-0", 10)[1] != []  # drops the three, claims the live one
    a.handle(entries)  # retires what is still pending to it: nothing of the three
    b.upkeep()
    a.upkeep()
    assert lost_total(redis_client, options.stream) == 3


def test_a_gap_trimmed_while_the_consumer_waits_is_counted(redis_client, options, monkeypatch):
    """Between the read that finds nothing and the wait for more, the stream may trim past
    what the group read: the wait only wakes the consumer, and the read after it counts."""
    consumer = Consumer(redis_client, "c1", options)
    drain(consumer)
    real_xread = redis_client.xread

    def pause_then_wait(*args, **kwargs):
        produce(redis_client, options, 10, seed=12)  # arrive, and are trimmed, meanwhile
        redis_client.xtrim(options.stream, maxlen=4, approximate=False)
        return real_xread(*args, **kwargs)

    monkeypatch.setattr(redis_client, "xread", pause_then_wait)
    assert len(consumer.group.read_new(10, block_ms=100)) == 4
    assert lost_total(redis_client, options.stream) == 6
    group = redis_client.xinfo_groups(options.stream)[0]
    assert (group["lag"], group["entries-read"]) == (0, 10)


def _prune(client, options) -> int:
    group = StreamGroup(client, options.stream, options.group, "upkeep")
    return prune_applied(options.stream, group.prune_bound())


def test_a_batch_that_fails_every_time_gives_up_only_its_poison(redis_client, options):
    """An entry whose batch fails every time with an error of the server's kind (here a
    stand-in for a statement timeout): once the failures have gone on for the claim time, the
    consumer goes one entry at a time and counts a delivery per claim time, so only that entry
    reaches the dead-letter limit and the others count; the consumer then goes on."""
    from django.db import OperationalError

    from pool_admin.metrics.aggregates import apply_events

    opts = ConsumerOptions(stream=options.stream, group=options.group,
                           dead_letter=options.dead_letter, batch=10, block_ms=50,
                           claim_idle_ms=200, claim_every_s=0.05,
                           max_deliveries=3)  # fmt: skip
    totals = produce(redis_client, opts, 2, seed=13)
    poison = ("outcome", AT_MS, {"upstream": "poison", "outcome": "ok"})
    redis_client.xadd(opts.stream, entry(poison))  # type: ignore[arg-type]
    totals += produce(redis_client, opts, 2, seed=14)

    def failing(events):
        if any(e.fields.get("upstream") == "poison" for e in events):
            raise OperationalError("canceling statement due to statement timeout")
        apply_events(events)

    consumer = Consumer(redis_client, "c1", opts, apply=failing)
    with consumer_running(consumer):
        wait_until(lambda: redis_client.xlen(opts.dead_letter) == 1, seconds=40)
        wait_until(lambda: stored() == totals)
        later = produce(redis_client, opts, 2, seed=15)
        wait_until(lambda: stored() == totals + later)
    dead = redis_client.xrange(opts.dead_letter)
    assert dead[0][1][b"reason"] == b"delivered 4 times"
    assert b"poison" in dead[0][1][b"e"]
    assert redis_client.xinfo_groups(opts.stream)[0]["pending"] == 0


def test_settling_waits_for_an_entry_being_applied(redis_client, options):
    """A trimmed entry another consumer is applying right now (its ID inserted, not committed)
    is not counted lost: the look-up waits for that transaction."""
    import psycopg

    from tests.harness.commands import database_url_of_test_db

    produce(redis_client, options, 1, seed=16)
    consumer = Consumer(redis_client, "c1", options)
    consumer.ensure_group()
    ((raw_id, _),) = redis_client.xreadgroup(options.group, "c1", {options.stream: ">"})[0][1]
    redis_client.xtrim(options.stream, maxlen=0, approximate=False)
    ms, seq = stream_id(raw_id)
    committed = threading.Event()

    def apply_elsewhere() -> None:
        with psycopg.connect(database_url_of_test_db()) as conn:
            conn.execute("INSERT INTO config_appliedentry (stream, ms, seq) VALUES (%s, %s, %s)",
                         [options.stream, ms, seq])  # fmt: skip
            time.sleep(0.5)
            conn.commit()
            committed.set()

    other = threading.Thread(target=apply_elsewhere)
    other.start()
    time.sleep(0.2)  # its row is in, uncommitted
    assert consumer.group.claim(0, "0-0", 10)[1] == []  # drops the trimmed entry: unsettled
    consumer.upkeep()
    other.join(10)
    assert committed.is_set()
    assert lost_total(redis_client, options.stream) == 0
