"""Static proof that every implementation provides every port (checked by mypy, never run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from activity.memory import MemoryPool
    from activity.ports import ActivityPool

    def _memory_pool_implements_every_port(pool: MemoryPool) -> ActivityPool:
        return pool
