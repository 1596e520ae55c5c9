"""``manage.py list_upstreams``: every upstream with its live inventory from the pool."""

from __future__ import annotations

from typing import Any

import redis

from activity.errors import ScanBudgetExhausted, StoreUnavailable
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import Upstream
from pool_admin.management.cli import OperatorCommand, one_line_errors, table

UNAVAILABLE = "unavailable"


class Command(OperatorCommand):
    help = "List upstreams with their live inventory (unextracted, managed, available slots)."

    def handle(self, *args: Any, **options: Any) -> None:
        with one_line_errors(nothing_changed=False):
            upstreams = list(
                Upstream.objects.order_by("name").values_list("name", "enabled", "max_size")
            )
        if not upstreams:
            self.stdout.write("No upstreams are configured.")
            return
        pool = get_pool()
        rows: list[tuple[object, ...]] = []
        unavailable = 0
        for name, enabled, max_size in upstreams:
            try:
                slots = pool.upstream_inventory(name)
                counts: tuple[object, ...] = (
                    pool.inventory(name),
                    slots.managed,
                    slots.available_slots,
                )
            except (ScanBudgetExhausted, StoreUnavailable, redis.RedisError):
                counts = (UNAVAILABLE, UNAVAILABLE, UNAVAILABLE)
                unavailable += 1
            rows.append((name, "yes" if enabled else "no", max_size, *counts))
        headers = ("upstream", "enabled", "max size", "count", "managed", "available slots")
        self.stdout.write(table(headers, rows))
        if unavailable:
            self.stdout.write(
                f"{unavailable} upstream(s) {UNAVAILABLE}: the pool could not answer "
                "(Redis unreachable or the scan budget ran out); retry shortly."
            )
