"""The ownership manager's tick (activity/ownership_manager.py) on both pools: it assigns,
renews, drains and releases in the ADR's order, within each worker's share and each upstream's
gateway share, and never releases a proxy its worker still uses."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.errors import InvalidBatch, ScanBudgetExhausted
from activity.ownership_manager import GroupConfig, ManagerPolicy, OwnershipManager
from activity.types import (
    PoolOptions,
    ProxyState,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)


def group(target, *workers, upstreams=("u1",), name="g1"):
    return GroupConfig(name, target, tuple(upstreams), frozenset(workers))


def manager(h, **policy):
    return OwnershipManager(h.pool, h.clock, ManagerPolicy(**policy))


def held(h, worker):
    return sorted(h.pool.worker_assignments(worker, 100).held)


def live(h, *workers):
    for w in workers:
        h.pool.open_session(w, f"s-{w}", 10 * MIN)


def acked_snapshot(h, worker):
    """The worker's current holdings issued and ACKed as a complete snapshot."""
    view = h.pool.worker_assignments(worker, 100)
    ref = SnapshotRef(h.serial(), view.epoch, f"sum-{h.serial()}")
    h.pool.issue_snapshot(worker, f"s-{worker}", ref, [a.proxy_id for a in view.assignments])
    h.pool.acknowledge_snapshot(worker, f"s-{worker}", ref.version)
    return ref


def report(h, worker, ref, sequence, **counts):
    entries = tuple(RuntimeEntry(pid, epoch, active, 0) for pid, (epoch, active) in counts.items())
    h.pool.write_report(
        RuntimeReport(worker, f"s-{worker}", sequence, ref.version, ref.epoch, entries)
    )


def test_a_live_worker_is_topped_up_to_its_share_the_longest_usable_first(make_pool):
    h = make_pool()
    h.stock("short", ttl=3 * MIN)
    h.stock("long-a", "long-b", "long-c", ttl=9 * MIN)  # max 4 each
    live(h, "w1")
    tally = manager(h).tick([group(10, "w1")], {}).groups["g1"]
    assert tally.assigned == 3  # 12 connections cover 10
    assert held(h, "w1") == ["long-a", "long-b", "long-c"]
    assert manager(h).tick([group(10, "w1")], {}).groups["g1"].assigned == 0  # nothing short


def test_a_groups_capacity_is_spread_over_its_live_workers_only(make_pool):
    h = make_pool()
    h.stock(*[f"p{i}" for i in range(8)])
    live(h, "w1", "w2")  # w3 has no session
    manager(h).tick([group(16, "w1", "w2", "w3")], {})
    assert (len(held(h, "w1")), len(held(h, "w2")), len(held(h, "w3"))) == (2, 2, 0)


def test_an_upstreams_gateway_share_leaves_the_rest_to_clients(make_pool):
    h = make_pool()
    h.stock(*[f"p{i}" for i in range(10)])
    live(h, "w1")
    manager(h).tick([group(100, "w1")], {"u1": 0.3})
    assert len(held(h, "w1")) == 3
    assert h.take(10).returned == 7


def test_an_upstream_over_the_scan_budget_still_gets_its_room(make_pool):
    """The room counts the upstream's extractable proxies without reading them: an upstream
    with more live proxies than one scan covers (which upstream_inventory refuses) is still
    assigned to a live worker, within its gateway share."""
    h = make_pool(options=PoolOptions(scan_budget=3))
    h.stock(*[f"p{i}" for i in range(8)], ttl=9 * MIN)
    live(h, "w1")
    with pytest.raises(ScanBudgetExhausted):
        h.pool.upstream_inventory("u1")
    tally = manager(h, candidates_page=3).tick([group(100, "w1")], {"u1": 0.25}).groups["g1"]
    assert tally.assigned == 2  # a quarter of 8
    assert len(held(h, "w1")) == 2
    assert h.pool.extractable("u1") == 6


def test_leases_about_to_lapse_are_renewed(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h, lease_ttl=MIN, renew_margin=30 * SEC)
    mgr.tick([group(4, "w1")], {})
    before = h.pool.get("p1")
    h.advance(40 * SEC)  # 20 s of the 60 s lease left: within the 30 s margin
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].renewed == 1
    assert h.pool.get("p1").lease_expires_at > before.lease_expires_at


def test_a_workers_leases_are_renewed_together_so_its_snapshot_changes_once(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h, lease_ttl=MIN, renew_margin=30 * SEC)
    mgr.tick([group(4, "w1")], {})
    h.advance(20 * SEC)
    h.stock("p2", ttl=9 * MIN)
    assert mgr.tick([group(8, "w1")], {}).groups["g1"].assigned == 1  # 20 s after p1
    h.advance(5 * SEC)  # p1: 35 s left, p2: 55 s; neither within the 30 s margin
    assert mgr.tick([group(8, "w1")], {}).groups["g1"].renewed == 0
    h.advance(10 * SEC)  # p1 is due (25 s left); p2 is not (45 s), and is renewed with it
    assert mgr.tick([group(8, "w1")], {}).groups["g1"].renewed == 2
    leases = {h.pool.get(p).lease_expires_at for p in ("p1", "p2")}
    assert len(leases) == 1


def test_a_proxy_near_its_end_or_out_of_health_is_drained(make_pool):
    h = make_pool()
    h.stock("ending", ttl=2 * MIN)
    h.stock("sick", "fine", ttl=9 * MIN)
    live(h, "w1")
    for pid in ("ending", "sick", "fine"):
        h.pool.assign(h.now, pid, "w1", 3 * MIN)
    h.mark(["sick"], ProxyState.SUSPECT)
    h.advance(95 * SEC)  # "ending" has under 30 s of use left
    tally = manager(h).tick([group(4, "w1")], {}).groups["g1"]
    assert tally.drains_begun == 2
    assert held(h, "w1") == ["fine"]
    assert {t.proxy_id for t in h.pool.drain_tickets("w1", 10)} == {"ending", "sick"}


def test_a_drained_proxy_in_use_is_kept_until_its_worker_reports_it_idle(make_pool):
    """ADR order: drain, an excluding snapshot ACKed, the worker's counts at zero, release."""
    h = make_pool()
    h.stock("p1", "p2", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h)
    mgr.tick([group(8, "w1")], {})
    epochs = {a.proxy_id: a.epoch for a in h.pool.worker_assignments("w1", 10).assignments}
    ref = acked_snapshot(h, "w1")
    report(h, "w1", ref, 1, p1=(epochs["p1"], 3), p2=(epochs["p2"], 0))
    # The operator halves the group: one proxy (the soonest usable: p1) drains.
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].drains_begun == 1
    assert held(h, "w1") == ["p2"]
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].released == 0  # no excluding ACK yet
    ref = acked_snapshot(h, "w1")
    report(h, "w1", ref, 2, p1=(epochs["p1"], 3), p2=(epochs["p2"], 1))
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].released == 0  # p1 still in use
    assert h.pool.get("p1") is not None
    report(h, "w1", ref, 3, p2=(epochs["p2"], 1))  # p1 idle: the report itself releases it
    assert h.pool.get("p1") is None
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].assigned == 0  # p2 covers 4


def test_a_worker_whose_session_ended_has_its_proxies_drained(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    h.pool.assign(h.now, "p1", "w1", MIN)  # w1 never opened a session
    tally = manager(h).tick([group(4, "w1")], {}).groups["g1"]
    assert tally.drains_begun == 1 and tally.assigned == 0
    assert held(h, "w1") == []


def test_lapsed_leases_are_expired_first_in_bounded_batches(make_pool):
    h = make_pool()
    h.stock(*[f"p{i}" for i in range(5)], ttl=9 * MIN)
    for i in range(5):
        h.pool.assign(h.now, f"p{i}", "w1", 10 * SEC)
    h.advance(11 * SEC)
    result = manager(h, expire_batch=2, expire_batches=2).tick([], {})
    assert (result.expired, result.cut_short) == (4, True)
    assert manager(h, expire_batch=2).tick([], {}).expired == 1


def test_a_tick_whose_lease_is_lost_stops_between_phases(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    live(h, "w1")
    result = manager(h).tick([group(4, "w1")], {}, keep_going=lambda: False)
    assert result.cut_short and result.groups["g1"].assigned == 0
    assert held(h, "w1") == []


def test_assigns_per_tick_are_bounded(make_pool):
    h = make_pool()
    h.stock(*[f"p{i}" for i in range(6)], ttl=9 * MIN)
    live(h, "w1")
    result = manager(h, max_assigns=2).tick([group(24, "w1")], {})
    assert (result.groups["g1"].assigned, result.cut_short) == (2, True)
    assert manager(h).tick([group(24, "w1")], {}).groups["g1"].assigned == 4


def test_a_worker_over_its_share_drains_only_what_it_does_without(make_pool):
    """Drained soonest-usable first, and never below the share: else each tick would drain
    one proxy and the top-up assign another."""
    h = make_pool()
    h.stock("soon", ttl=4 * MIN)
    h.stock("mid", ttl=6 * MIN)
    h.stock("late", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h)
    assert mgr.tick([group(12, "w1")], {}).groups["g1"].assigned == 3
    tally = mgr.tick([group(5, "w1")], {}).groups["g1"]  # 8 covers 5; 4 would not
    assert (tally.drains_begun, tally.assigned) == (1, 0)
    assert held(h, "w1") == ["late", "mid"]
    again = mgr.tick([group(5, "w1")], {}).groups["g1"]
    assert (again.drains_begun, again.assigned) == (0, 0)


def test_the_manager_releases_a_drained_proxy_its_worker_last_reported_idle(make_pool):
    h = make_pool()
    h.stock("p1", "p2", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h)
    mgr.tick([group(8, "w1")], {})
    epochs = {a.proxy_id: a.epoch for a in h.pool.worker_assignments("w1", 10).assignments}
    ref = acked_snapshot(h, "w1")
    report(h, "w1", ref, 1, p2=(epochs["p2"], 1))  # p1 idle (absent), p2 busy
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].drains_begun == 1
    acked_snapshot(h, "w1")  # excludes p1; no report since
    tally = mgr.tick([group(4, "w1")], {}).groups["g1"]
    assert tally.released == 1
    assert h.pool.get("p1") is None and held(h, "w1") == ["p2"]
    assert h.take(5).returned == 1  # p1 is back in the pool for clients


class CountingPool:
    """The pool, counting the holdings reads a manager makes."""

    def __init__(self, pool):
        self._pool, self.reads = pool, 0

    def worker_assignments(self, *args):
        self.reads += 1
        return self._pool.worker_assignments(*args)

    def __getattr__(self, name):
        return getattr(self._pool, name)


def test_a_workers_holdings_are_read_again_only_when_they_changed_or_aged(make_pool):
    h = make_pool()
    h.stock("p1", "p2", "p3", ttl=9 * MIN)
    live(h, "w1", "w2")
    pool = CountingPool(h.pool)
    mgr = OwnershipManager(pool, h.clock, ManagerPolicy(view_max_age=10 * SEC))
    groups = [group(4, "w1"), group(4, "w2", name="g2")]
    mgr.tick(groups, {})  # reads both, assigns to both (their revisions move)
    assert pool.reads == 2
    mgr.tick(groups, {})  # both changed in the last tick: read again
    assert pool.reads == 4
    mgr.tick(groups, {})  # nothing changed: the kept reads serve
    assert pool.reads == 4
    (w1_proxy,) = held(h, "w1")
    h.pool.begin_drain(w1_proxy, "w1", h.pool.get(w1_proxy).epoch)  # an operator's drain
    tally = mgr.tick(groups, {}).groups["g1"]
    assert pool.reads == 5  # w1's revision moved; w2's did not
    assert tally.assigned == 1  # w1 topped up at once from what is left
    h.advance(10 * SEC)  # every kept read is now as old as the policy allows
    mgr.tick(groups, {})
    assert pool.reads == 7


def test_a_held_proxys_health_is_acted_on_within_the_view_age(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h, view_max_age=10 * SEC)
    mgr.tick([group(4, "w1")], {})  # assigns p1 (its revision moves)
    mgr.tick([group(4, "w1")], {})  # reads it again, and keeps that read
    h.mark(["p1"], ProxyState.SUSPECT)  # moves no revision
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].drains_begun == 0
    h.advance(10 * SEC)
    assert mgr.tick([group(4, "w1")], {}).groups["g1"].drains_begun == 1
    # A new manager (another process) reads everything at once.
    h.stock("p2", ttl=9 * MIN)
    mgr.tick([group(4, "w1")], {})
    h.mark(["p2"], ProxyState.SUSPECT)
    assert manager(h).tick([group(4, "w1")], {}).groups["g1"].drains_begun == 1


def test_aged_holdings_are_read_again_a_bounded_few_a_tick_the_oldest_first(make_pool):
    h = make_pool()
    workers = ("w1", "w2", "w3")
    for w in workers:
        h.stock(f"{w}-p", ttl=9 * MIN)
    live(h, *workers)
    pool = CountingPool(h.pool)
    mgr = OwnershipManager(pool, h.clock, ManagerPolicy(view_max_age=10 * SEC, aged_rereads=1))
    groups = [group(4, w, name=f"g-{w}") for w in workers]
    mgr.tick(groups, {})
    mgr.tick(groups, {})  # the assigns moved each revision: read again, then kept
    settled = pool.reads
    h.advance(11 * SEC)
    mgr.tick(groups, {})
    assert pool.reads == settled + 1
    oldest_left = sorted(mgr._kept.items(), key=lambda kv: kv[1].read_at)[0][0]
    mgr.tick(groups, {})
    assert pool.reads == settled + 2 and mgr._kept[oldest_left].read_at == h.now
    mgr.tick(groups, {})
    mgr.tick(groups, {})
    assert pool.reads == settled + 3  # each read once, none past its turn


def test_workers_no_longer_configured_are_forgotten(make_pool):
    h = make_pool()
    h.stock("p1", ttl=9 * MIN)
    live(h, "w1")
    mgr = manager(h)
    mgr.tick([group(4, "w1")], {})
    assert set(mgr._kept) == {"w1"}
    mgr.tick([group(4, "w2")], {})
    assert set(mgr._kept) == {"w2"}


def test_renewals_per_tick_are_bounded_whole_workers_the_soonest_first(make_pool):
    h = make_pool()
    live(h, "w1", "w2", "w3")
    for worker in ("w3", "w1", "w2"):  # w3's leases end soonest, then w1's, then w2's
        pids = h.stock(f"{worker}-a", f"{worker}-b", ttl=9 * MIN)
        for pid in pids:
            h.pool.assign(h.now, pid, worker, MIN)
        h.advance(SEC)
    mgr = manager(h, lease_ttl=MIN, renew_margin=30 * SEC, max_renews=3)
    groups = [group(8, "w1"), group(8, "w2", name="g2"), group(8, "w3", name="g3")]
    h.advance(40 * SEC)  # every lease within the margin
    report = mgr.tick(groups, {})
    renewed = {g: t.renewed for g, t in report.groups.items()}
    assert renewed == {"g3": 2, "g1": 2, "g2": 0} and report.cut_short
    report = mgr.tick(groups, {})
    assert report.groups["g2"].renewed == 2 and not report.cut_short


def test_a_worker_holding_more_than_one_quarantine_call_takes_is_read_in_several(make_pool):
    """The bans of a worker's held proxies are asked in calls the pool takes (at most its
    max_quarantine_batch IDs each): one worker holding more never stops every worker's tick."""
    h = make_pool(options=PoolOptions(max_quarantine_batch=2))
    h.stock(*[f"p{i}" for i in range(5)], ttl=9 * MIN)
    live(h, "w1")
    policy = {"quarantine_batch": 2}
    assert manager(h, **policy).tick([group(20, "w1")], {}).groups["g1"].assigned == 5
    acked_snapshot(h, "w1")
    h.clock.advance(SEC)
    # The next tick reads the five held proxies' bans (in three calls) and keeps them all.
    assert manager(h, **policy).tick([group(20, "w1")], {}).groups["g1"].drains_begun == 0
    assert held(h, "w1") == [f"p{i}" for i in range(5)]
    with pytest.raises(InvalidBatch, match="more than 2 entries"):  # what one call would meet
        manager(h, quarantine_batch=5).tick([group(20, "w1")], {})


def test_a_quarantine_batch_under_one_is_refused():
    with pytest.raises(ValueError, match="quarantine_batch must be at least 1"):
        ManagerPolicy(quarantine_batch=0)
