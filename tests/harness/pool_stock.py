"""A Redis pool stocked for a failover test: n proxies of upstream u1, AVAILABLE, good for ten
minutes of the pool's clock."""

from __future__ import annotations

from datetime import timedelta

from activity import FetchedBatch, FetchedProxy, HealthUpdate, ProxyState, RedisPool
from activity.contract.harness import ManualClock

MIN = timedelta(minutes=1)


def stock(pool: RedisPool, clock: ManualClock, n: int, network: str = "10.5.0") -> None:
    """Proxies p0..p<n-1>, exits ``<network>.<i>``."""
    now = clock.now()
    proxies = [
        FetchedProxy(f"p{i}", f"exit-{i}", f"{network}.{i}", 8080, "http", now + 10 * MIN)
        for i in range(n)
    ]
    pool.upsert_fetched(FetchedBatch("u1", proxies, 100, timedelta(seconds=5), now))
    pool.apply_health([HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p in proxies])
