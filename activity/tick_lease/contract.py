"""The tick lease's contract, run against every implementation (tests/activity/
test_tick_lease.py): a fixture ``make_lease`` returns a fresh, empty ``TickLease``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from activity.errors import InvalidRequest
from activity.tick_lease import MAX_LEASE_TTL, TickLease

LeaseFactory = Callable[[], TickLease]
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
TTL = 10 * SEC


class TestTickLease:
    def test_one_holder_at_a_time(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.acquire("tick", "a", T0, TTL)
        assert not lease.acquire("tick", "b", T0 + SEC, TTL)
        assert lease.holder("tick", T0 + SEC) == "a"

    def test_the_holder_acquiring_again_renews(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.acquire("tick", "a", T0, TTL)
        assert lease.acquire("tick", "a", T0 + 8 * SEC, TTL)
        assert not lease.acquire("tick", "b", T0 + 12 * SEC, TTL)  # held to T0 + 18 s

    def test_an_ended_lease_goes_to_the_next_holder(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.acquire("tick", "a", T0, TTL)
        assert lease.holder("tick", T0 + TTL) is None  # ended exactly at its expiry
        assert lease.acquire("tick", "b", T0 + TTL, TTL)
        assert lease.holder("tick", T0 + TTL) == "b"

    def test_renew_extends_only_what_the_holder_still_holds(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.acquire("tick", "a", T0, TTL)
        assert lease.renew("tick", "a", T0 + 9 * SEC, TTL)
        assert lease.holder("tick", T0 + 15 * SEC) == "a"
        assert not lease.renew("tick", "b", T0 + 15 * SEC, TTL)
        assert not lease.renew("tick", "a", T0 + 19 * SEC, TTL)  # ended at T0 + 19 s: lost
        assert lease.acquire("tick", "b", T0 + 19 * SEC, TTL)
        assert not lease.renew("tick", "a", T0 + 20 * SEC, TTL)  # another holds it now

    def test_release_frees_it_for_the_next_holder_only_by_its_holder(
        self, make_lease: LeaseFactory
    ):
        lease = make_lease()
        assert lease.acquire("tick", "a", T0, TTL)
        assert not lease.release("tick", "b", T0 + SEC)
        assert lease.holder("tick", T0 + SEC) == "a"
        assert lease.release("tick", "a", T0 + SEC)
        assert lease.holder("tick", T0 + SEC) is None
        assert not lease.release("tick", "a", T0 + SEC)
        assert lease.acquire("tick", "b", T0 + 2 * SEC, TTL)

    def test_leases_of_different_names_are_independent(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.acquire("ownership", "a", T0, TTL)
        assert lease.acquire("snapshots", "b", T0, TTL)
        assert (lease.holder("ownership", T0), lease.holder("snapshots", T0)) == ("a", "b")

    def test_nobody_holds_a_lease_never_taken(self, make_lease: LeaseFactory):
        lease = make_lease()
        assert lease.holder("tick", T0) is None
        assert not lease.renew("tick", "a", T0, TTL)
        assert not lease.release("tick", "a", T0)


BAD = {
    "name with spaces": ("a tick", "a", T0, TTL),
    "empty holder": ("tick", "", T0, TTL),
    "naive now": ("tick", "a", T0.replace(tzinfo=None), TTL),
    "zero ttl": ("tick", "a", T0, timedelta(0)),
    "ttl over the longest": ("tick", "a", T0, MAX_LEASE_TTL + SEC),
    "ttl as seconds": ("tick", "a", T0, 10),
}


class TestTickLeaseInput:
    @pytest.mark.parametrize("case", sorted(BAD))
    def test_bad_arguments_raise_and_change_nothing(self, make_lease: LeaseFactory, case):
        lease = make_lease()
        for call in (lease.acquire, lease.renew):
            with pytest.raises(InvalidRequest):
                call(*BAD[case])  # type: ignore[arg-type]
        assert lease.holder("tick", T0) is None
