"""A pool whose store goes away part-way through a fetch, for the fetch's fault tests."""

from __future__ import annotations

from activity.errors import StoreUnavailable
from activity.ports import ActivityPool
from activity.types import FetchedBatch, HealthResult, HealthUpdate, UpsertResult


class StoreFailsAfter:
    """The pool, whose upsert answers ``writes`` calls and then fails every one (a Redis that
    went away mid-fetch); its other calls go through."""

    def __init__(self, pool: ActivityPool, writes: int) -> None:
        self.pool, self.left = pool, writes

    def inventory(self, upstream_id: str) -> int:
        return self.pool.inventory(upstream_id)

    def apply_health(self, updates: list[HealthUpdate]) -> HealthResult:
        return self.pool.apply_health(updates)

    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        if self.left == 0:
            raise StoreUnavailable("planted: the store went away here")
        self.left -= 1
        return self.pool.upsert_fetched(batch)
