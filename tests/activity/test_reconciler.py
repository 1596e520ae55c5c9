"""The reconciler against both pools (the contract's harness): the deficit within budget, the
longest-lived of a response kept, chunks under one operation ID, a retried fetch changing
nothing twice, passwords through the credentials store."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest

from activity.errors import IdempotencyConflict, StoreUnavailable
from activity.labels import BadLabel, LabelMap
from activity.providers.entries import DropReason, ParsedResponse, ProxyEntry
from activity.reconciler import Reconciler, ReconcileResult, UpstreamTarget, proxy_id_of
from activity.types import ProxyState
from tests.harness.faulty_pool import StoreFailsAfter

TARGET = UpstreamTarget("u1", max_size=10, safety_margin=timedelta(seconds=5))


def entries(harness, count: int, *, start: int = 0, minutes: int = 10, login: bool = False):
    return [
        ProxyEntry(
            host=f"203.0.113.{n % 250 + 1}",
            port=10_000 + n,
            protocol="http",
            expires_at=harness.now + timedelta(minutes=minutes, seconds=n),
            username=f"user{n}" if login else None,
            password=f"pw{n}" if login else None,
            region="us",
        )
        for n in range(start, start + count)
    ]


@pytest.fixture
def harness(make_pool):
    return make_pool()


def reconciler(harness, chunk: int = 500) -> Reconciler:
    return Reconciler(harness.pool, harness.credentials, chunk=chunk)


def take_in(
    harness,
    listed: list[ProxyEntry],
    *,
    keep: int = 100,
    target=TARGET,
    operation_id: str = "op1",
    rec: Reconciler | None = None,
) -> ReconcileResult:
    """An answer listing ``listed``, its ``keep`` longest-lived prepared and written: what the
    fetch job does with a vendor's answer (activity/fetch_job.py)."""
    rec = rec or reconciler(harness)
    parsed = ParsedResponse(list(listed), Counter({DropReason.BAD_PORT: 2}))
    intake = rec.prepare(harness.now, target, parsed, keep=keep, operation_id=operation_id)
    return rec.write(intake)


def test_an_answer_is_written_and_counted_with_the_parsers_drops(harness):
    harness.upsert([harness.proxy(f"p{n}") for n in range(3)], max_size=10)
    result = take_in(harness, entries(harness, 7), keep=7)
    assert (result.received, result.inserted, result.over_capacity) == (7, 7, 0)
    assert result.dropped == Counter({DropReason.BAD_PORT: 2})
    assert harness.pool.upstream_inventory("u1").managed == 10
    over = take_in(harness, entries(harness, 2, start=50), operation_id="op2")
    assert (over.inserted, over.over_capacity) == (0, 2)  # max_size is the pool's last word


def test_of_a_response_over_the_ask_the_longest_lived_are_kept(harness):
    short = entries(harness, 5, minutes=2)
    long = entries(harness, 5, start=100, minutes=30)
    result = take_in(harness, short + long, keep=5)
    assert (result.received, result.beyond_ask, result.inserted) == (10, 5, 5)
    kept = harness.pool.upstream_inventory("u1").managed
    assert kept == 5


def test_a_response_written_again_changes_nothing_twice(harness):
    rec = reconciler(harness, chunk=3)
    intake = rec.prepare(harness.now, TARGET, ParsedResponse(entries(harness, 7)), keep=7,
                         operation_id="op1")  # fmt: skip
    first, again = rec.write(intake), rec.write(intake)
    assert (first.inserted, first.replayed_chunks) == (7, 0)
    assert (again.inserted, again.refreshed, again.replayed_chunks) == (0, 0, 3)
    assert harness.pool.upstream_inventory("u1").managed == 7


def test_another_response_under_a_used_operation_id_is_refused(harness):
    take_in(harness, entries(harness, 3))
    with pytest.raises(IdempotencyConflict):
        take_in(harness, entries(harness, 3, start=50))
    assert harness.pool.upstream_inventory("u1").managed == 3


def test_a_write_cut_off_mid_way_and_done_again_writes_each_chunk_once(harness):
    broken = Reconciler(StoreFailsAfter(harness.pool, 2), harness.credentials, chunk=3)
    intake = broken.prepare(harness.now, TARGET, ParsedResponse(entries(harness, 10)), keep=10,
                            operation_id="op1")  # fmt: skip
    with pytest.raises(StoreUnavailable):
        broken.write(intake)
    assert harness.pool.upstream_inventory("u1").managed == 6
    done = reconciler(harness, chunk=3).write(intake)
    # Chunks 0 and 1 replay; 2 and 3 are written.
    assert (done.replayed_chunks, done.inserted) == (2, 4)
    assert harness.pool.upstream_inventory("u1").managed == 10


def test_a_proxy_handed_out_again_refreshes_its_record(harness):
    same = entries(harness, 3)
    take_in(harness, same)
    later = [ProxyEntry(e.host, e.port, e.protocol, e.expires_at + timedelta(minutes=5))
             for e in same]  # fmt: skip
    result = take_in(harness, later, operation_id="op2")
    assert (result.inserted, result.refreshed) == (0, 3)
    assert harness.pool.upstream_inventory("u1").managed == 3


def test_passwords_go_through_the_credentials_store_and_come_out_of_an_extract(harness):
    given = entries(harness, 2, login=True)
    result = take_in(harness, given)
    assert result.inserted == 2
    harness.mark([proxy_id_of("u1", e) for e in given], ProxyState.AVAILABLE)  # as the checker
    extracted = harness.take(2).proxies
    assert sorted((p.username, p.password) for p in extracted) == [("user0", "pw0"),
                                                                   ("user1", "pw1")]  # fmt: skip


def test_a_proxy_listed_twice_in_a_response_is_taken_once(harness):
    once = entries(harness, 3)
    twice = [
        *once,
        ProxyEntry(once[0].host, once[0].port, "http", harness.now + timedelta(hours=1)),
    ]
    result = take_in(harness, twice)
    assert (result.received, result.duplicates, result.inserted) == (4, 1, 3)


def test_an_upstreams_label_map_and_defaults_make_the_vendors_labels_its_own(harness):
    """An operator maps a vendor's labels (Zhima's cities) to its own, in any case; a label
    not in the map stays as the vendor wrote it; an entry without one takes the default."""
    labels = LabelMap.of({"region": {"广东省广州市": "cn-gd", "us": "United States"},
                          "carrier": {"电信": "telecom"}}, default_carrier="unknown")  # fmt: skip
    target = replace(TARGET, labels=labels)
    listed = entries(harness, 4)
    listed = [replace(listed[0], region="广东省广州市", carrier="电信"),
              replace(listed[1], region="US"),
              replace(listed[2], region="de", carrier="Vodafone"),
              replace(listed[3], region=None)]  # fmt: skip
    take_in(harness, listed, target=target)
    harness.mark([proxy_id_of("u1", e) for e in listed], ProxyState.AVAILABLE)
    got = harness.take(4).proxies
    assert sorted((p.port, p.region, p.carrier) for p in got) == [
        (10_000, "cn-gd", "telecom"), (10_001, "United States", "unknown"),
        (10_002, "de", "Vodafone"), (10_003, None, "unknown"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (["region"], "a JSON object"),
        ({"city": {}}, "region and carrier only, not 'city'"),
        ({"region": {"a": ""}}, "is not a label to a label"),
        ({"region": {"a": 5}}, "is not a label to a label"),
        ({"carrier": {"x" * 65: "y"}}, "is not a label to a label"),
        ({"region": {f"r{n}": "x" for n in range(1_001)}}, "at most 1,000"),
    ],
)
def test_a_label_map_that_is_off_says_what_is_wrong(config, says):
    with pytest.raises(BadLabel, match=re.escape(says)):
        LabelMap.of(config)
