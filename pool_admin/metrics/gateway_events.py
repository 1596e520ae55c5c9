"""The gateway's usage events: what an ownership tick did, and what a worker carried.

* :func:`record_tick` (pool_admin/gateway_tasks.py, after each tick that ran): one
  ``gateway_tick`` event (its duration, the leases its sweep expired, whether it was cut short),
  and one ``gateway_ownership`` event per group the tick did something for. A tick runs every
  2 s and most do nothing for most groups (a worker's leases are renewed together, once per
  lease period), so the stream gets one small event per tick plus one per busy group: at most
  ``1 + groups`` per tick, whatever the number of workers or proxies.
* :func:`record_traffic` (the control API, for a worker's report it accepted and that was not
  a replay): one ``gateway_traffic`` event per upstream the report says the worker used. The
  upstream names come from the worker, so only configured upstreams are kept (read from
  PostgreSQL at most once per ``UPSTREAMS_TTL`` per process, the last set kept while it is
  down): a worker naming others (a bug, a lie) cannot grow the aggregates' rows or
  ``/metrics``' label sets; what it names otherwise is left out and a warning says how many.

Both return at once and never raise (``emit_event``); no proxy, address or worker token is in
any event: group and upstream names and counts only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from activity.ownership_manager import TickReport
from gateway_runtime.wire import UpstreamTraffic
from pool_admin.config.models import Upstream
from pool_admin.kept_reads import KeptRead
from pool_admin.metrics.events import MAX_NUMBER
from pool_admin.metrics.stream import emit_event

logger = logging.getLogger(__name__)

#: How long the configured upstream names are used before they are read again.
UPSTREAMS_TTL = timedelta(seconds=5)
#: At most one warning per this about traffic left out (a report comes every few seconds).
WARN_EVERY = timedelta(seconds=60)


def record_tick(report: TickReport, duration: timedelta) -> None:
    """The tick's events (see the module's text): ``duration`` is its wall time."""
    duration_ms = min(max(0, round(duration.total_seconds() * 1000)), MAX_NUMBER)
    emit_event(
        "gateway_tick",
        duration_ms=duration_ms,
        expired=min(report.expired, MAX_NUMBER),
        cut_short=report.cut_short,
    )
    for group, tally in sorted(report.groups.items()):
        figures = {
            "assigned": tally.assigned,
            "renewed": tally.renewed,
            "drains_begun": tally.drains_begun,
            "released": tally.released,
            "refused": tally.refused,
        }
        if any(figures.values()):
            emit_event("gateway_ownership", group=group, **figures)


def record_traffic(group: str, traffic: Sequence[UpstreamTraffic]) -> None:
    """What a worker of ``group`` reported it carried since its previous accepted report, by
    upstream: an event per configured upstream with anything to count."""
    used = [t for t in traffic if t.requests or t.bytes_up or t.bytes_down or t.errors]
    if not used:
        return
    known = _upstream_names.current()
    unknown = sum(1 for t in used if t.upstream not in known)
    if unknown:
        _left_out.warn(unknown)
    for t in used:
        if t.upstream in known:
            for part in _parts(t):
                emit_event("gateway_traffic", group=group, upstream=t.upstream, **part)


def _parts(t: UpstreamTraffic) -> list[dict[str, int]]:
    """The figures as one event, or as several that add up to them when one is past what an
    event may carry: the wire allows 100 times more (a worker whose reports failed for hours
    reports all it carried meanwhile), and an event past it would be refused whole."""
    figures = {
        "requests": t.requests,
        "bytes_up": t.bytes_up,
        "bytes_down": t.bytes_down,
        "errors": t.errors,
    }
    n = max(-(-value // MAX_NUMBER) for value in figures.values())
    if n <= 1:
        return [figures]
    return [{k: v // n + (1 if i < v % n else 0) for k, v in figures.items()} for i in range(n)]


class _LeftOut:
    """Report rows left out for naming no configured upstream, told at most once a minute."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # A forked child could inherit the lock held by a thread it does not have.
        os.register_at_fork(after_in_child=self._new_lock)
        self._warned_at: float | None = None
        self._left_out = 0

    def warn(self, n: int) -> None:
        with self._lock:
            self._left_out += n
            now = time.monotonic()
            if self._warned_at is not None and now - self._warned_at < WARN_EVERY.total_seconds():
                return
            n, self._left_out, self._warned_at = self._left_out, 0, now
        logger.warning(
            "gateway traffic: %d report rows named an upstream that is not configured "
            "(deleted meanwhile, or a worker's bug): left out of the metrics",
            n,
        )

    def _new_lock(self) -> None:
        self._lock = threading.Lock()


def _configured_upstreams() -> frozenset[str]:
    return frozenset(Upstream.objects.values_list("name", flat=True))


#: The configured upstreams' names, read at most once per UPSTREAMS_TTL; while PostgreSQL does
#: not answer, the last set read (none ever read: none known).
_upstream_names: KeptRead[frozenset[str]] = KeptRead(
    _configured_upstreams,
    UPSTREAMS_TTL,
    "gateway traffic: the configured upstreams",
    initial=frozenset(),
)
_left_out = _LeftOut()


def forget_configured_upstreams() -> None:
    """Read the configured upstreams afresh at the next report (tests: a new database)."""
    _upstream_names.forget()
