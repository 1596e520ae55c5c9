"""Static proof that every implementation provides every port (checked by mypy, never run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from activity.memory import MemoryPool
    from activity.ports import ActivityPool
    from activity.redis import RedisPool

    def _memory_pool_implements_every_port(pool: MemoryPool) -> ActivityPool:
        return pool

    def _redis_pool_implements_every_port(pool: RedisPool) -> ActivityPool:
        return pool
