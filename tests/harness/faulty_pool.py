"""A pool whose store fails part-way through a fetch, for the fetch's fault tests."""

from __future__ import annotations

from activity.errors import StoreUnavailable
from activity.ports import ActivityPool
from activity.types import FetchedBatch, HealthResult, HealthUpdate, UpsertResult


class StoreFailsOnSecondWrite:
    """The pool, whose store fails at the fetch's second batch (a Redis that went away)."""

    def __init__(self, pool: ActivityPool) -> None:
        self.pool, self.writes = pool, 0

    def inventory(self, upstream_id: str) -> int:
        return self.pool.inventory(upstream_id)

    def apply_health(self, updates: list[HealthUpdate]) -> HealthResult:
        return self.pool.apply_health(updates)

    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        self.writes += 1
        if self.writes == 2:
            raise StoreUnavailable("planted: the store went away")
        return self.pool.upsert_fetched(batch)
