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
from activity.providers.errors import MalformedResponse
from activity.reconciler import Reconciler, UpstreamTarget, proxy_id_of
from activity.types import FetchedBatch, ProxyState, UpsertResult

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


class Provider:
    """What ``ask`` gets from a provider: the counts asked, the entries handed out."""

    def __init__(self, *responses: list[ProxyEntry]) -> None:
        self.responses = list(responses)
        self.asked: list[int] = []

    def __call__(self, count: int) -> ParsedResponse:
        self.asked.append(count)
        return ParsedResponse(self.responses.pop(0), Counter({DropReason.BAD_PORT: 2}))


@pytest.fixture
def harness(make_pool):
    return make_pool()


def reconciler(harness, chunk: int = 500) -> Reconciler:
    return Reconciler(harness.pool, harness.credentials, chunk=chunk)


def test_the_deficit_is_asked_for_and_filled(harness):
    harness.upsert([harness.proxy(f"p{n}") for n in range(3)], max_size=10)
    provider = Provider(entries(harness, 7))
    result = reconciler(harness).reconcile(harness.now, TARGET, provider, operation_id="op1",
                                           proxy_budget=100)  # fmt: skip
    assert provider.asked == [7]
    assert (result.deficit, result.asked, result.received, result.inserted) == (7, 7, 7, 7)
    assert result.dropped == Counter({DropReason.BAD_PORT: 2})
    assert harness.pool.upstream_inventory("u1").managed == 10


def test_the_budget_caps_the_ask_and_a_full_upstream_asks_nothing(harness):
    provider = Provider(entries(harness, 4))
    result = reconciler(harness).reconcile(harness.now, TARGET, provider, operation_id="op1",
                                           proxy_budget=4)  # fmt: skip
    assert provider.asked == [4] and result.inserted == 4
    nothing = Provider()
    for budget in (0, 100):
        if budget:
            more = Provider(entries(harness, 6, start=9))
            reconciler(harness).reconcile(harness.now, TARGET, more, operation_id="op2",
                                          proxy_budget=budget)  # fmt: skip
        empty = reconciler(harness).reconcile(harness.now, TARGET, nothing, operation_id="op3",
                                              proxy_budget=budget)  # fmt: skip
        assert empty.asked == 0
    assert nothing.asked == []
    assert harness.pool.upstream_inventory("u1").managed == 10


def test_of_a_response_over_the_ask_the_longest_lived_are_kept(harness):
    short = entries(harness, 5, minutes=2)
    long = entries(harness, 5, start=100, minutes=30)
    result = reconciler(harness).reconcile(
        harness.now, UpstreamTarget("u1", 5, timedelta(seconds=5)), Provider(short + long),
        operation_id="op1", proxy_budget=100,
    )  # fmt: skip
    assert (result.received, result.beyond_ask, result.inserted) == (10, 5, 5)
    kept = harness.pool.upstream_inventory("u1").managed
    assert kept == 5


def test_a_response_written_again_changes_nothing_twice(harness):
    rec = reconciler(harness, chunk=3)
    intake = rec.prepare(harness.now, TARGET, Provider(entries(harness, 7))(7), keep=7,
                         operation_id="op1")  # fmt: skip
    first, again = rec.write(intake), rec.write(intake)
    assert (first.inserted, first.replayed_chunks) == (7, 0)
    assert (again.inserted, again.refreshed, again.replayed_chunks) == (0, 0, 3)
    assert harness.pool.upstream_inventory("u1").managed == 7


def test_another_response_under_a_used_operation_id_is_refused(harness):
    rec = reconciler(harness)
    rec.reconcile(harness.now, TARGET, Provider(entries(harness, 3)), operation_id="op1",
                  proxy_budget=100)  # fmt: skip
    with pytest.raises(IdempotencyConflict):
        rec.reconcile(harness.now, TARGET, Provider(entries(harness, 3, start=50)),
                      operation_id="op1", proxy_budget=100)  # fmt: skip
    assert harness.pool.upstream_inventory("u1").managed == 3


class _BreaksAfter:
    """A pool whose upsert fails after ``chunks`` calls, as the store going away mid-fetch."""

    def __init__(self, pool, chunks: int) -> None:
        self.pool, self.left = pool, chunks

    def inventory(self, upstream_id):
        return self.pool.inventory(upstream_id)

    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        if self.left == 0:
            raise StoreUnavailable("planted: the store went away here")
        self.left -= 1
        return self.pool.upsert_fetched(batch)


def test_a_write_cut_off_mid_way_and_done_again_writes_each_chunk_once(harness):
    broken = Reconciler(_BreaksAfter(harness.pool, 2), harness.credentials, chunk=3)
    intake = broken.prepare(harness.now, TARGET, Provider(entries(harness, 10))(10), keep=10,
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
    reconciler(harness).reconcile(harness.now, TARGET, Provider(same), operation_id="op1",
                                  proxy_budget=100)  # fmt: skip
    later = [ProxyEntry(e.host, e.port, e.protocol, e.expires_at + timedelta(minutes=5))
             for e in same]  # fmt: skip
    result = reconciler(harness).reconcile(harness.now, TARGET, Provider(later),
                                           operation_id="op2", proxy_budget=100)  # fmt: skip
    assert (result.inserted, result.refreshed) == (0, 3)
    assert harness.pool.upstream_inventory("u1").managed == 3


def test_passwords_go_through_the_credentials_store_and_come_out_of_an_extract(harness):
    given = entries(harness, 2, login=True)
    result = reconciler(harness).reconcile(harness.now, TARGET, Provider(given),
                                           operation_id="op1", proxy_budget=100)  # fmt: skip
    assert result.inserted == 2
    harness.mark([proxy_id_of("u1", e) for e in given], ProxyState.AVAILABLE)  # as the checker
    extracted = harness.take(2).proxies
    assert sorted((p.username, p.password) for p in extracted) == [("user0", "pw0"),
                                                                   ("user1", "pw1")]  # fmt: skip


def test_a_malformed_response_writes_nothing(harness):
    def broken(count: int) -> ParsedResponse:
        raise MalformedResponse("planted")

    with pytest.raises(MalformedResponse):
        reconciler(harness).reconcile(harness.now, TARGET, broken, operation_id="op1",
                                      proxy_budget=100)  # fmt: skip
    assert harness.pool.upstream_inventory("u1").managed == 0


def test_a_proxy_listed_twice_in_a_response_is_taken_once(harness):
    once = entries(harness, 3)
    twice = [
        *once,
        ProxyEntry(once[0].host, once[0].port, "http", harness.now + timedelta(hours=1)),
    ]
    result = reconciler(harness).reconcile(harness.now, TARGET, Provider(twice),
                                           operation_id="op1", proxy_budget=100)  # fmt: skip
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
    reconciler(harness).reconcile(harness.now, target, Provider(listed), operation_id="op1",
                                  proxy_budget=100)  # fmt: skip
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
