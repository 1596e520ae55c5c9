"""ExtractRequest.idempotency_ttl, in the contract's manner on both pools: a keyed extract's
replay lives as long as its request says (capped by the earliest hard expiry it returns), and
never longer than ``max_proxy_ttl``. Without one it lives the pool's ``idempotency_ttl``: the
contract's ``test_replay_ttl_is_the_idempotency_ttl``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity import PoolOptions
from activity.contract.harness import PoolFactory, ids
from activity.errors import InvalidRequest

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)

pytestmark = pytest.mark.redis


def test_the_requests_ttl_decides_how_long_its_replay_lives(make_pool: PoolFactory):
    h = make_pool(options=PoolOptions(idempotency_ttl=10 * MIN))
    h.stock("p1", "p2", "p3", ttl=HOUR)  # outlives every replay waited for
    short = h.take(1, key="short", idempotency_ttl=5 * SEC)
    long = h.take(1, key="long", idempotency_ttl=20 * MIN)  # longer than the pool's default
    h.advance(4 * SEC)
    assert h.take(1, key="short", idempotency_ttl=5 * SEC).replayed
    h.advance(2 * SEC)
    fresh = h.take(1, key="short", idempotency_ttl=5 * SEC)
    assert not fresh.replayed and ids(fresh) != ids(short)
    h.advance(15 * MIN)  # past the pool's 10 min, within the request's 20
    again = h.take(1, key="long", idempotency_ttl=20 * MIN)
    assert again.replayed and ids(again) == ids(long)
    h.advance(5 * MIN)
    assert not h.take(1, key="long", idempotency_ttl=20 * MIN).replayed


def test_the_ttl_is_not_part_of_the_request(make_pool: PoolFactory):
    """A client whose TTL changed between a call and its retry gets its replay, no conflict."""
    h = make_pool()
    h.stock("p1", "p2")
    first = h.take(1, key="k1", idempotency_ttl=MIN)
    again = h.take(1, key="k1", idempotency_ttl=2 * MIN)
    assert again.replayed and ids(again) == ids(first)


def test_the_earliest_hard_expiry_still_caps_the_replay(make_pool: PoolFactory):
    h = make_pool()
    h.stock("short", ttl=MIN)
    assert h.take(1, key="k1", idempotency_ttl=20 * MIN).returned == 1
    h.advance(61 * SEC)
    h.stock("new")
    fresh = h.take(1, key="k1", idempotency_ttl=20 * MIN)
    assert not fresh.replayed and ids(fresh) == ["new"]


def test_a_request_id_replay_keeps_the_operation_ttl(make_pool: PoolFactory):
    """The TTL is the idempotency key's: a request ID guards one retry for operation_ttl."""
    h = make_pool(options=PoolOptions(operation_ttl=5 * SEC))
    h.stock("p1", "p2")
    h.take(1, request_id="req-1", idempotency_ttl=20 * MIN)
    h.advance(6 * SEC)
    assert not h.take(1, request_id="req-1", idempotency_ttl=20 * MIN).replayed


@pytest.mark.parametrize(
    "ttl",
    [
        timedelta(0),
        -SEC,
        timedelta(days=1, milliseconds=1),  # over PoolOptions.max_proxy_ttl (1 day)
        600,  # seconds, not a timedelta
        "10m",
    ],
)
def test_a_bad_ttl_is_refused_and_changes_nothing(make_pool: PoolFactory, ttl):
    h = make_pool()
    h.stock("p1")
    with pytest.raises(InvalidRequest, match="idempotency_ttl"):
        h.take(1, key="k1", idempotency_ttl=ttl)
    assert h.pool.inventory("u1") == 1
    assert not h.take(1, key="k1").replayed  # nothing was stored under the key either


def test_the_cap_is_the_pools_max_proxy_ttl(make_pool: PoolFactory):
    h = make_pool(options=PoolOptions(max_proxy_ttl=HOUR))
    h.stock("p1", "p2")
    assert h.take(1, key="k1", idempotency_ttl=HOUR).returned == 1
    with pytest.raises(InvalidRequest, match="idempotency_ttl"):
        h.take(1, key="k2", idempotency_ttl=HOUR + timedelta(milliseconds=1))
    assert h.pool.inventory("u1") == 1
