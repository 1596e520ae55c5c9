"""The gateway's usage events: what an ownership tick did, and what a worker carried.

* :func:`record_tick` (pool_admin/gateway_tasks.py, after each tick that ran): one
  ``gateway_tick`` event (its duration, the leases its sweep expired, whether it was cut short),
  and one ``gateway_ownership`` event per group the tick did something for. A tick runs every
  2 s and most do nothing for most groups (a worker's leases are renewed together, once per
  lease period), so the stream gets one small event per tick plus one per busy group: at most
  ``1 + groups`` per tick, whatever the number of workers or proxies.
* :func:`record_traffic` (the control API, for a worker's report it accepted and that was not
  a replay): one ``gateway_traffic`` event per (client, upstream) pair the report says the
  worker carried anything for, and one ``gateway_snapshots_refused`` event when the worker
  refused snapshots since its previous report. The client and upstream names come from the
  worker, so only configured ones are kept (API clients' and upstreams' names, each read from
  PostgreSQL at most once per ``NAMES_TTL`` per process, the last set kept while it is down),
  and ``OTHER`` (the pairs past a worker's table bound): a worker naming others (a bug, a lie)
  cannot grow the aggregates' rows or ``/metrics``' label sets; what it names otherwise is left
  out and a warning says how many rows.

Both return at once and never raise (``emit_event``); no proxy, address or worker token is in
any event: group, client and upstream names and counts only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from activity.ownership_manager import TickReport
from gateway_runtime.wire import TRAFFIC_COUNTS, ClientTraffic
from gateway_runtime.wire.limits import OTHER
from pool_admin.config.models import ApiClient, Upstream
from pool_admin.kept_reads import KeptRead
from pool_admin.metrics.events import MAX_NUMBER
from pool_admin.metrics.stream import emit_event

logger = logging.getLogger(__name__)

#: How long the configured upstream and client names are used before they are read again.
NAMES_TTL = timedelta(seconds=5)
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


def record_traffic(
    group: str, traffic: Sequence[ClientTraffic], refused_snapshots: int = 0
) -> None:
    """What a worker of ``group`` reported since its previous accepted report: an event per
    (client, upstream) pair of configured names with anything to count, and the snapshots it
    refused."""
    if refused_snapshots:
        emit_event(
            "gateway_snapshots_refused", group=group, refused=min(refused_snapshots, MAX_NUMBER)
        )
    used = [t for t in traffic if any(getattr(t, name) for name in TRAFFIC_COUNTS)]
    if not used:
        return
    upstreams = _upstream_names.current() | {OTHER}
    clients = _client_names.current() | {OTHER}
    kept = [t for t in used if t.upstream in upstreams and t.client in clients]
    if len(kept) < len(used):
        _left_out.warn(len(used) - len(kept))
    for t in kept:
        for part in _parts(t):
            emit_event("gateway_traffic", group=group, client=t.client, upstream=t.upstream, **part)


def _parts(t: ClientTraffic) -> list[dict[str, int]]:
    """The figures as one event, or as several that add up to them when one is past what an
    event may carry: the wire allows 100 times more (a worker whose reports failed for hours
    reports all it carried meanwhile), and an event past it would be refused whole."""
    figures = {name: getattr(t, name) for name in TRAFFIC_COUNTS}
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
            "gateway traffic: %d report rows named an upstream or API client that is not "
            "configured (deleted meanwhile, or a worker's bug): left out of the metrics",
            n,
        )

    def _new_lock(self) -> None:
        self._lock = threading.Lock()


def _configured_upstreams() -> frozenset[str]:
    return frozenset(Upstream.objects.values_list("name", flat=True))


def _configured_clients() -> frozenset[str]:
    # Every API client, not only those allowed the gateway now: traffic a client carried
    # before its gateway use was turned off is still its own.
    return frozenset(ApiClient.objects.values_list("name", flat=True))


#: The configured upstreams' and API clients' names, each read at most once per NAMES_TTL;
#: while PostgreSQL does not answer, the last set read (none ever read: none known).
_upstream_names: KeptRead[frozenset[str]] = KeptRead(
    _configured_upstreams,
    NAMES_TTL,
    "gateway traffic: the configured upstreams",
    initial=frozenset(),
)
_client_names: KeptRead[frozenset[str]] = KeptRead(
    _configured_clients,
    NAMES_TTL,
    "gateway traffic: the API clients",
    initial=frozenset(),
)
_left_out = _LeftOut()


def forget_configured_upstreams() -> None:
    """Read the configured upstreams and clients afresh at the next report (tests: a new
    database)."""
    _upstream_names.forget()
    _client_names.forget()
