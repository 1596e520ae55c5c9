"""Contract: provider upsert (ADR-005 "Provider Upsert", "库存真值")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.errors import IdempotencyConflict, InvalidBatch
from activity.types import FetchedBatch, PoolOptions

MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)


class TestUpsert:
    def test_new_proxies_are_counted_and_wait_for_a_health_check(self, make_pool: PoolFactory):
        """Upsert step 5 + 库存真值: a new lifecycle counts; FETCHED is not handed out."""
        h = make_pool()
        result = h.upsert([h.proxy("p1"), h.proxy("p2")])
        assert (result.inserted, result.refreshed, result.dropped) == (2, 0, 0)
        assert h.pool.inventory("u1") == 2
        assert h.take(2).proxies == ()

    def test_usable_until_is_provider_expiry_minus_safety_margin(self, make_pool: PoolFactory):
        """Upsert (Python side): usable_until = expires_at - safety_margin, kept to the ms."""
        h = make_pool()
        p = h.proxy("p1", ttl=timedelta(minutes=3, milliseconds=250))
        h.upsert([p], margin=timedelta(seconds=20))
        h.mark(["p1"])
        got = h.take(1).proxies[0]
        assert got.expires_at == p.expires_at
        assert got.usable_until == p.expires_at - timedelta(seconds=20)

    def test_candidate_inside_the_safety_margin_is_dropped(self, make_pool: PoolFactory):
        """Upsert: a candidate whose usable_until is not in the future is an invalid candidate."""
        h = make_pool()
        result = h.upsert([h.proxy("p1", ttl=4 * SEC), h.proxy("p2")], margin=5 * SEC)
        assert (result.inserted, result.dropped) == (1, 1)
        assert h.pool.inventory("u1") == 1

    def test_provider_ttl_is_a_hard_expiry(self, make_pool: PoolFactory):
        """库存真值 + 短 TTL 清理: past its hard expiry a proxy is gone everywhere."""
        h = make_pool()
        h.stock("p1", "p2", ttl=30 * SEC)
        h.stock("p3", ttl=10 * MIN)
        h.advance(31 * SEC)
        assert h.pool.inventory("u1") == 1
        assert ids(h.take(5)) == ["p3"]

    def test_max_size_is_the_final_hard_limit(self, make_pool: PoolFactory):
        """Upsert step 6: FetchedBatch.max_size caps the upstream's unextracted inventory."""
        h = make_pool()
        first = h.upsert([h.proxy(f"p{i}") for i in range(5)], max_size=3)
        assert (first.inserted, first.over_capacity) == (3, 2)
        second = h.upsert([h.proxy("q1")], max_size=3)
        assert (second.inserted, second.over_capacity) == (0, 1)
        h.mark(["p0"])
        assert ids(h.take(1)) == ["p0"]
        third = h.upsert([h.proxy("q1"), h.proxy("q2")], max_size=3)
        assert (third.inserted, third.over_capacity) == (1, 1)
        assert h.pool.inventory("u1") == 3

    def test_max_size_counts_per_upstream(self, make_pool: PoolFactory):
        """Upsert step 6: the limit is on the upstream's own inventory, not the pool's."""
        h = make_pool()
        h.upsert([h.proxy("a1"), h.proxy("a2")], upstream="u1", max_size=2)
        result = h.upsert([h.proxy("b1"), h.proxy("b2")], upstream="u2", max_size=2)
        assert result.inserted == 2

    def test_zero_max_size_admits_nothing(self, make_pool: PoolFactory):
        """Upsert step 6 at its edge."""
        h = make_pool()
        assert h.upsert([h.proxy("p1")], max_size=0).over_capacity == 1
        assert h.pool.inventory("u1") == 0

    def test_refresh_extends_life_without_counting_twice(self, make_pool: PoolFactory):
        """库存真值: repeated refresh does not change inventory; the new expiry takes effect."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        h.advance(30 * SEC)
        result = h.upsert([h.proxy("p1", ttl=5 * MIN)])
        assert (result.inserted, result.refreshed) == (0, 1)
        assert h.pool.inventory("u1") == 1
        h.advance(MIN)  # past the first expiry, inside the refreshed one
        got = h.take(1).proxies
        assert [p.proxy_id for p in got] == ["p1"]
        assert got[0].expires_at == h.now - MIN + 5 * MIN

    def test_refresh_keeps_the_health_state(self, make_pool: PoolFactory):
        """Upsert: a refresh changes lifetime and labels, never the checker's verdict."""
        h = make_pool()
        h.stock("p1")
        h.upsert([h.proxy("p1")])
        assert ids(h.take(1)) == ["p1"]
        h.upsert([h.proxy("p2")])
        h.upsert([h.proxy("p2")])
        assert h.take(1).proxies == ()  # p2 is still FETCHED

    def test_refresh_moves_filter_labels(self, make_pool: PoolFactory):
        """Upsert step 5: records and filter indexes move together."""
        h = make_pool()
        h.stock("p1", region="us")
        h.upsert([h.proxy("p1", region="de")])
        assert h.take(1, region="us").proxies == ()
        assert ids(h.take(1, region="de")) == ["p1"]

    def test_another_providers_duplicate_never_overwrites(self, make_pool: PoolFactory):
        """Upsert step 3: the incumbent upstream keeps the proxy for its lifecycle."""
        h = make_pool()
        h.stock("p1", upstream="u1")
        same_exit = h.upsert([h.proxy("p9", unique_key="key-p1")], upstream="u2")
        same_id = h.upsert([h.proxy("p1")], upstream="u2")
        assert (same_exit.inserted, same_exit.conflicts) == (0, 1)
        assert (same_id.inserted, same_id.refreshed, same_id.conflicts) == (0, 0, 1)
        assert h.pool.inventory("u2") == 0
        assert h.pool.inventory("u1") == 1
        assert h.take(1).proxies[0].upstream_id == "u1"

    def test_the_new_lifecycles_are_named_and_nothing_else(self, make_pool: PoolFactory):
        """Upsert: the IDs of what it inserted, in batch order, across chunks; not what it
        refreshed, refused or dropped (an intake check probes exactly these)."""
        h = make_pool(options=PoolOptions(script_batch_cap=2))
        h.stock("old", upstream="u1")
        h.stock("held", upstream="u2")
        h.take(1, upstream="u2")  # extracted: a terminal state
        result = h.upsert(
            [
                h.proxy("n1"),
                h.proxy("old"),
                h.proxy("held"),
                h.proxy("n2"),
                h.proxy("gone", ttl=timedelta(seconds=1)),
                h.proxy("n3"),
            ],
            upstream="u1",
        )
        assert result.inserted_ids == ("n1", "n2", "n3")
        assert (result.inserted, result.refreshed, result.conflicts) == (3, 1, 1)
        assert result.dropped == 1  # inside its safety margin

    def test_proxy_id_and_unique_key_must_agree(self, make_pool: PoolFactory):
        """Upsert step 2: a known ID with another exit, or an exit under another ID, conflicts."""
        h = make_pool()
        h.upsert([h.proxy("p1", unique_key="10.0.0.1:80")])
        result = h.upsert(
            [h.proxy("p1", unique_key="10.0.0.2:80"), h.proxy("p2", unique_key="10.0.0.1:80")]
        )
        assert (result.inserted, result.refreshed, result.conflicts) == (0, 0, 2)
        assert h.pool.inventory("u1") == 1

    def test_unique_keys_compare_case_insensitively(self, make_pool: PoolFactory):
        """Upsert: the unique key digest ignores the case of the exit's spelling."""
        h = make_pool()
        h.upsert([h.proxy("p1", unique_key="Proxy.Example:80")])
        assert h.upsert([h.proxy("p2", unique_key="PROXY.example:80")]).conflicts == 1

    def test_extracted_never_reenters_by_refresh(self, make_pool: PoolFactory):
        """Upsert step 4: an EXTRACTED proxy stays extracted for its lifecycle."""
        h = make_pool()
        h.stock("p1")
        assert ids(h.take(1)) == ["p1"]
        result = h.upsert([h.proxy("p1")])
        assert result.skipped_terminal == 1
        assert h.pool.inventory("u1") == 0
        h.mark(["p1"])
        assert h.take(1).proxies == ()

    def test_a_new_lifecycle_starts_after_hard_expiry(self, make_pool: PoolFactory):
        """Upsert step 1: an expired incumbent is cleaned and never blocks a fresh insert."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        h.take(1)
        h.advance(2 * MIN)
        result = h.upsert([h.proxy("p1")])
        assert (result.inserted, result.cleaned) == (1, 1)
        h.mark(["p1"])
        assert ids(h.take(1)) == ["p1"]

    def test_expired_incumbents_are_cleaned_in_bounded_steps(self, make_pool: PoolFactory):
        """Upsert step 1 / 短 TTL 清理 layer 2: each write cleans at most clean_budget records."""
        h = make_pool(options=PoolOptions(clean_budget=2))
        h.upsert([h.proxy(f"old{i}", ttl=MIN) for i in range(5)])
        h.advance(2 * MIN)
        assert h.upsert([h.proxy("n1")]).cleaned == 2
        assert h.upsert([h.proxy("n2")]).cleaned == 2
        assert h.upsert([h.proxy("n3")]).cleaned == 1
        assert h.pool.inventory("u1") == 3

    def test_a_retried_operation_changes_no_count(self, make_pool: PoolFactory):
        """Upsert: an operation ID makes a retried batch return the stored result."""
        h = make_pool()
        proxies = [h.proxy("p1"), h.proxy("p2")]
        first = h.upsert(proxies, operation_id="fetch-1")
        again = h.upsert(proxies, operation_id="fetch-1")
        assert first.inserted_ids == ("p1", "p2")
        assert again == replace(first, replayed=True, inserted_ids=())  # the first had them
        assert h.pool.inventory("u1") == 2
        with pytest.raises(IdempotencyConflict):
            h.upsert([h.proxy("p3")], operation_id="fetch-1")
        assert h.pool.inventory("u1") == 2

    def test_a_retry_is_recognised_after_the_clock_moved(self, make_pool: PoolFactory):
        """Upsert: the operation digest covers the caller's input, not what survived filtering."""
        h = make_pool()
        secret = h.credentials.put("user", "pw")
        proxies = [h.proxy("p1", ttl=10 * SEC), h.proxy("p2", secret_ref=secret.ref)]
        first = h.upsert(proxies, operation_id="op-1")
        h.advance(6 * SEC)  # p1 is inside its safety margin now
        h.credentials.revoke(secret.ref)
        again = h.upsert(proxies, operation_id="op-1")
        assert again == replace(first, replayed=True, inserted_ids=())

    def test_a_refresh_that_shortens_life_cuts_the_lease(self, make_pool: PoolFactory):
        """Worker 所有权: a lease never outlives usable_until, even after a refresh."""
        h = make_pool()
        h.stock("p1", ttl=10 * MIN)
        h.pool.assign(h.now, "p1", "w1", 5 * MIN)
        h.upsert([h.proxy("p1", ttl=2 * MIN)], margin=5 * SEC)
        assert h.pool.get("p1").lease_expires_at == h.now + 2 * MIN - 5 * SEC

    def test_an_expired_incumbent_never_blocks_even_past_the_clean_budget(self, make_pool):
        """Upsert step 1: the incumbents in a candidate's way are cleaned whatever the budget."""
        h = make_pool(options=PoolOptions(clean_budget=1))
        h.upsert([h.proxy(p, ttl=MIN) for p in ("a", "b", "p1")])
        h.advance(2 * MIN)
        result = h.upsert([h.proxy("p1")])
        assert (result.inserted, result.cleaned) == (1, 2)

    def test_expired_records_do_not_hold_max_size_places(self, make_pool: PoolFactory):
        """Upsert step 6: max_size bounds live stock; the upstream's dead records are cleaned."""
        h = make_pool(options=PoolOptions(clean_budget=2))
        h.upsert([h.proxy(f"old{i}", ttl=MIN) for i in range(10)], max_size=10)
        h.advance(2 * MIN)
        result = h.upsert([h.proxy(f"new{i}") for i in range(10)], max_size=10)
        assert (result.inserted, result.over_capacity, result.cleaned) == (10, 0, 10)
        assert h.pool.inventory("u1") == 10

    def test_each_script_sized_chunk_cleans_on_its_own(self, make_pool: PoolFactory):
        """Upsert: batches run in chunks of script_batch_cap, each with its bounded clean."""
        h = make_pool(options=PoolOptions(clean_budget=1, script_batch_cap=2))
        h.upsert([h.proxy(f"old{i}", ttl=MIN) for i in range(5)])
        h.advance(2 * MIN)
        result = h.upsert([h.proxy(f"n{i}") for i in range(5)])
        assert (result.inserted, result.cleaned) == (5, 3)

    def test_an_unbelievable_provider_ttl_is_dropped(self, make_pool: PoolFactory):
        """Bounded everything: no record outlives max_proxy_ttl."""
        h = make_pool(options=PoolOptions(max_proxy_ttl=timedelta(hours=1)))
        result = h.upsert([h.proxy("p1", ttl=timedelta(hours=2)), h.proxy("p2")])
        assert (result.inserted, result.dropped) == (1, 1)

    def test_credentials_are_resolved_before_writing(self, make_pool: PoolFactory):
        """凭据: resolution happens before commit; an unresolvable candidate is dropped."""
        h = make_pool()
        good = h.credentials.put("user-1", "s3cret-pass")
        gone = h.credentials.put("user-2", "other-pass")
        h.credentials.revoke(gone.ref)
        result = h.upsert([h.proxy("p1", secret_ref=good.ref), h.proxy("p2", secret_ref=gone.ref)])
        assert (result.inserted, result.dropped) == (1, 1)
        h.mark(["p1"])
        got = h.take(1).proxies[0]
        assert (got.username, got.password) == ("user-1", "s3cret-pass")
        assert "s3cret-pass" not in repr(got)
        assert "static:" not in repr(good.ref)

    def test_credentials_a_record_cannot_hold_drop_the_candidate(self, make_pool: PoolFactory):
        """Bad input changes nothing: a store answering with a lone surrogate is no credential."""
        h = make_pool()
        bad = h.credentials.put("user-1", "pass-\udc80")
        result = h.upsert([h.proxy("p1", secret_ref=bad.ref), h.proxy("p2")])
        assert (result.inserted, result.dropped) == (1, 1)
        h.mark(["p1", "p2"])
        assert ids(h.take(5)) == ["p2"]


def _now_naive() -> datetime:
    return datetime(2026, 1, 1)  # noqa: DTZ001 - deliberately naive


BAD_BATCHES = {
    "duplicate proxy ID": lambda h: h.batch([h.proxy("p1"), h.proxy("p1", unique_key="other")]),
    "duplicate unique key": lambda h: h.batch([h.proxy("p1"), h.proxy("p2", unique_key="key-p1")]),
    "oversize": lambda h: h.batch([h.proxy(f"p{i}") for i in range(11)]),
    "port zero": lambda h: h.batch([replace(h.proxy("p1"), port=0)]),
    "port too high": lambda h: h.batch([replace(h.proxy("p1"), port=65536)]),
    "port not an int": lambda h: h.batch([replace(h.proxy("p1"), port="80")]),
    "naive expires_at": lambda h: h.batch([replace(h.proxy("p1"), expires_at=_now_naive())]),
    "expires before 1970": lambda h: h.batch(
        [replace(h.proxy("p1"), expires_at=datetime(1969, 1, 1, tzinfo=UTC))]
    ),
    "naive fetched_at": lambda h: replace(h.batch([h.proxy("p1")]), fetched_at=_now_naive()),
    "negative max_size": lambda h: replace(h.batch([h.proxy("p1")]), max_size=-1),
    "negative margin": lambda h: replace(h.batch([h.proxy("p1")]), safety_margin=-SEC),
    "unknown protocol": lambda h: h.batch([replace(h.proxy("p1"), protocol="ftp")]),
    "empty host": lambda h: h.batch([replace(h.proxy("p1"), host="")]),
    "zero concurrency": lambda h: h.batch([replace(h.proxy("p1"), max_concurrency=0)]),
    "bad upstream": lambda h: replace(h.batch([h.proxy("p1")]), upstream_id="u 1"),
    # Labels are kept as vendors send them, cleaned first (activity/labels.py): one that is
    # not clean, unprintable or too long is the caller's mistake.
    "unclean region": lambda h: h.batch([replace(h.proxy("p1"), region=" north  america")]),
    "unprintable carrier": lambda h: h.batch([replace(h.proxy("p1"), carrier="tele\x07com")]),
    "region over 64 characters": lambda h: h.batch([replace(h.proxy("p1"), region="r" * 65)]),
    "empty region": lambda h: h.batch([replace(h.proxy("p1"), region="")]),
    "proxy ID with spaces": lambda h: h.batch([replace(h.proxy("p1"), proxy_id="p 1")]),
    "not a batch": lambda h: [h.proxy("p1")],
    "not a proxy": lambda h: h.batch([{"proxy_id": "p1"}]),
    "protocol as a list": lambda h: h.batch([replace(h.proxy("p1"), protocol=["http"])]),
    "secret_ref as a string": lambda h: h.batch([replace(h.proxy("p1"), secret_ref="ref")]),
}


class TestUpsertInput:
    @pytest.mark.parametrize("case", sorted(BAD_BATCHES))
    def test_bad_batches_raise_and_change_nothing(self, make_pool: PoolFactory, case: str):
        """Upsert: batch-level illegal input fails before anything is written."""
        h = make_pool(options=PoolOptions(max_upsert_batch=10))
        h.stock("keep")
        batch = BAD_BATCHES[case](_Builder(h))
        with pytest.raises(InvalidBatch):
            h.pool.upsert_fetched(batch)
        assert h.pool.inventory("u1") == 1
        assert ids(h.take(5)) == ["keep"]


class _Builder:
    def __init__(self, h):
        self.h = h
        self.proxy = h.proxy

    def batch(self, proxies):
        return FetchedBatch("u1", proxies, 1000, timedelta(seconds=5), self.h.now)
