"""The doctor's checks of the running processes, each through what the process leaves behind:
the Celery workers (a ping on the broker: which queues have a worker), beat (its heartbeat
row), the usage stream's consumer (its group on the stream), the gateway workers (their
sessions in the pool), and the open alerts.

Each read is bounded: one broadcast with a reply deadline, one row, two stream commands, the
console's own bounded session list, one grouped count and a handful of names.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from django.conf import settings
from django.db.models import Count

from pool_admin.doctor.findings import Finding, fail, ok, warn
from pool_admin.doctor.stores import IO_TIMEOUT_S, connect_once, text

#: Entries not yet delivered to the consumer group before the doctor warns (a few seconds of a
#: busy deployment's events: the consumer applies thousands a second).
CONSUMER_LAG_WARN = 10_000
#: Seconds since the consumer group's most recent read before it counts as not running: the
#: consumer reads with a 1-second block, so a live one is never idle longer than a few seconds.
CONSUMER_MAX_IDLE_S = 30
#: Gateway sessions the doctor reads (the console's bound), and names it prints per line.
MAX_SESSIONS = 200
MAX_NAMES = 5


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def check_celery(app: Celery | None = None) -> Sequence[Finding]:
    """One ping on the broker; a line per queue the platform sends to, naming its workers.
    ``app``: the project's Celery app unless given (a test's, on a broker of its own)."""
    from pool_admin.celery import app as project_app

    app = app or project_app
    queues = {
        settings.FETCH_QUEUE: "fetches",
        settings.CHECK_QUEUE: "rechecks",
        settings.CELERY_TASK_DEFAULT_QUEUE: "dispatches, sweeps and the ownership manager",
    }
    replies: Any = app.control.inspect(timeout=IO_TIMEOUT_S).active_queues() or {}
    serving: dict[str, list[str]] = {queue: [] for queue in queues}
    for worker, consumed in replies.items():
        for queue in consumed or []:
            if queue.get("name") in serving:
                serving[queue["name"]].append(str(worker))
    findings = []
    for queue, work in queues.items():
        name = f"celery:{queue}"
        workers = sorted(serving[queue])
        if workers:
            findings.append(ok(name, f"{len(workers)} worker(s): {_names(workers)}"))
        else:
            findings.append(
                fail(
                    name,
                    f"no worker answered on queue {queue!r} ({work} wait there)",
                    f"start a Celery worker with -Q {queue} (docs/DEPLOY.md)",
                )
            )
    return findings


def check_beat(now: datetime | None = None) -> Sequence[Finding]:
    """Exactly one beat with a heartbeat (pool_admin/beat.py) younger than
    ``BEAT_HEARTBEAT_MAX_AGE_S``."""
    from pool_admin.config.models import Heartbeat

    limit = settings.BEAT_HEARTBEAT_MAX_AGE_S
    fix = "start exactly one `celery -A pool_admin beat` (docs/DEPLOY.md)"
    rows = list(Heartbeat.objects.filter(role=Heartbeat.Role.BEAT).order_by("-at")[: MAX_NAMES + 1])
    if not rows:
        return [fail("beat", "beat has never written a heartbeat", fix)]
    at = now or datetime.now(UTC)
    fresh = [r for r in rows if (at - r.at).total_seconds() <= limit]
    if len(fresh) > 1:
        places = _names([r.where for r in fresh])
        return [
            fail(
                "beat",
                f"{len(fresh)} beats running ({places}): every scheduled task is sent twice",
                "stop all but one beat in the deployment",
            )
        ]
    age = (at - rows[0].at).total_seconds()
    if not fresh:
        return [
            fail("beat", f"last heartbeat {age:.0f} s ago ({rows[0].where}), limit {limit} s", fix)
        ]
    return [ok("beat", f"heartbeat {max(age, 0):.0f} s ago ({rows[0].where})")]


def check_consumer() -> Sequence[Finding]:
    """The usage stream's consumer group: a consumer reading lately, its lag, dead letters."""
    client = connect_once(settings.METRICS_REDIS_URL)
    fix = "start `manage.py consume_metrics` (docs/DEPLOY.md)"
    try:
        groups: Any = (
            client.xinfo_groups(settings.METRICS_STREAM)
            if client.exists(settings.METRICS_STREAM)
            else []
        )
        group = next((g for g in groups if text(g.get("name")) == settings.METRICS_GROUP), None)
        consumers: Any = (
            client.xinfo_consumers(settings.METRICS_STREAM, settings.METRICS_GROUP)
            if group is not None
            else []
        )
        dead = int(client.xlen(settings.METRICS_DEAD_LETTER))
    finally:
        client.close()
    if group is None:
        return [fail("metrics-consumer", "the usage stream has no consumer group yet", fix)]
    idle_ms = min((int(c.get("idle", 0)) for c in consumers), default=None)
    lag = group.get("lag")
    pending = int(group.get("pending", 0))
    figures = f"lag {lag if lag is not None else '?'}, pending {pending}, dead letters {dead}"
    if idle_ms is None or idle_ms > CONSUMER_MAX_IDLE_S * 1000:
        since = "never" if idle_ms is None else f"{idle_ms / 1000:.0f} s ago"
        return [fail("metrics-consumer", f"no consumer has read since {since} ({figures})", fix)]
    if lag is not None and int(lag) > CONSUMER_LAG_WARN:
        return [
            warn(
                "metrics-consumer",
                f"falling behind: {figures}",
                "run another consumer, or find what slows PostgreSQL's writes",
            )
        ]
    if dead:
        return [
            warn(
                "metrics-consumer",
                f"reading ({figures})",
                "events no aggregate could use wait in the dead-letter stream with their "
                "reasons (docs/OPERATIONS.md, usage metrics)",
            )
        ]
    return [ok("metrics-consumer", f"reading, last {idle_ms / 1000:.0f} s ago ({figures})")]


def check_gateway() -> Sequence[Finding]:
    """Every enabled gateway worker has a live session, ACKed a snapshot, and reports."""
    from pool_admin.bootstrap import get_pool
    from pool_admin.console.groups import fleet
    from pool_admin.console.ownership import freshness

    live = get_pool().worker_sessions(MAX_SESSIONS)
    configured = fleet(live)
    statuses = {w.session.worker_id: freshness(w) for w in live.workers}
    idle = [c.name for c in configured.idle or []]
    closed = sorted(n for n, state in statuses.items() if state == "failing closed")
    stale = sorted(n for n, state in statuses.items() if state == "stale")
    findings = []
    if idle:
        more = " (at least)" if configured.idle_truncated else ""
        findings.append(
            fail(
                "gateway",
                f"{len(idle)}{more} enabled worker(s) without a live session: {_names(idle)}",
                "start them (manage.py gateway_worker NAME), or disable the ones retired",
            )
        )
    if closed:
        findings.append(
            fail(
                "gateway:snapshots",
                f"worker(s) that never ACKed a snapshot, serving nothing: {_names(closed)}",
                "read their logs: a snapshot they cannot fetch or verify",
            )
        )
    if stale:
        findings.append(
            warn(
                "gateway:reports",
                f"worker(s) without a fresh report (their slots are not counted): {_names(stale)}",
                "read their logs: reports the control plane refuses or cannot receive",
            )
        )
    if findings:
        return findings
    if not statuses:
        return [ok("gateway", "no gateway worker enabled")]
    partial = f" (the first {MAX_SESSIONS})" if not live.complete else ""
    summary = f"{len(statuses)} live worker(s){partial}, each with an ACKed snapshot and a report"
    return [ok("gateway", summary)]


def check_alerts() -> Sequence[Finding]:
    """Open alerts, by kind, with the first upstreams' names."""
    from pool_admin.config.models import Alert

    open_now = Alert.objects.filter(opened_at__isnull=False, closed_at__isnull=True)
    by_kind = dict(open_now.values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    if not by_kind:
        return [ok("alerts", "no alert open")]
    first = list(
        open_now.order_by("upstream__name").values_list("upstream__name", flat=True)[
            : MAX_NAMES + 1
        ]
    )
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(by_kind.items()))
    return [
        warn(
            "alerts",
            f"open: {kinds} (upstreams {_names(sorted(set(first)))})",
            "see Alerts in the admin; each says what failed",
        )
    ]
