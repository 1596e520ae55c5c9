"""The fetch scheduler's contract, run against every implementation (both sides of every edge).

A test suite plugs an implementation in with a fixture ``make_scheduler`` returning a fresh,
empty :class:`~activity.scheduler.ports.FetchScheduler`, and imports the ``Test*`` classes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from activity.errors import InvalidRequest, LeaseLost
from activity.scheduler.ports import FetchScheduler
from activity.scheduler.types import (
    MAX_CALLS_PER_MINUTE,
    MAX_CALLS_PER_SECOND,
    MAX_CONCURRENCY,
    MAX_LEASE,
    AccountLimits,
    Claim,
    FetchStatus,
    NoClaim,
    Refusal,
    RequestOutcome,
)

SchedulerFactory = Callable[[], FetchScheduler]
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)
LEASE = timedelta(seconds=30)
ONE = AccountLimits(concurrency=1)
MANY = AccountLimits(concurrency=8)


@pytest.fixture
def sched(make_scheduler: SchedulerFactory) -> FetchScheduler:
    return make_scheduler()


def claimed(result: Claim | NoClaim) -> Claim:
    assert isinstance(result, Claim), result
    return result


def refused(result: Claim | NoClaim, reason: Refusal) -> NoClaim:
    assert isinstance(result, NoClaim), result
    assert result.reason is reason, result
    return result


class TestCadence:
    def test_nothing_scheduled_is_nothing_due_with_no_time_to_wait(self, sched):
        assert sched.claim(T0, "a1", ONE, LEASE) == NoClaim(Refusal.NOTHING_DUE, None)

    def test_an_upstream_is_due_at_its_due_time_not_a_millisecond_before(self, sched):
        assert sched.schedule("a1", "u1", T0) is True
        before = refused(sched.claim(T0 - MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        assert before.retry_after == MS
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        assert (claim.account_id, claim.upstream_id, claim.requested) == ("a1", "u1", False)
        assert claim.lease_expires_at == T0 + LEASE and claim.token

    def test_the_upstream_due_longest_comes_first_ties_by_id(self, sched):
        sched.schedule("a1", "u3", T0)
        sched.schedule("a1", "u2", T0 - MS)
        sched.schedule("a1", "u1", T0)
        order = [claimed(sched.claim(T0, "a1", MANY, LEASE)).upstream_id for _ in range(3)]
        assert order == ["u2", "u1", "u3"]
        assert refused(sched.claim(T0, "a1", MANY, LEASE), Refusal.NOTHING_DUE).retry_after == LEASE

    def test_scheduling_again_keeps_the_first_due_time(self, sched):
        assert sched.schedule("a1", "u1", T0 + LEASE) is True
        assert sched.schedule("a1", "u1", T0) is False
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_finish_sets_the_next_due_time(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        sched.finish(T0 + MS, claim, T0 + timedelta(minutes=1))
        wait = refused(sched.claim(T0 + MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE).retry_after
        assert wait == timedelta(minutes=1) - MS
        assert claimed(sched.claim(T0 + timedelta(minutes=1), "a1", ONE, LEASE)).upstream_id == "u1"

    def test_a_forgotten_upstream_is_never_claimed_and_its_running_fetch_schedules_nothing(
        self, sched
    ):
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))  # u1
        assert sched.forget("a1", "u1") is True and sched.forget("a1", "u1") is False
        sched.finish(T0 + MS, claim, T0)
        assert claimed(sched.claim(T0 + MS, "a1", ONE, LEASE)).upstream_id == "u2"
        refused(sched.claim(T0 + MS, "a1", MANY, LEASE), Refusal.NOTHING_DUE)

    def test_an_upstream_scheduled_again_while_its_fetch_runs_is_not_due_before_that_lease_ends(
        self, sched
    ):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", MANY, LEASE))
        sched.forget("a1", "u1")
        sched.schedule("a1", "u1", T0)
        refused(sched.claim(T0 + LEASE - MS, "a1", MANY, LEASE), Refusal.NOTHING_DUE)
        with pytest.raises(LeaseLost):
            sched.finish(T0 + LEASE, claim, T0)
        assert claimed(sched.claim(T0 + LEASE, "a1", MANY, LEASE)).upstream_id == "u1"

    def test_accounts_are_apart(self, sched):
        sched.schedule("a1", "u1", T0)
        sched.schedule("a2", "u1", T0)
        claimed(sched.claim(T0, "a1", ONE, LEASE))
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        assert claimed(sched.claim(T0, "a2", ONE, LEASE)).account_id == "a2"


class TestLeases:
    def test_one_account_never_runs_more_fetches_than_its_concurrency(self, sched):
        for n in range(3):
            sched.schedule("a1", f"u{n}", T0)
        first = claimed(sched.claim(T0, "a1", AccountLimits(concurrency=2), LEASE))
        claimed(sched.claim(T0 + MS, "a1", AccountLimits(concurrency=2), LEASE))
        full = refused(
            sched.claim(T0 + MS, "a1", AccountLimits(concurrency=2), LEASE), Refusal.CONCURRENCY
        )
        assert full.retry_after == LEASE - MS  # the first lease to end
        sched.finish(T0 + 2 * MS, first, T0 + LEASE)
        assert claimed(sched.claim(T0 + 2 * MS, "a1", AccountLimits(concurrency=2), LEASE))

    def test_nothing_due_is_told_before_a_full_account(self, sched):
        sched.schedule("a1", "u1", T0)
        claimed(sched.claim(T0, "a1", ONE, LEASE))
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_a_lease_that_ended_is_lost_and_its_upstream_claimed_again(self, sched):
        sched.schedule("a1", "u1", T0)
        lost = claimed(sched.claim(T0, "a1", ONE, LEASE))
        refused(sched.claim(T0 + LEASE - MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        again = claimed(sched.claim(T0 + LEASE, "a1", ONE, LEASE))
        assert again.upstream_id == "u1" and again.token != lost.token
        for call in (
            lambda: sched.renew(T0 + LEASE, lost, LEASE),
            lambda: sched.take_call(T0 + LEASE, lost, ONE),
            lambda: sched.finish(T0 + LEASE, lost, T0),
        ):
            with pytest.raises(LeaseLost):
                call()
        sched.finish(T0 + LEASE + MS, again, T0 + timedelta(hours=1))  # the new claim is whole

    def test_a_lease_is_current_until_the_millisecond_it_ends(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        renewed = sched.renew(T0 + LEASE - MS, claim, LEASE)
        assert renewed.lease_expires_at == T0 + 2 * LEASE - MS and renewed.token == claim.token
        refused(sched.claim(T0 + 2 * LEASE - 2 * MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        with pytest.raises(LeaseLost):
            sched.renew(T0 + 2 * LEASE - MS, claim, LEASE)

    def test_a_finished_claim_is_spent(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        sched.finish(T0, claim, T0 + LEASE)
        with pytest.raises(LeaseLost):
            sched.finish(T0, claim, T0)  # a redelivered task
        with pytest.raises(LeaseLost):
            sched.renew(T0, claim, LEASE)
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_a_made_up_token_is_not_current(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        forged = Claim("a1", "u1", "0" * 32, claim.lease_expires_at, False)
        with pytest.raises(LeaseLost):
            sched.finish(T0, forged, T0)
        sched.finish(T0, claim, T0 + LEASE)


class TestRequests:
    def test_a_requested_upstream_comes_before_the_cadence(self, sched):
        sched.schedule("a1", "u1", T0 - LEASE)
        sched.schedule("a1", "u2", T0 + LEASE)
        assert sched.request(T0, "a1", "u2", timedelta(seconds=10)) is RequestOutcome.ACCEPTED
        claim = claimed(sched.claim(T0, "a1", MANY, LEASE))
        assert (claim.upstream_id, claim.requested) == ("u2", True)
        assert claimed(sched.claim(T0, "a1", MANY, LEASE)).upstream_id == "u1"

    def test_requests_are_served_in_their_order(self, sched):
        for n in (1, 2, 3):
            sched.schedule("a1", f"u{n}", T0 + LEASE)
        for n, at in ((3, T0), (1, T0 + MS), (2, T0 + MS)):
            sched.request(at, "a1", f"u{n}", timedelta(0))
        order = [claimed(sched.claim(T0 + MS, "a1", MANY, LEASE)).upstream_id for _ in range(3)]
        assert order == ["u3", "u1", "u2"]

    def test_requests_within_the_cooldown_are_merged_and_the_next_one_at_its_end_accepted(
        self, sched
    ):
        cooldown = timedelta(seconds=10)
        sched.schedule("a1", "u1", T0 + LEASE)
        assert sched.request(T0, "a1", "u1", cooldown) is RequestOutcome.ACCEPTED
        assert sched.request(T0 + cooldown - MS, "a1", "u1", cooldown) is RequestOutcome.MERGED
        claim = claimed(sched.claim(T0 + cooldown - MS, "a1", ONE, LEASE))
        sched.finish(T0 + cooldown - MS, claim, T0 + 2 * LEASE)
        refused(sched.claim(T0 + cooldown - MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        assert sched.request(T0 + cooldown, "a1", "u1", cooldown) is RequestOutcome.ACCEPTED
        assert claimed(sched.claim(T0 + cooldown, "a1", ONE, LEASE)).requested

    def test_a_request_while_the_fetch_runs_is_served_right_after_it(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        assert sched.request(T0 + MS, "a1", "u1", timedelta(0)) is RequestOutcome.ACCEPTED
        refused(sched.claim(T0 + MS, "a1", MANY, LEASE), Refusal.NOTHING_DUE)  # not twice at once
        sched.finish(T0 + 2 * MS, claim, T0 + timedelta(hours=1))
        again = claimed(sched.claim(T0 + 2 * MS, "a1", ONE, LEASE))
        assert (again.upstream_id, again.requested) == ("u1", True)

    def test_an_upstream_not_scheduled_cannot_be_requested(self, sched):
        assert sched.request(T0, "a1", "u9", timedelta(0)) is RequestOutcome.UNKNOWN
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_forgetting_an_upstream_drops_its_request(self, sched):
        sched.schedule("a1", "u1", T0 + LEASE)
        sched.request(T0, "a1", "u1", timedelta(0))
        sched.forget("a1", "u1")
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_a_request_by_a_clock_past_the_lease_never_makes_a_late_clock_claim_it_twice(
        self, sched
    ):
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0)
        claimed(sched.claim(T0, "a1", MANY, LEASE))  # u1
        assert sched.request(T0 + LEASE + MS, "a1", "u1", timedelta(0)) is RequestOutcome.ACCEPTED
        behind = claimed(sched.claim(T0 + LEASE - timedelta(seconds=1), "a1", MANY, LEASE))
        assert behind.upstream_id == "u2"  # u1's lease is live by this clock
        refused(
            sched.claim(T0 + LEASE - timedelta(seconds=1), "a1", MANY, LEASE), Refusal.NOTHING_DUE
        )

    def test_a_request_made_while_a_lost_fetch_ran_is_served_by_its_next_claim_once(self, sched):
        sched.schedule("a1", "u1", T0)
        claimed(sched.claim(T0, "a1", ONE, LEASE))
        sched.request(T0 + MS, "a1", "u1", timedelta(0))
        again = claimed(sched.claim(T0 + LEASE, "a1", ONE, LEASE))  # the first lease ended
        assert (again.upstream_id, again.requested) == ("u1", True)
        sched.finish(T0 + LEASE + MS, again, T0 + timedelta(hours=1))
        refused(sched.claim(T0 + LEASE + MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)


class TestAccounts:
    def test_dropping_an_account_forgets_all_of_it(self, sched):
        limits = AccountLimits(concurrency=2, calls_per_minute=2)
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0 + LEASE)
        sched.request(T0, "a1", "u2", timedelta(hours=1))
        claim = claimed(sched.claim(T0, "a1", limits, LEASE))
        sched.schedule("a2", "u1", T0)
        sched.drop_account("a1")
        refused(sched.claim(T0, "a1", limits, LEASE), Refusal.NOTHING_DUE)
        with pytest.raises(LeaseLost):
            sched.finish(T0, claim, T0)
        assert sched.request(T0, "a1", "u2", timedelta(0)) is RequestOutcome.UNKNOWN
        assert sched.schedule("a1", "u1", T0) is True  # a new start: its calls are gone too
        claimed(sched.claim(T0, "a1", limits, LEASE))
        claimed(sched.claim(T0, "a2", limits, LEASE))  # another account is untouched

    def test_renewing_keeps_a_later_due_time_of_an_upstream_scheduled_again(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        sched.forget("a1", "u1")
        sched.schedule("a1", "u1", T0 + timedelta(hours=1))
        sched.renew(T0 + MS, claim, LEASE)  # then the worker dies
        refused(sched.claim(T0 + LEASE + MS, "a1", ONE, LEASE), Refusal.NOTHING_DUE)
        assert claimed(sched.claim(T0 + timedelta(hours=1), "a1", ONE, LEASE)).upstream_id == "u1"


class TestCallBudget:
    def test_claims_take_a_call_and_never_go_over_the_calls_per_second(self, sched):
        limits = AccountLimits(concurrency=8, calls_per_second=2)
        for n in range(4):
            sched.schedule("a1", f"u{n}", T0)
        claimed(sched.claim(T0, "a1", limits, LEASE))
        claimed(sched.claim(T0 + 10 * MS, "a1", limits, LEASE))
        over = refused(sched.claim(T0 + 20 * MS, "a1", limits, LEASE), Refusal.CALLS)
        assert over.retry_after == timedelta(seconds=1) - 20 * MS  # the first call leaves
        refused(sched.claim(T0 + timedelta(seconds=1) - MS, "a1", limits, LEASE), Refusal.CALLS)
        claimed(sched.claim(T0 + timedelta(seconds=1), "a1", limits, LEASE))

    def test_take_call_counts_in_the_same_windows(self, sched):
        limits = AccountLimits(concurrency=1, calls_per_second=10, calls_per_minute=3)
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", limits, MAX_LEASE))  # one call
        assert sched.take_call(T0 + MS, claim, limits) is None
        assert sched.take_call(T0 + 2 * MS, claim, limits) is None
        assert sched.take_call(T0 + 3 * MS, claim, limits) == timedelta(minutes=1) - 3 * MS
        assert sched.take_call(T0 + timedelta(minutes=1) - MS, claim, limits) == MS
        assert sched.take_call(T0 + timedelta(minutes=1), claim, limits) is None

    def test_the_minute_window_holds_with_the_second_free(self, sched):
        limits = AccountLimits(concurrency=8, calls_per_minute=2)
        for n in range(3):
            sched.schedule("a1", f"u{n}", T0)
        claimed(sched.claim(T0, "a1", limits, LEASE))
        claimed(sched.claim(T0 + timedelta(seconds=2), "a1", limits, LEASE))
        over = refused(sched.claim(T0 + timedelta(seconds=3), "a1", limits, LEASE), Refusal.CALLS)
        assert over.retry_after == timedelta(seconds=57)

    def test_a_call_refused_is_not_counted(self, sched):
        limits = AccountLimits(concurrency=8, calls_per_second=1)
        for n in range(2):
            sched.schedule("a1", f"u{n}", T0)
        claimed(sched.claim(T0, "a1", limits, LEASE))
        for ms in range(1, 5):
            refused(sched.claim(T0 + ms * MS, "a1", limits, LEASE), Refusal.CALLS)
        claimed(sched.claim(T0 + timedelta(seconds=1), "a1", limits, LEASE))

    def test_the_budget_is_per_account(self, sched):
        limits = AccountLimits(concurrency=8, calls_per_second=1)
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0)
        sched.schedule("a2", "u1", T0)
        claimed(sched.claim(T0, "a1", limits, LEASE))
        refused(sched.claim(T0, "a1", limits, LEASE), Refusal.CALLS)
        claimed(sched.claim(T0, "a2", limits, LEASE))


class TestProxyBudget:
    def test_a_take_is_granted_what_is_left_of_the_minute_and_counts_at_once(self, sched):
        limits = AccountLimits(concurrency=2, proxies_per_minute=10)
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0)
        one = claimed(sched.claim(T0, "a1", limits, MAX_LEASE))
        two = claimed(sched.claim(T0, "a1", limits, MAX_LEASE))
        assert sched.take_proxies(T0, one, limits, 6) == 6
        assert sched.take_proxies(T0 + MS, two, limits, 6) == 4  # one account, one budget
        assert sched.take_proxies(T0 + 2 * MS, one, limits, 1) == 0
        assert sched.take_proxies(T0 + timedelta(minutes=1) - MS, one, limits, 5) == 0
        assert sched.take_proxies(T0 + timedelta(minutes=1), one, limits, 5) == 5  # 6 left
        assert sched.take_proxies(T0 + timedelta(minutes=1), two, limits, 5) == 1

    def test_what_a_fetch_did_not_get_is_given_back_and_leaves_with_its_grant(self, sched):
        limits = AccountLimits(proxies_per_minute=10)
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", limits, MAX_LEASE))
        assert sched.take_proxies(T0, claim, limits, 10) == 10
        sched.give_back_proxies(T0 + timedelta(seconds=1), claim, 7, T0)  # the vendor sent 3
        assert sched.take_proxies(T0 + timedelta(seconds=2), claim, limits, 10) == 7
        # At T0 + 60 s the first grant and its give-back leave together: 7 of the second stay.
        assert sched.take_proxies(T0 + timedelta(minutes=1), claim, limits, 10) == 3
        # A give-back whose grant left the window already counts nothing.
        sched.give_back_proxies(T0 + timedelta(minutes=1), claim, 5, T0)
        assert sched.take_proxies(T0 + timedelta(minutes=1), claim, limits, 10) == 0

    def test_no_limit_grants_what_is_wanted_and_nothing_wanted_takes_nothing(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        assert sched.take_proxies(T0, claim, ONE, 1_000) == 1_000
        limited = AccountLimits(proxies_per_minute=5)
        assert sched.take_proxies(T0, claim, limited, 0) == 0
        assert sched.take_proxies(T0, claim, limited, 5) == 0  # the 1,000 taken count too

    def test_a_claim_not_current_takes_nothing(self, sched):
        limits = AccountLimits(proxies_per_minute=5)
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", limits, LEASE))
        with pytest.raises(LeaseLost):
            sched.take_proxies(T0 + LEASE, claim, limits, 5)
        again = claimed(sched.claim(T0 + LEASE, "a1", limits, LEASE))
        assert sched.take_proxies(T0 + LEASE, again, limits, 5) == 5

    @pytest.mark.parametrize("wanted", [-1, 1_000_001, True, 2.0])
    def test_a_wanted_count_out_of_range_is_refused(self, sched, wanted):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        with pytest.raises(InvalidRequest):
            sched.take_proxies(T0, claim, AccountLimits(proxies_per_minute=5), wanted)
        assert sched.take_proxies(T0, claim, AccountLimits(proxies_per_minute=5), 5) == 5


class TestInput:
    @pytest.mark.parametrize(
        "limits",
        [
            AccountLimits(concurrency=0),
            AccountLimits(concurrency=MAX_CONCURRENCY + 1),
            AccountLimits(calls_per_second=0),
            AccountLimits(calls_per_second=MAX_CALLS_PER_SECOND + 1),
            AccountLimits(calls_per_minute=MAX_CALLS_PER_MINUTE + 1),
            AccountLimits(proxies_per_minute=0),
            AccountLimits(concurrency=True),
        ],
    )
    def test_limits_out_of_range_are_refused(self, sched, limits):
        sched.schedule("a1", "u1", T0)
        with pytest.raises(InvalidRequest):
            sched.claim(T0, "a1", limits, LEASE)
        claimed(sched.claim(T0, "a1", ONE, LEASE))  # nothing was changed

    @pytest.mark.parametrize("lease", [timedelta(0), MAX_LEASE + MS, 30])
    def test_a_lease_out_of_range_is_refused(self, sched, lease):
        sched.schedule("a1", "u1", T0)
        with pytest.raises(InvalidRequest):
            sched.claim(T0, "a1", ONE, lease)
        claimed(sched.claim(T0, "a1", ONE, MAX_LEASE))

    @pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "ü", None, 7])
    def test_ids_that_cannot_be_labels_are_refused(self, sched, bad):
        with pytest.raises(InvalidRequest):
            sched.schedule(bad, "u1", T0)
        with pytest.raises(InvalidRequest):
            sched.schedule("a1", bad, T0)
        with pytest.raises(InvalidRequest):
            sched.request(T0, "a1", bad, timedelta(0))
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_naive_instants_are_refused(self, sched):
        naive = datetime(2026, 12, 1, 12, 0)  # noqa: DTZ001  (the point)
        with pytest.raises(InvalidRequest):
            sched.schedule("a1", "u1", naive)
        sched.schedule("a1", "u1", T0)
        with pytest.raises(InvalidRequest):
            sched.claim(naive, "a1", ONE, LEASE)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        with pytest.raises(InvalidRequest):
            sched.finish(T0, claim, naive)
        sched.finish(T0, claim, T0)  # still current: nothing was changed

    def test_instants_past_the_year_5137_are_refused(self, sched):
        far = datetime(5138, 1, 1, tzinfo=UTC)
        with pytest.raises(InvalidRequest):
            sched.schedule("a1", "u1", far)
        with pytest.raises(InvalidRequest):
            sched.claim(far, "a1", ONE, LEASE)
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)

    def test_a_cooldown_out_of_range_is_refused(self, sched):
        sched.schedule("a1", "u1", T0 + LEASE)
        for cooldown in (timedelta(hours=1) + MS, -MS):
            with pytest.raises(InvalidRequest):
                sched.request(T0, "a1", "u1", cooldown)
        refused(sched.claim(T0, "a1", ONE, LEASE), Refusal.NOTHING_DUE)


class TestStatus:
    def test_an_unknown_upstream_has_no_place_and_its_account_no_budget_used(self, sched):
        assert sched.status(T0, "a1", "u1") == FetchStatus(None, None, None, 0, 0)

    def test_status_follows_the_cadence_the_lease_the_request_and_the_budget(self, sched):
        limits = AccountLimits(concurrency=2, proxies_per_minute=100)
        sched.schedule("a1", "u1", T0)
        sched.schedule("a1", "u2", T0 + timedelta(minutes=5))
        assert sched.status(T0, "a1", "u2") == FetchStatus(
            T0 + timedelta(minutes=5), None, None, 0, 0
        )
        claim = claimed(sched.claim(T0, "a1", limits, LEASE))
        assert sched.take_proxies(T0, claim, limits, 30) == 30
        sched.give_back_proxies(T0 + MS, claim, 10, T0)
        assert sched.request(T0 + MS, "a1", "u1", timedelta(seconds=1)) is RequestOutcome.ACCEPTED
        running = sched.status(T0 + 2 * MS, "a1", "u1")
        # Due again when the lease ends unfinished; requested while it runs (pending).
        assert running == FetchStatus(T0 + LEASE, T0 + LEASE, T0 + MS, 1, 20)
        assert sched.status(T0 + 2 * MS, "a1", "u2").calls_last_minute == 1  # the account's
        sched.finish(T0 + timedelta(seconds=1), claim, T0 + timedelta(minutes=10))
        done = sched.status(T0 + timedelta(seconds=1), "a1", "u1")
        assert (done.due_at, done.running_until, done.requested_at) == (
            T0 + timedelta(minutes=10),
            None,
            T0 + MS,
        )
        later = sched.status(T0 + timedelta(minutes=1), "a1", "u1")
        assert (later.calls_last_minute, later.proxies_last_minute) == (0, 0)  # left the window

    def test_a_lease_that_ended_is_not_shown_running_and_status_changes_nothing(self, sched):
        sched.schedule("a1", "u1", T0)
        claim = claimed(sched.claim(T0, "a1", ONE, LEASE))
        assert sched.status(T0 + LEASE, "a1", "u1").running_until is None
        assert sched.status(T0 + LEASE - MS, "a1", "u1").running_until == T0 + LEASE
        # A read: unlike a claim, it cleaned no ended lease, so the claim still renews on a
        # clock before its end.
        assert sched.renew(T0 + LEASE - MS, claim, LEASE).lease_expires_at == T0 + 2 * LEASE - MS

    def test_bad_ids_are_refused(self, sched):
        with pytest.raises(InvalidRequest):
            sched.status(T0, "", "u1")
