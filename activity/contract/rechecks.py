"""Contract: which idle proxies are due for a recheck (port RecheckQueue, ``take_due_checks``).

The cadence of docs/activity-pool.md ("Rechecks"): check effort follows remaining lifetime; a
proxy with little life left, or one a client or a gateway worker holds, is never probed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness
from activity.errors import InvalidRequest
from activity.types import DueChecks, PoolOptions, ProxyState, RecheckPolicy

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
POLICY = RecheckPolicy()  # 30 s floor, a tenth of what is left, nothing under 2 minutes left


def due(
    h: PoolHarness, *, upstream: str = "u1", policy: RecheckPolicy = POLICY, limit: int = 100
) -> DueChecks:
    return h.pool.take_due_checks(upstream, h.now, policy, limit)


def due_ids(h: PoolHarness, **kwargs: object) -> list[str]:
    return [c.proxy_id for c in due(h, **kwargs).checks]  # type: ignore[arg-type]


class TestRechecks:
    def test_an_available_proxy_is_due_a_tenth_of_its_remaining_life_after_its_check(
        self, make_pool: PoolFactory
    ):
        """Rechecks: AVAILABLE is due max(min_interval, remaining / lifetime_fraction) after
        its last check; before that it is not listed."""
        h = make_pool()
        # 1,105 s TTL, 5 s margin: 1,100 s usable. After 100 s, 1,000 s remain, a tenth of
        # which is exactly what has passed: due (the bound is inclusive); a second earlier,
        # 99 s against 100.1 s, not yet.
        h.stock("p1", ttl=1_105 * SEC)
        h.advance(99 * SEC)
        assert due_ids(h) == []
        h.advance(SEC)
        assert due_ids(h) == ["p1"]

    def test_the_floor_holds_for_proxies_with_little_life_left(self, make_pool: PoolFactory):
        """Rechecks: never sooner than min_interval after the last check."""
        h = make_pool()
        h.stock("p1", ttl=4 * MIN)  # a tenth of what is left is under 30 s
        h.advance(29 * SEC)
        assert due_ids(h) == []
        h.advance(SEC)
        assert due_ids(h) == ["p1"]

    def test_a_proxy_with_less_than_min_remaining_left_is_never_rechecked(
        self, make_pool: PoolFactory
    ):
        """Rechecks: under min_remaining of usable life, outcome reports tell, not probes."""
        h = make_pool()
        h.stock("short", ttl=110 * SEC)
        h.stock("long", ttl=10 * MIN)
        h.advance(60 * SEC)
        assert due_ids(h) == ["long"]
        h.advance(8 * MIN)  # "long" has 55 s left: no longer worth a probe either
        assert due_ids(h) == []

    def test_a_suspect_proxy_is_due_min_interval_after_its_check(self, make_pool: PoolFactory):
        """Rechecks: a SUSPECT proxy's second check decides, min_interval after its first."""
        h = make_pool()
        h.stock("p1", ttl=time_for_long_interval())
        h.mark(["p1"], ProxyState.SUSPECT)
        h.advance(29 * SEC)
        assert due_ids(h) == []
        h.advance(SEC)
        [check] = due(h).checks
        assert check.state is ProxyState.SUSPECT

    @pytest.mark.parametrize("state", [ProxyState.UNHEALTHY, ProxyState.CHECKING])
    def test_other_states_are_never_listed(self, make_pool: PoolFactory, state: ProxyState):
        """Rechecks: only AVAILABLE, SUSPECT and never-checked proxies are handed out;
        UNHEALTHY ones wait for their expiry."""
        h = make_pool()
        h.stock("p1", ttl=time_for_long_interval())
        h.mark(["p1"], state)
        h.advance(time_for_long_interval() / 2)
        assert due_ids(h) == []
        assert h.index_size("checks", "u1") == 0  # its entry went when it was examined

    def test_a_proxy_whose_intake_check_never_came_is_handed_out(self, make_pool: PoolFactory):
        """Rechecks: a fetched proxy not checked within min_interval (its filler died) is due:
        it needs its first check; until then the filler's own check is not doubled."""
        h = make_pool()
        h.upsert([h.proxy("fetched", ttl=10 * MIN)])
        h.advance(29 * SEC)
        assert due_ids(h) == []
        h.advance(SEC)
        [check] = due(h).checks
        assert (check.proxy_id, check.state, check.checked_at) == (
            "fetched",
            ProxyState.FETCHED,
            None,
        )
        h.mark(["fetched"])  # its check: now an AVAILABLE proxy on the usual cadence
        h.advance(45 * SEC)
        assert due_ids(h) == []

    def test_a_trusted_policy_hands_out_only_unchecked_and_suspect_proxies(
        self, make_pool: PoolFactory
    ):
        """Rechecks: with ``available=False`` AVAILABLE proxies are never probed (a trusted
        provider's); SUSPECT and unchecked ones still are."""
        h = make_pool()
        h.stock("ok", "bad", ttl=time_for_long_interval())
        h.mark(["bad"], ProxyState.SUSPECT)
        h.upsert([h.proxy("new", ttl=time_for_long_interval())])
        h.advance(5 * MIN)
        trusted = RecheckPolicy(available=False)
        assert sorted(due_ids(h, policy=trusted)) == ["bad", "new"]
        h.mark(["bad", "new"])  # both checked, both passed
        h.advance(5 * MIN)
        assert due_ids(h, policy=trusted) == []  # AVAILABLE ones wait out their lives

    def test_proxies_not_due_never_hide_due_ones_behind_them(self, make_pool: PoolFactory):
        """Rechecks: a member examined and not due is re-scored to when it may be due, so a
        full budget of long-lived proxies checked earlier cannot keep a due one out for good."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("a", "b", "c", ttl=24 * 60 * MIN)  # due again in about 2.2 hours
        h.advance(MIN)
        h.stock("s", ttl=24 * 60 * MIN)
        h.mark(["s"], ProxyState.SUSPECT)
        h.advance(31 * SEC)  # t0 + 91 s
        assert due(h) == DueChecks((), complete=False)  # a, b and c examined, moved on
        assert due_ids(h) == ["s"]
        h.mark(["s"])  # its second check passed: due again about 2.2 hours from now
        # a, b and c are due from t0 + 7,854 s (86,395 s usable, an eleventh of it), s from
        # t0 + 7,945 s; at t0 + 7,900 s, s is examined first (oldest score), not due and moved
        # on, and the due ones behind it come out over two calls.
        h.advance(7_809 * SEC)
        first = due(h)
        assert ([c.proxy_id for c in first.checks], first.complete) == (["a", "b"], False)
        assert due_ids(h) == ["c"]

    def test_a_scan_of_exactly_the_budget_is_complete(self, make_pool: PoolFactory):
        """Rechecks: ``complete`` is false only when members were left unexamined."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("a", "b", "c", ttl=10 * MIN)
        h.advance(2 * MIN)
        result = due(h)
        assert [c.proxy_id for c in result.checks] == ["a", "b", "c"]
        assert result.complete is True  # three members, a budget of three: all were seen

    def test_an_extracted_proxy_is_never_listed(self, make_pool: PoolFactory):
        """Rechecks: a proxy a client holds is never probed."""
        h = make_pool()
        h.stock("p1", "p2", ttl=10 * MIN)
        assert [p.proxy_id for p in h.take(1).proxies] == ["p1"]
        h.advance(2 * MIN)
        assert due_ids(h) == ["p2"]

    def test_an_assigned_proxy_is_listed_again_once_its_lease_is_gone(self, make_pool: PoolFactory):
        """Rechecks: a proxy a gateway worker holds is never probed; released, it is."""
        h = make_pool()
        h.stock("p1", ttl=10 * MIN)
        h.pool.assign(h.now, "p1", "w1", MIN)
        h.advance(2 * MIN)
        assert due_ids(h) == []
        assert [a.proxy_id for a in h.pool.expire(h.now, 10)] == ["p1"]
        assert due_ids(h) == ["p1"]

    def test_a_new_check_restarts_the_interval(self, make_pool: PoolFactory):
        """Rechecks: the interval counts from the last check applied."""
        h = make_pool()
        h.stock("p1", ttl=10 * MIN)
        h.advance(2 * MIN)
        assert due_ids(h) == ["p1"]
        h.mark(["p1"])
        assert due_ids(h) == []
        h.advance(45 * SEC)
        assert due_ids(h) == ["p1"]

    def test_oldest_check_first_other_upstreams_left_out(self, make_pool: PoolFactory):
        """Rechecks: one upstream's proxies, by last check then proxy ID."""
        h = make_pool()
        h.stock("b", "a", ttl=10 * MIN)
        h.advance(10 * SEC)
        h.stock("c", ttl=10 * MIN)
        h.stock("x", upstream="u2", ttl=10 * MIN)
        h.advance(2 * MIN)
        assert due_ids(h) == ["a", "b", "c"]
        assert due_ids(h, upstream="u2") == ["x"]
        assert due_ids(h, upstream="none") == []

    def test_limit_cuts_and_says_so(self, make_pool: PoolFactory):
        """Rechecks: ``complete`` is false when the limit left candidates unexamined."""
        h = make_pool()
        h.stock("a", "b", "c", ttl=10 * MIN)
        h.advance(2 * MIN)
        first = due(h, limit=2)
        assert [c.proxy_id for c in first.checks] == ["a", "b"]
        assert first.complete is False
        last = due(h, limit=1)  # a and b were taken: c is the last candidate
        assert [c.proxy_id for c in last.checks] == ["c"]
        assert last.complete is True

    def test_a_scan_over_the_budget_is_incomplete_not_empty_handed(self, make_pool: PoolFactory):
        """Rechecks: past ``scan_budget`` candidates, the answer says it is incomplete."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("a", "b", "c", "d", ttl=10 * MIN)
        h.stock("e", ttl=2 * MIN + 6 * SEC)  # soon under min_remaining: never due
        h.advance(2 * SEC)
        # Checked 2 s ago, each is a candidate (min_interval 1 s), none is due (its interval
        # is all of what is left): the first 3 are examined, then the budget is spent.
        policy = RecheckPolicy(min_interval=SEC, lifetime_fraction=1)
        result = due(h, policy=policy)
        assert result == DueChecks((), complete=False)
        assert due(h, policy=RecheckPolicy(min_interval=3 * SEC)) == DueChecks((), True)

    def test_a_check_holds_what_a_probe_needs_and_no_password_in_its_repr(
        self, make_pool: PoolFactory
    ):
        """Rechecks: each due proxy comes with its address, login, state and last check."""
        h = make_pool()
        secret = h.credentials.put("user-1", "s3cret-pass")
        proxy = h.proxy("p1", ttl=10 * MIN, protocol="socks5", secret_ref=secret.ref)
        h.upsert([proxy])
        checked = h.now
        h.mark(["p1"])
        h.advance(2 * MIN)
        [check] = due(h).checks
        assert (check.proxy_id, check.upstream_id, check.state) == (
            "p1",
            "u1",
            ProxyState.AVAILABLE,
        )
        assert (check.host, check.port, check.protocol) == (proxy.host, proxy.port, "socks5")
        assert (check.username, check.password) == ("user-1", "s3cret-pass")
        assert check.checked_at == checked
        assert check.usable_until == proxy.expires_at - 5 * SEC
        assert "s3cret" not in repr(check)

    def test_past_usable_until_is_never_listed(self, make_pool: PoolFactory):
        """Rechecks: a proxy extraction would no longer serve is not worth a probe."""
        h = make_pool()
        h.stock("p1", ttl=3 * MIN)
        h.advance(3 * MIN)
        assert due_ids(h, policy=RecheckPolicy(min_remaining=timedelta(0))) == []

    def test_a_taken_proxy_is_not_handed_out_again_for_min_interval(self, make_pool: PoolFactory):
        """Rechecks: taking holds a proxy like a lease: a second checker is not handed it; when
        no check came back within min_interval (its checker died), it is due again."""
        h = make_pool()
        h.stock("p1", ttl=10 * MIN)
        h.advance(2 * MIN)
        assert due_ids(h) == ["p1"]
        assert due_ids(h) == []
        h.advance(29 * SEC)
        assert due_ids(h) == []
        h.advance(SEC)
        assert due_ids(h) == ["p1"]
        assert [p.proxy_id for p in h.take(1).proxies] == ["p1"]  # still extractable

    def test_extracted_entries_cost_the_budget_once(self, make_pool: PoolFactory):
        """Rechecks: what extract leaves in the index (it does not pay to remove it) is
        removed by the first listing that examines it, within that listing's budget."""
        h = make_pool(options=PoolOptions(scan_budget=3))
        h.stock("p1", "p2", "p3", "p4", ttl=10 * MIN)
        assert len(h.take(3).proxies) == 3
        h.advance(2 * MIN)
        assert due(h) == DueChecks((), complete=False)
        assert due_ids(h) == ["p4"]
        assert h.index_size("checks", "u1") == 1

    def test_an_extracted_proxy_leaves_the_index_with_its_record(self, make_pool: PoolFactory):
        """Rechecks: what extract leaves goes with the record, also in an upstream nobody
        rechecks (a trusted provider's): the index stays bounded by the live records."""
        h = make_pool()
        h.stock("p1", "p2", ttl=10 * SEC)
        h.take(1)
        assert h.index_size("checks", "u1") == 2  # p2, and what extract left of p1
        h.advance(11 * SEC)
        assert h.pool.sweep(10).expired == 2
        assert h.index_size("checks", "u1") == 0


def time_for_long_interval() -> timedelta:
    """A TTL whose AVAILABLE interval (a tenth of it) is well past the 30 s floor."""
    return 30 * MIN


class TestRecheckInput:
    @pytest.mark.parametrize(
        ("upstream", "now", "policy", "limit"),
        [
            ("bad id", None, POLICY, 10),
            ("u1", datetime(2026, 1, 1), POLICY, 10),  # noqa: DTZ001 - naive on purpose
            ("u1", None, "30s", 10),
            ("u1", None, RecheckPolicy(min_interval=timedelta(0)), 10),
            ("u1", None, RecheckPolicy(lifetime_fraction=0), 10),
            ("u1", None, RecheckPolicy(lifetime_fraction=1_001), 10),
            ("u1", None, RecheckPolicy(min_remaining=-SEC), 10),
            ("u1", None, POLICY, 0),
            ("u1", None, POLICY, 1_001),
            ("u1", None, POLICY, True),
        ],
    )
    def test_bad_input_is_refused(self, make_pool: PoolFactory, upstream, now, policy, limit):
        """Rechecks: bad input gets InvalidRequest (limit: 1 to max_health_batch)."""
        h = make_pool()
        with pytest.raises(InvalidRequest):
            h.pool.take_due_checks(upstream, now or h.now, policy, limit)
