"""The console's overview: per upstream, what the pool holds now, where its fetches stand, and
how its last hour went; totals on top.

Reads, all bounded: the configured upstreams (at most ``MAX_UPSTREAMS``; the page says when
there are more) with their gateway share, and for each one the pool's exact inventory and
slots (two bounded pool calls; the second also tells what gateway workers hold of it), its
place in the fetch scheduler (one read), then four aggregate queries for all of them at once
(last fetch, the last hour's checks, figures and open alerts). A pool read that
fails (its Redis down, more expired than one bounded clean) leaves that upstream's live
figures out and says why; it never fails the page.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Max, Q, Sum

from activity.errors import ActivityError
from activity.scheduler.types import FetchStatus
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.models import Alert, Upstream, UpstreamChecks, UpstreamQuality

#: Upstreams one overview shows at most (in name order).
MAX_UPSTREAMS = 500
LAST_HOUR = timedelta(hours=1)
MAX_ALERTS = 50


@dataclass
class UpstreamLine:
    name: str
    account: str
    enabled: bool
    unextracted: int | None = None
    managed: int | None = None
    available_slots: int | None = None
    #: AVAILABLE proxies gateway workers hold without draining, and the connections they offer.
    gateway_held: int | None = None
    gateway_capacity: int | None = None
    #: How much of the upstream the gateway may hold (configured, %).
    gateway_share_percent: int | None = None
    #: Why the live figures are missing ("" when they are not).
    unavailable: str = ""
    fetch: FetchStatus | None = None
    calls_limit: int | None = None
    proxies_limit: int | None = None
    last_fetch: datetime | None = None
    checks: int = 0
    checks_passed: int = 0
    fetched: int = 0
    extracted: int = 0
    expired_used: int = 0
    expired_unused: int = 0
    open_alerts: int = 0

    @property
    def check_pass_rate(self) -> float | None:
        return self.checks_passed / self.checks if self.checks else None

    @property
    def waste_share(self) -> float | None:
        ended = self.expired_used + self.expired_unused
        return self.expired_unused / ended if ended else None


@dataclass
class Overview:
    at: datetime
    upstreams: list[UpstreamLine] = field(default_factory=list)
    #: More upstreams are configured than one overview shows.
    truncated: bool = False
    #: The open alerts, the newest first (at most MAX_ALERTS).
    alerts: list[Alert] = field(default_factory=list)
    alerts_truncated: bool = False

    def total(self, name: str) -> int:
        return sum(getattr(u, name) or 0 for u in self.upstreams)

    @property
    def unavailable(self) -> int:
        return sum(1 for u in self.upstreams if u.unavailable)

    @property
    def waste_share(self) -> float | None:
        used, unused = self.total("expired_used"), self.total("expired_unused")
        return unused / (used + unused) if used + unused else None

    @property
    def check_pass_rate(self) -> float | None:
        checks = self.total("checks")
        return self.total("checks_passed") / checks if checks else None


def overview(now: datetime | None = None) -> Overview:
    now = now or datetime.now(UTC)
    rows = list(
        Upstream.objects.select_related("account")
        .only(
            "name",
            "enabled",
            "gateway_share_percent",
            "account__name",
            "account__api_calls_per_minute",
            "account__proxies_per_minute",
        )
        .order_by("name")[: MAX_UPSTREAMS + 1]
    )
    result = Overview(at=now, truncated=len(rows) > MAX_UPSTREAMS)
    lines = {
        u.name: UpstreamLine(
            u.name,
            u.account.name,
            u.enabled,
            calls_limit=u.account.api_calls_per_minute,
            proxies_limit=u.account.proxies_per_minute,
            gateway_share_percent=u.gateway_share_percent,
        )
        for u in rows[:MAX_UPSTREAMS]
    }
    result.upstreams = list(lines.values())
    _live(result.upstreams, now)
    _aggregates(lines, now)
    opened = list(
        Alert.objects.filter(opened_at__isnull=False, closed_at__isnull=True)
        .select_related("upstream")
        .order_by("-opened_at")[: MAX_ALERTS + 1]
    )
    result.alerts, result.alerts_truncated = opened[:MAX_ALERTS], len(opened) > MAX_ALERTS
    return result


def _live(lines: list[UpstreamLine], now: datetime) -> None:
    pool, sched = get_pool(), get_scheduler()
    for line in lines:
        try:
            line.unextracted = pool.inventory(line.name)
            slots = pool.upstream_inventory(line.name)
            line.managed, line.available_slots = slots.managed, slots.available_slots
            line.gateway_held, line.gateway_capacity = slots.gateway_held, slots.gateway_capacity
        except ActivityError as exc:
            line.unavailable = exc.code
        try:
            line.fetch = sched.status(now, line.account, line.name)
        except ActivityError as exc:
            line.unavailable = line.unavailable or exc.code


def _aggregates(lines: dict[str, UpstreamLine], now: datetime) -> None:
    names = list(lines)
    since = now - LAST_HOUR
    fetches = (
        UpstreamQuality.objects.filter(upstream__in=names, fetches__gt=0)
        .values("upstream")
        .annotate(last=Max("period_start"))
    )
    for row in fetches:
        lines[row["upstream"]].last_fetch = row["last"]
    checks = (
        UpstreamChecks.objects.filter(upstream__in=names, period_start__gte=since)
        .values("upstream")
        .annotate(n=Sum("proxies"), passed=Sum("proxies", filter=Q(result="available")))
    )
    for row in checks:
        line = lines[row["upstream"]]
        line.checks, line.checks_passed = row["n"] or 0, row["passed"] or 0
    figures = (
        UpstreamQuality.objects.filter(upstream__in=names, period_start__gte=since)
        .values("upstream")
        .annotate(
            fetched=Sum("fetched"),
            extracted=Sum("extracted"),
            used=Sum("expired_used"),
            unused=Sum("expired_unused"),
        )
    )
    for row in figures:
        line = lines[row["upstream"]]
        line.fetched, line.extracted = row["fetched"] or 0, row["extracted"] or 0
        line.expired_used, line.expired_unused = row["used"] or 0, row["unused"] or 0
    alerts: dict[str, int] = defaultdict(int)
    opened = (
        Alert.objects.filter(
            upstream__name__in=names, opened_at__isnull=False, closed_at__isnull=True
        )
        .values("upstream__name")
        .annotate(n=Count("id"))
    )
    for row in opened:
        alerts[row["upstream__name"]] = row["n"]
    for name, n in alerts.items():
        lines[name].open_alerts = n
