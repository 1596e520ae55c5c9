"""MemoryPool beyond the contract: the public surface, credentials, no secret in errors."""

from __future__ import annotations

from datetime import timedelta

import pytest

import activity
from activity import (
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    MemoryPool,
    PoolOptions,
    ProxyState,
    StaticCredentials,
)
from activity.errors import ERROR_CODES, ActivityError, InvalidBatch, StoreUnavailable


class _BrokenStore:
    def resolve(self, ref):
        raise ConnectionError("vault unreachable")


def test_a_failing_credentials_store_fails_the_whole_upsert():
    """凭据: an outage is not a bad candidate: nothing is written, and it is not cached."""
    clock = ManualClock()
    pool = MemoryPool(PoolOptions(), clock=clock, credentials=_BrokenStore())
    now = clock.now()
    ref = StaticCredentials().put("u", "p").ref
    proxy = FetchedProxy(
        "p1", "k1", "10.0.0.1", 80, "http", now + timedelta(minutes=5), secret_ref=ref
    )
    batch = FetchedBatch("u1", [proxy], 10, timedelta(0), now, operation_id="op-1")
    with pytest.raises(StoreUnavailable):
        pool.upsert_fetched(batch)
    assert pool.inventory("u1") == 0


def test_the_public_surface_of_the_architecture_imports():
    """ARCHITECTURE.md "Public surface": the names outside code relies on (RedisPool follows)."""
    for name in [
        "MemoryPool",
        "PoolOptions",
        "FetchedProxy",
        "FetchedBatch",
        "UpsertResult",
        "HealthUpdate",
        "ProxyState",
        "ExtractRequest",
        "ExtractFilters",
        "ExtractMode",
        "ExtractResult",
        "ExtractedProxy",
        "Assignment",
        "UpstreamInventory",
    ]:
        assert hasattr(activity, name), name
    assert {m.name for m in ProxyState} == {
        "FETCHED",
        "CHECKING",
        "AVAILABLE",
        "SUSPECT",
        "UNHEALTHY",
        "DRAINING",
        "EXTRACTED",
        "EXPIRED",
        "REMOVED",
    }
    assert {m.name for m in ExtractMode} == {"PARTIAL", "ALL_OR_NOTHING"}


def test_error_codes_are_unique_and_complete():
    """The shared code table: one class per code, every error class in it."""
    assert all(issubclass(cls, ActivityError) for cls in ERROR_CODES.values())
    assert len(ERROR_CODES) == len(set(ERROR_CODES.values()))
    for cls in ERROR_CODES.values():
        assert ERROR_CODES[cls.code] is cls


def test_no_secret_in_errors_or_reprs():
    """Invariant 3: passwords and SecretRefs never appear in an error, repr or result."""
    clock = ManualClock()
    creds = StaticCredentials()
    secret = creds.put("user", "hunter2-very-secret")
    pool = MemoryPool(PoolOptions(), clock=clock, credentials=creds)
    now = clock.now()
    proxy = FetchedProxy(
        "p1", "k1", "10.0.0.1", 80, "http", now + timedelta(minutes=5), secret_ref=secret.ref
    )
    seen = [repr(proxy), repr(secret), str(secret.ref)]
    with pytest.raises(InvalidBatch) as err:
        pool.upsert_fetched(FetchedBatch("u1", [proxy, proxy], 10, timedelta(0), now))
    seen += [str(err.value), repr(err.value)]
    pool.upsert_fetched(FetchedBatch("u1", [proxy], 10, timedelta(0), now))
    pool.apply_health([HealthUpdate("p1", ProxyState.AVAILABLE, now)])
    got = pool.extract(ExtractRequest("c1", 1))
    assert got.proxies[0].password == "hunter2-very-secret"
    seen += [repr(got), repr(got.proxies[0])]
    for text in seen:
        assert "hunter2" not in text
        assert secret.ref.ref not in text
