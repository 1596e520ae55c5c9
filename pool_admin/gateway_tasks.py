"""The ownership manager's Django side (activity/ownership_manager.py has the tick itself,
docs/ownership-manager.md the design): the worker groups as the operator configured them, read
fresh from PostgreSQL each tick, and one tick at a time across every Celery worker under the
tick lease ``ownership-manager``, renewed between the tick's phases (a tick whose lease was
lost stops there; the next holder's tick finishes what it left)."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from datetime import timedelta

from activity.clock import Clock, SystemClock
from activity.ownership_manager import GroupConfig, ManagerPolicy, OwnershipManager, TickReport
from pool_admin.bootstrap import get_pool, tick_lease
from pool_admin.config.models import Upstream, WorkerGroup
from pool_admin.metrics.gateway_events import record_tick

logger = logging.getLogger(__name__)

_SYSTEM_CLOCK = SystemClock()
LEASE_NAME = "ownership-manager"
#: Longer than a tick's bounded work between two renewals; a crashed holder's lease ends then.
LEASE_TTL = timedelta(seconds=30)
_NOT_TOKEN = re.compile(r"[^A-Za-z0-9._:@+-]")


def configured_groups() -> list[GroupConfig]:
    """Every worker group with its enabled workers and its enabled allowed upstreams (none
    selected: every enabled upstream)."""
    enabled = sorted(Upstream.objects.filter(enabled=True).values_list("name", flat=True))
    groups = []
    for group in WorkerGroup.objects.prefetch_related("allowed_upstreams", "workers"):
        allowed = sorted(u.name for u in group.allowed_upstreams.all() if u.enabled)
        if not group.allowed_upstreams.all():
            allowed = enabled
        workers = frozenset(w.name for w in group.workers.all() if w.enabled)
        groups.append(GroupConfig(group.name, group.target_capacity, tuple(allowed), workers))
    return groups


def gateway_shares() -> dict[str, float]:
    """How much of each enabled upstream the gateway may hold (its ``gateway_share_percent``)."""
    rows = Upstream.objects.filter(enabled=True).values_list("name", "gateway_share_percent")
    return {name: percent / 100 for name, percent in rows}


def _holder() -> str:
    """This tick's name for the lease: the host and process, and a part of its own."""
    host = _NOT_TOKEN.sub("-", socket.gethostname())[:32] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


_manager_lock = threading.Lock()
_manager: OwnershipManager | None = None
_manager_for: tuple[object, object] | None = None


def _process_manager(clock: Clock) -> OwnershipManager:
    """This process's manager, kept from tick to tick for the holdings reads it keeps (the
    manager's only state, a cache checked against each worker's revision); a new one when the
    pool or the clock changed (bootstrap.reset, a test's clock)."""
    global _manager, _manager_for
    pool = get_pool()
    if _manager is None or _manager_for != (pool, clock):
        _manager, _manager_for = OwnershipManager(pool, clock, ManagerPolicy()), (pool, clock)
    return _manager


def run_ownership_tick(clock: Clock | None = None) -> TickReport | None:
    """One tick, or None when another holder has the lease (its tick is running). A tick that
    ran is recorded as usage events (pool_admin/metrics/gateway_events.py)."""
    clock = clock or _SYSTEM_CLOCK
    lease, holder = tick_lease(), _holder()
    if not lease.acquire(LEASE_NAME, holder, clock.now(), LEASE_TTL):
        return None
    try:
        # Wall time (the clock may be a test's): the groups' read from PostgreSQL and the tick.
        started = time.monotonic()
        with _manager_lock:  # the lease keeps ticks apart across processes; this, threads
            report = _process_manager(clock).tick(
                configured_groups(),
                gateway_shares(),
                keep_going=lambda: lease.renew(LEASE_NAME, holder, clock.now(), LEASE_TTL),
            )
        duration = timedelta(seconds=time.monotonic() - started)
    finally:
        lease.release(LEASE_NAME, holder, clock.now())
    record_tick(report, duration)
    for name, tally in sorted(report.groups.items()):
        if tally.assigned or tally.drains_begun or tally.released or tally.refused:
            logger.info(
                "ownership %s: assigned %d, renewed %d, drains begun %d, released %d, refused %d",
                name,
                tally.assigned,
                tally.renewed,
                tally.drains_begun,
                tally.released,
                tally.refused,
            )
    if report.cut_short:
        logger.info("ownership tick cut short (a bound, or the lease lost): the next finishes")
    return report
