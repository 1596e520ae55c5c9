"""Contract: every time and budget comparison a rule depends on, from both sides.

Each rule of ADR-005 that compares a time (``usable_until``, hard expiry, a lease, a replay, a
quarantine, a health check's age) or a count against a limit is pinned here one millisecond (or
one member) on each side of its edge, so an implementation that is off by one at the edge fails
a vector instead of passing every test. The side is the ADR's where it says one ("当前时间早于
usableUntil": usable strictly before ``usable_until``), docs/activity-pool.md's otherwise.
Worker session and report TTLs are not pinned here: they run on the store's own clock (Redis:
real time), which no vector can stop one millisecond before an edge.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import (
    InvalidBatch,
    InvalidRequest,
    OutcomeRejected,
    OwnershipConflict,
    ScanBudgetExhausted,
)
from activity.types import (
    ExtractRequest,
    HealthUpdate,
    Outcome,
    OutcomeReport,
    PoolOptions,
    ProxyState,
    RuntimeReport,
    SnapshotRef,
)

MS = timedelta(milliseconds=1)
SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
#: The harness's default safety margin: usable_until = expires_at - MARGIN.
MARGIN = 5 * SEC


def usable_for(h: PoolHarness, *proxy_ids: str, left: timedelta, **kwargs: object) -> None:
    """Stock proxies whose usable_until is exactly ``now + left``."""
    h.stock(*proxy_ids, ttl=left + MARGIN, **kwargs)  # type: ignore[arg-type]


def conflict(call, reason: str) -> None:
    with pytest.raises(OwnershipConflict) as err:
        call()
    assert err.value.reason == reason


class TestExtractBoundaries:
    def test_min_remaining_excludes_a_proxy_usable_for_exactly_that(self, make_pool: PoolFactory):
        """min_remaining: usable_until must lie strictly after now + min_remaining."""
        h = make_pool()
        usable_for(h, "exact", left=2 * MIN)
        usable_for(h, "one-ms-more", left=2 * MIN + MS)
        assert ids(h.take(5, min_remaining=2 * MIN)) == ["one-ms-more"]
        assert ids(h.take(5, min_remaining=2 * MIN - MS)) == ["exact"]

    def test_a_proxy_is_handed_out_until_the_ms_before_usable_until(self, make_pool: PoolFactory):
        """健康状态: "当前时间早于 usableUntil": at usable_until it is no longer handed out,
        though it is still unextracted inventory until its hard expiry."""
        h = make_pool()
        usable_for(h, "a", "b", left=SEC)
        h.advance(SEC - MS)
        assert ids(h.take(1)) == ["a"]
        h.advance(MS)
        assert h.take(1).proxies == ()
        assert h.pool.inventory("u1") == 1

    def test_health_age_equal_to_the_limit_is_fresh(self, make_pool: PoolFactory):
        """独占提取 step 3: a check exactly max_health_age old is fresh; 1 ms older is not."""
        h = make_pool()
        h.stock("older")
        h.advance(MS)
        h.stock("exact")
        h.advance(10 * SEC)
        assert ids(h.take(5, max_health_age=10 * SEC)) == ["exact"]
        assert ids(h.take(5)) == ["older"]

    def test_one_member_over_the_scan_budget_is_exhausted(self, make_pool: PoolFactory):
        """独占提取: budget + 1 members, the match last: the scan cannot confirm a result."""
        h = make_pool(options=PoolOptions(scan_budget=5))
        h.stock(*[f"stale{i}" for i in range(5)])
        h.advance(MIN)
        h.stock("fresh")
        with pytest.raises(ScanBudgetExhausted):
            h.take(1, max_health_age=10 * SEC)

    def test_a_proxy_is_gone_at_its_hard_expiry(self, make_pool: PoolFactory):
        """库存真值: with no safety margin, a proxy is handed out and counted until the ms
        before expires_at, and neither at it."""
        h = make_pool()
        h.upsert([h.proxy("a", ttl=MIN), h.proxy("b", ttl=MIN)], margin=timedelta(0))
        h.mark(["a", "b"])
        h.advance(MIN - MS)
        assert ids(h.take(1)) == ["a"]
        assert h.pool.inventory("u1") == 1
        h.advance(MS)
        assert h.pool.inventory("u1") == 0
        assert h.take(1).proxies == ()

    def test_a_replay_lives_exactly_the_idempotency_ttl(self, make_pool: PoolFactory):
        """幂等: replayed until the ms before now + ttl, not at it."""
        h = make_pool(options=PoolOptions(idempotency_ttl=5 * SEC))
        h.stock("p1", "p2")
        h.take(1, key="k1")
        h.advance(5 * SEC - MS)
        assert h.take(1, key="k1").replayed
        h.advance(MS)
        assert not h.take(1, key="k1").replayed

    def test_a_replay_ends_at_the_earliest_hard_expiry(self, make_pool: PoolFactory):
        """幂等: the replay of a result ends exactly when its first proxy's hard expiry comes."""
        h = make_pool()
        h.stock("short", ttl=MIN)
        h.take(1, key="k1")
        h.advance(MIN - MS)
        assert h.take(1, key="k1").replayed
        h.advance(MS)
        assert not h.take(1, key="k1").replayed

    def test_count_and_reserve_up_to_their_caps(self, make_pool: PoolFactory):
        """独占提取: count == max_extract_count and count + reserve == scan_budget are
        requests; one more of either is not."""
        h = make_pool(options=PoolOptions(max_extract_count=4, scan_budget=6))
        h.stock(*[f"p{i}" for i in range(6)])
        assert h.take(4, reserve_for_gateway=2).returned == 4
        for fields in ({"count": 5}, {"count": 4, "reserve_for_gateway": 3}):
            with pytest.raises(InvalidRequest):
                h.pool.extract(ExtractRequest(client_id="c1", **fields))  # type: ignore[arg-type]
        assert h.pool.inventory("u1") == 2


class TestUpsertBoundaries:
    def test_expiry_at_exactly_the_safety_margin_is_dropped(self, make_pool: PoolFactory):
        """Upsert: usable_until = expires_at - margin must be after now: a candidate expiring
        exactly at now + margin is dropped; 1 ms later it is kept, usable for 1 ms."""
        h = make_pool()
        result = h.upsert([h.proxy("exact", ttl=MARGIN), h.proxy("after", ttl=MARGIN + MS)])
        assert (result.inserted, result.dropped) == (1, 1)
        h.mark(["exact", "after"])
        got = h.take(5).proxies
        assert [p.proxy_id for p in got] == ["after"]
        assert got[0].usable_until == h.now + MS

    def test_a_provider_ttl_of_exactly_the_maximum_is_believed(self, make_pool: PoolFactory):
        """Upsert: expires_at - now may equal max_proxy_ttl; 1 ms more is dropped."""
        h = make_pool(options=PoolOptions(max_proxy_ttl=timedelta(hours=1)))
        result = h.upsert(
            [h.proxy("max", ttl=timedelta(hours=1)), h.proxy("over", ttl=timedelta(hours=1) + MS)]
        )
        assert (result.inserted, result.dropped) == (1, 1)

    def test_a_new_lifecycle_starts_at_exactly_the_hard_expiry(self, make_pool: PoolFactory):
        """Upsert steps 1/2/4: the ms before expires_at an EXTRACTED record still holds its ID
        and exit; at expires_at it is an expired incumbent and a new lifecycle starts. (Each
        call's bounded clean takes one earlier-expiring blocker, so the upsert's own check of
        the incumbent decides.)"""
        h = make_pool(options=PoolOptions(clean_budget=1))
        h.stock("b1", "b2", ttl=MIN - 2 * MS, region="y")
        h.stock("p1", "p2", ttl=MIN, region="x")
        assert ids(h.take(2, region="x")) == ["p1", "p2"]
        h.advance(MIN - MS)
        early = h.upsert([h.proxy("p1", region="x"), h.proxy("n2", unique_key="key-p2")])
        assert (early.inserted, early.skipped_terminal, early.conflicts) == (0, 1, 1)
        h.advance(MS)
        result = h.upsert([h.proxy("p1", region="x"), h.proxy("n2", unique_key="key-p2")])
        assert (result.inserted, result.cleaned) == (2, 3)

    def test_expired_stock_is_cleaned_once_a_batch_would_go_one_over(self, make_pool):
        """Upsert step 6: an upstream's own expired records are cleaned (beyond the bounded
        clean) exactly when live inventory + batch would exceed max_size, so they never hold
        a place; a batch that just fits cleans only the bounded one."""
        h = make_pool(options=PoolOptions(clean_budget=1))
        h.upsert([h.proxy(f"old{i}", ttl=MIN) for i in range(4)], max_size=4)
        h.advance(MIN)  # four expired; each call's bounded clean takes one
        fits = h.upsert([h.proxy("n1")], max_size=4)  # 3 still counted + 1 == 4
        assert (fits.inserted, fits.over_capacity, fits.cleaned) == (1, 0, 1)
        over = h.upsert([h.proxy("n2"), h.proxy("n3")], max_size=4)  # 2 + 1 + 2 == 5
        assert (over.inserted, over.over_capacity, over.cleaned) == (2, 0, 1 + 2)
        assert h.pool.inventory("u1") == 3

    def test_a_quarantine_ends_at_exactly_its_end(self, make_pool: PoolFactory):
        """Quarantine: a banned exit is refused until the ms before reported_at + quarantine,
        admitted at it; quarantine_of agrees."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        assert ids(h.take(1)) == ["p1"]
        report = OutcomeReport("c1", "p1", Outcome.BANNED, h.now, quarantine=2 * MIN)
        h.pool.report_outcome(report)
        h.advance(MIN)  # p1 is gone; its exit is offered again under a new ID
        h.advance(MIN - MS)
        assert h.upsert([h.proxy("p9", unique_key="key-p1")]).quarantined == 1
        h.advance(MS)
        assert h.upsert([h.proxy("p9", unique_key="key-p1")]).inserted == 1

    def test_quarantine_of_ends_at_exactly_its_end(self, make_pool: PoolFactory):
        """quarantine_of: a host ban is reported until the ms before its end, not at it."""
        h = make_pool()
        h.stock("p1", ttl=MIN)
        assert ids(h.take(1)) == ["p1"]
        report = OutcomeReport(
            "c1", "p1", Outcome.BANNED, h.now, target_host="a.example", quarantine=2 * MIN
        )
        end = h.now + 2 * MIN
        h.pool.report_outcome(report)
        h.advance(MIN)
        h.stock("p9", unique_key="key-p1")
        assert h.pool.quarantine_of(["p9"], end - MS) == {"p9": frozenset({"a.example"})}
        assert h.pool.quarantine_of(["p9"], end) == {}


class TestHealthBoundaries:
    def test_a_check_applies_until_the_ms_before_the_hard_expiry(self, make_pool: PoolFactory):
        """健康状态: a record at its hard expiry is missing to the checker (each call's bounded
        clean takes one earlier-expiring blocker, so the check itself decides)."""
        h = make_pool(options=PoolOptions(clean_budget=1))
        h.upsert([h.proxy("b1", ttl=MIN - 2 * MS), h.proxy("b2", ttl=MIN - 2 * MS)])
        h.upsert([h.proxy("a", ttl=MIN), h.proxy("b", ttl=MIN)])
        h.advance(MIN - MS)
        assert h.pool.apply_health([HealthUpdate("a", ProxyState.AVAILABLE, h.now)]).applied == 1
        h.advance(MS)
        assert h.pool.apply_health([HealthUpdate("b", ProxyState.AVAILABLE, h.now)]).missing == 1

    def test_an_outcome_is_taken_until_the_ms_before_the_hard_expiry(self, make_pool):
        """Outcome: the record is reportable while the pool holds it, to its last ms."""
        h = make_pool()
        h.stock("p1", "p2", ttl=MIN)
        assert ids(h.take(2)) == ["p1", "p2"]
        h.advance(MIN - MS)
        h.pool.report_outcome(OutcomeReport("c1", "p1", Outcome.OK, h.now))
        h.advance(MS)
        with pytest.raises(OutcomeRejected):
            h.pool.report_outcome(OutcomeReport("c1", "p2", Outcome.OK, h.now))

    def test_a_check_as_old_as_the_recorded_one_applies(self, make_pool: PoolFactory):
        """健康状态: only a check older than the recorded one is stale; an equal one applies."""
        h = make_pool()
        h.stock("p1", "p2")
        checked = h.now
        h.advance(SEC)
        older = HealthUpdate("p1", ProxyState.UNHEALTHY, checked - MS)
        same = HealthUpdate("p2", ProxyState.UNHEALTHY, checked)
        assert h.pool.apply_health([older]).stale == 1
        assert h.pool.apply_health([same]).applied == 1
        assert ids(h.take(5)) == ["p1"]

    def test_a_check_up_to_the_clock_skew_ahead_is_believed(self, make_pool: PoolFactory):
        """健康状态: checked_at may be max_clock_skew ahead of now; 1 ms more is refused."""
        h = make_pool(options=PoolOptions(max_clock_skew=10 * SEC))
        h.upsert([h.proxy("p1")])
        ahead = HealthUpdate("p1", ProxyState.AVAILABLE, h.now + 10 * SEC)
        assert h.pool.apply_health([ahead]).applied == 1
        with pytest.raises(InvalidBatch):
            h.pool.apply_health([HealthUpdate("p1", ProxyState.AVAILABLE, h.now + 10 * SEC + MS)])


class TestOwnershipBoundaries:
    def test_assign_until_the_ms_before_usable_until(self, make_pool: PoolFactory):
        """Worker 所有权: Assign takes a proxy "未到 usableUntil", not one at it."""
        h = make_pool()
        usable_for(h, "a", "b", left=SEC)
        h.advance(SEC - MS)
        assert h.pool.assign(h.now, "a", "w1", MIN).lease_expires_at == h.now + MS
        h.advance(MS)
        conflict(lambda: h.pool.assign(h.now, "b", "w1", MIN), "past_usable")

    def test_assign_until_the_ms_before_the_hard_expiry(self, make_pool: PoolFactory):
        """Worker 所有权: at the caller's time, a proxy at its hard expiry is not found."""
        h = make_pool()
        h.upsert([h.proxy("a", ttl=MIN), h.proxy("b", ttl=MIN)], margin=timedelta(0))
        h.mark(["a", "b"])
        assert h.pool.assign(h.now + MIN - MS, "a", "w1", MIN).proxy_id == "a"
        conflict(lambda: h.pool.assign(h.now + MIN, "b", "w1", MIN), "not_found")

    def test_renew_until_the_ms_before_the_lease_ends(self, make_pool: PoolFactory):
        """Worker 所有权: a lease renews until its last ms; at its end it has expired."""
        h = make_pool()
        h.stock("a", "b")
        a = h.pool.assign(h.now, "a", "w1", 10 * SEC)
        b = h.pool.assign(h.now, "b", "w1", 10 * SEC)
        h.advance(10 * SEC - MS)
        assert h.pool.renew(h.now, "a", "w1", a.epoch, 10 * SEC).lease_expires_at == (
            h.now + 10 * SEC
        )
        h.advance(MS)
        conflict(lambda: h.pool.renew(h.now, "b", "w1", b.epoch, 10 * SEC), "lease_expired")

    def test_expire_reclaims_a_lease_at_exactly_its_end(self, make_pool: PoolFactory):
        """Worker 所有权 Expire: due at lease end, not 1 ms before."""
        h = make_pool()
        h.stock("a")
        h.pool.assign(h.now, "a", "w1", 10 * SEC)
        h.advance(10 * SEC - MS)
        assert h.pool.expire(h.now, 10) == []
        h.advance(MS)
        assert [x.proxy_id for x in h.pool.expire(h.now, 10)] == ["a"]

    def test_slots_count_until_the_ms_before_usable_until(self, make_pool: PoolFactory):
        """Slots: "只统计超过 safety margin": a proxy at its usable_until offers nothing."""
        h = make_pool()
        usable_for(h, "a", left=SEC, max_concurrency=4)
        usable_for(h, "b", left=2 * SEC, max_concurrency=3)
        h.advance(SEC - MS)
        assert h.pool.upstream_inventory("u1").available_slots == 7
        h.advance(MS)
        assert h.pool.upstream_inventory("u1").available_slots == 3

    def test_an_assigned_proxy_offers_slots_until_its_lease_ends(self, make_pool: PoolFactory):
        """Slots: an assigned proxy counts while its lease runs (to its last ms) and a fresh
        report at or past the assignment's epoch vouches for it."""
        h = make_pool()
        h.stock("p1", "p2", max_concurrency=4)
        h.pool.open_session("w1", "s1", MIN)
        h.pool.assign(h.now, "p1", "w1", 10 * SEC)
        h.pool.assign(h.now, "p2", "w1", 10 * SEC + MS)
        view = h.pool.worker_assignments("w1", 10)  # its epoch is p2's assignment's
        h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, view.epoch, "c"), ["p1", "p2"])
        h.pool.acknowledge_snapshot("w1", "s1", 1)
        h.pool.write_report(RuntimeReport("w1", "s1", 1, 1, view.epoch, ()))
        h.advance(10 * SEC - MS)
        assert h.pool.upstream_inventory("u1").available_slots == 8
        h.advance(MS)
        assert h.pool.upstream_inventory("u1").available_slots == 4

    def test_a_snapshot_binds_up_to_scan_budget_pending_tickets(self, make_pool: PoolFactory):
        """Worker 运行态: issue_snapshot reads every pending drain ticket of the worker; up to
        scan_budget of them it can, one more fails closed."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("p1", "p2", "p3", "p4")
        h.pool.open_session("w1", "s1", MIN)
        for pid in ("p1", "p2", "p3"):
            h.pool.begin_drain(pid, "w1", h.pool.assign(h.now, pid, "w1", MIN).epoch)
        epoch = h.pool.worker_assignments("w1", 10).epoch
        assert h.pool.issue_snapshot("w1", "s1", SnapshotRef(1, epoch, "c1"), []) == 3
        h.pool.begin_drain("p4", "w1", h.pool.assign(h.now, "p4", "w1", MIN).epoch)
        epoch = h.pool.worker_assignments("w1", 10).epoch
        with pytest.raises(ScanBudgetExhausted):
            h.pool.issue_snapshot("w1", "s1", SnapshotRef(2, epoch, "c2"), [])


class TestSweepBoundaries:
    def test_exactly_limit_due_is_complete(self, make_pool: PoolFactory):
        """短 TTL 清理: `more` means more than limit were due; exactly limit is done."""
        h = make_pool()
        h.stock(*[f"old{i}" for i in range(4)], ttl=MIN)
        h.stock(*[f"late{i}" for i in range(2)], ttl=MIN + MS)
        h.advance(MIN)  # the four are due at exactly their expiry, the two 1 ms later
        first = h.pool.sweep(4)
        assert (first.expired, first.more) == (4, False)
        h.advance(MS)
        second = h.pool.sweep(1)
        assert (second.expired, second.more) == (1, True)
