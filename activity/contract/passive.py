"""Contract: passive health, what clients' outcome reports say of an exit (issue 12).

``timeout`` and ``auth_failed`` count against the exit (its unique key, across lifecycles and
upstreams) in a window from the first; ``suspect_after_failures`` of them make the exit suspect
for a window, and its new lifecycles enter SUSPECT: out of extraction until a check passes. An
``ok`` report clears the count and the suspicion. And a health update that names the state it
expects applies only to a proxy in that state.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import InvalidBatch, InvalidRequest
from activity.types import (
    HealthResult,
    HealthUpdate,
    Outcome,
    OutcomeReport,
    OutcomeResult,
    PoolOptions,
    ProxyState,
    UpsertResult,
)

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
TTL = 10 * SEC


def lifecycle(h: PoolHarness, outcome: Outcome | None, *, upstream: str = "u1") -> OutcomeResult:
    """A new lifecycle of exit "key-p1": in, checked, extracted, reported on, expired."""
    assert h.upsert([h.proxy("p1", ttl=TTL)], upstream=upstream).inserted == 1
    h.mark(["p1"])
    assert ids(h.take(1)) == ["p1"]
    result = h.pool.report_outcome(OutcomeReport("c1", "p1", outcome or Outcome.OK, h.now))
    h.advance(TTL + SEC)
    return result


def comes_back(h: PoolHarness, *, upstream: str = "u1") -> UpsertResult:
    return h.upsert([h.proxy("p1", ttl=TTL)], upstream=upstream)


class TestPassiveHealth:
    def test_two_failures_make_the_exits_next_lifecycle_suspect(self, make_pool: PoolFactory):
        """Passive health: a second timeout or auth_failed on an exit within the window makes
        it suspect; its next lifecycle enters SUSPECT and is not handed out until checked."""
        h = make_pool()
        assert lifecycle(h, Outcome.TIMEOUT).suspect_until is None  # one failure: not yet
        reported_at = h.now
        second = lifecycle(h, Outcome.AUTH_FAILED)
        assert second.suspect_until == reported_at + h.options.failure_window
        back = comes_back(h)
        assert (back.inserted, back.suspect) == (1, 1)
        assert h.take(1).proxies == ()
        assert h.pool.upstream_inventory("u1").managed == 1  # SUSPECT is managed
        h.mark(["p1"])  # a check passed
        assert ids(h.take(1)) == ["p1"]

    def test_a_suspect_exit_is_suspect_from_any_upstream(self, make_pool: PoolFactory):
        """Passive health: the count is the exit's, not its upstream's (unique keys are not
        scoped by upstream)."""
        h = make_pool()
        lifecycle(h, Outcome.TIMEOUT, upstream="u1")
        lifecycle(h, Outcome.TIMEOUT, upstream="u2")
        assert comes_back(h, upstream="u3").suspect == 1

    def test_an_ok_report_clears_the_count_and_the_suspicion(self, make_pool: PoolFactory):
        """Passive health: a client for whom the exit worked clears what was held against it."""
        h = make_pool()
        lifecycle(h, Outcome.TIMEOUT)
        lifecycle(h, Outcome.OK)
        assert lifecycle(h, Outcome.TIMEOUT).suspect_until is None  # counting from one again
        lifecycle(h, Outcome.TIMEOUT)
        assert lifecycle(h, Outcome.OK).suspect_until is None
        assert comes_back(h).suspect == 0

    def test_failures_a_window_apart_do_not_add_up(self, make_pool: PoolFactory):
        """Passive health: the window runs from the first failure; a later one starts anew."""
        h = make_pool(options=PoolOptions(failure_window=MIN))
        lifecycle(h, Outcome.TIMEOUT)
        h.advance(MIN)
        assert lifecycle(h, Outcome.TIMEOUT).suspect_until is None
        assert comes_back(h).suspect == 0

    def test_the_suspicion_ends_after_its_window(self, make_pool: PoolFactory):
        """Passive health: suspect for failure_window after the failure that made it so."""
        h = make_pool(options=PoolOptions(failure_window=MIN))
        lifecycle(h, Outcome.TIMEOUT)
        lifecycle(h, Outcome.TIMEOUT)
        h.advance(MIN - (TTL + SEC) + SEC)  # a minute and a second after the second failure
        assert comes_back(h).suspect == 0
        assert h.pool.sweep(100).quarantines == 2  # the count and the suspicion, both ended

    def test_bans_do_not_count_and_replays_count_once(self, make_pool: PoolFactory):
        """Passive health: banned quarantines instead; a replayed report is not a failure."""
        h = make_pool(options=PoolOptions(failure_window=timedelta(hours=2)))
        h.upsert([h.proxy("p1", ttl=TTL)])
        h.mark(["p1"])
        h.take(1)
        timeout = OutcomeReport("c1", "p1", Outcome.TIMEOUT, h.now)
        h.pool.report_outcome(timeout)
        assert h.pool.report_outcome(timeout).replayed is True
        h.advance(TTL + SEC)
        h.upsert([h.proxy("p1", ttl=TTL)])
        h.mark(["p1"])
        h.take(1)
        ban = OutcomeReport("c1", "p1", Outcome.BANNED, h.now, quarantine=timedelta(0))
        assert h.pool.report_outcome(ban).suspect_until is None
        h.advance(TTL + SEC)
        assert comes_back(h).suspect == 0

    @pytest.mark.parametrize(("after", "suspect"), [(1, 1), (0, 0)])
    def test_the_threshold_is_an_option(self, make_pool: PoolFactory, after: int, suspect: int):
        """Passive health: one failure suffices at 1; at 0 reports never make an exit suspect."""
        h = make_pool(options=PoolOptions(suspect_after_failures=after))
        result = lifecycle(h, Outcome.AUTH_FAILED)
        assert (result.suspect_until is not None) == bool(suspect)
        assert comes_back(h).suspect == suspect

    def test_an_update_that_expects_a_state_applies_only_to_a_proxy_in_it(
        self, make_pool: PoolFactory
    ):
        """Health: ``expected`` makes an update conditional (a trusted provider's AVAILABLE
        never overrides a suspicion); a mismatch is counted ignored and changes nothing."""
        h = make_pool(options=PoolOptions(suspect_after_failures=1))
        lifecycle(h, Outcome.TIMEOUT)
        assert comes_back(h).suspect == 1
        h.upsert([h.proxy("p2")])
        trusted = [
            HealthUpdate(pid, ProxyState.AVAILABLE, h.now, expected=ProxyState.FETCHED)
            for pid in ("p1", "p2")
        ]
        assert h.pool.apply_health(trusted) == HealthResult(applied=1, ignored=1)
        assert ids(h.take(2)) == ["p2"]


class TestPassiveHealthInput:
    @pytest.mark.parametrize(
        "options",
        [
            {"suspect_after_failures": -1},
            {"suspect_after_failures": 1_001},
            {"suspect_after_failures": True},
            {"failure_window": timedelta(0)},
            {"failure_window": timedelta(days=8)},  # past max_quarantine
        ],
    )
    def test_bad_options_are_refused(self, options: dict[str, object]):
        with pytest.raises(InvalidRequest):
            PoolOptions(**options)  # type: ignore[arg-type]

    def test_an_expected_state_must_be_a_state(self, make_pool: PoolFactory):
        h = make_pool()
        h.upsert([h.proxy("p1")])
        bad = HealthUpdate("p1", ProxyState.AVAILABLE, h.now, expected="fetched")  # type: ignore[arg-type]
        with pytest.raises(InvalidBatch):
            h.pool.apply_health([bad])
