"""The pool fills itself: what the fetch tasks run, from the configuration (issue 12).

``dispatch`` (beat, every ``settings.FETCH_DISPATCH_PERIOD``) keeps the scheduler's cadence in
step with the configuration (every enabled upstream of an enabled account scheduled, the others
forgotten), then claims, per account, as many fetches as it may run and hands each to
``enqueue`` (a Celery task). ``run_fetch`` (that task) turns the upstream's configuration into
a plan (``plan_of``), runs the claimed fetch (``activity.fetch_job.FetchJob``, which finishes
its claim: the next fetch due after the upstream's interval, or later after a vendor error),
and tells what it did: the log, the usage events, the alerts. A claim whose lease was lost (its
worker died) is claimed again once the lease ends; a redelivered task whose claim is spent
changes nothing (``LeaseLost``).

Bounds: a dispatch reads each configured account and upstream once (the configuration's size)
and claims at most ``fetch_concurrency`` per account; a fetch is bounded by its fetch limits
(the upstream's vendor call deadline, 20 s unless set, a hard one) and renews its lease before
each round of checks (a round of ``CHECK_CONCURRENCY`` takes at most ``check_timeout``, 60 s,
well inside ``settings.FETCH_LEASE``, 2 minutes unless set lower).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from activity.checker import CheckTarget
from activity.clock import SystemClock
from activity.errors import ActivityError, LeaseLost
from activity.fetch_job import FetchInterrupted, FetchJob, FetchPlan, FetchReport
from activity.providers.errors import NextStep, ProviderError
from activity.providers.fetch import FetchLimits
from activity.reconciler import UpstreamTarget
from activity.scheduler import Claim, FetchScheduler, NoClaim, RequestOutcome
from pool_admin import alerts
from pool_admin.bootstrap import fetch_credentials, get_pool, get_scheduler
from pool_admin.config.models import Alert, ProviderAccount, Upstream
from pool_admin.metrics.stream import emit_event

logger = logging.getLogger(__name__)

CHECK_CONCURRENCY = 200


def dispatch(now: datetime, enqueue: Callable[[dict[str, Any]], object]) -> int:
    """Sync the cadence, then claim and enqueue what is due; the number of fetches claimed."""
    sched = get_scheduler()
    fetchable: dict[str, ProviderAccount] = {}
    for upstream in Upstream.objects.select_related("account").iterator():
        account = upstream.account
        if upstream.enabled and account.enabled and _readable(upstream):
            sched.schedule(account.name, upstream.name, now)
            fetchable[account.name] = account
        else:
            sched.forget(account.name, upstream.name)
    refill(now, sched)
    _warn_if_threads_short(sum(account.fetch_concurrency for account in fetchable.values()))
    claimed = 0
    for account in fetchable.values():
        for _ in range(account.fetch_concurrency):
            result = sched.claim(now, account.name, account.limits, settings.FETCH_LEASE)
            if isinstance(result, NoClaim):
                break
            enqueue(claim_payload(result))
            claimed += 1
    return claimed


_threads_warned_for = 0


def _warn_if_threads_short(wanted: int) -> None:
    """Say (once per figure) when the accounts may run more fetches at once than the fetch
    worker has threads: then a slow vendor's fetches can make other accounts' wait."""
    global _threads_warned_for
    threads = settings.FETCH_WORKER_THREADS
    if wanted > threads and wanted != _threads_warned_for:
        logger.warning(
            "the enabled accounts may run %d fetches at once, the fetch worker %d "
            "(FETCH_WORKER_THREADS): a slow vendor may delay other accounts' fetches",
            wanted,
            threads,
        )
    _threads_warned_for = wanted if wanted > threads else 0


def refill(now: datetime, sched: FetchScheduler) -> int:
    """On-demand refill: each enabled upstream with a low-water mark whose unextracted
    inventory is under it is requested ahead of its cadence (merged within its cooldown); the
    requests accepted. Read here, every dispatch, not in the extract: an extract stays one
    Redis round trip, and a refill starts at most one dispatch period late."""
    pool = get_pool()
    accepted = 0
    watched = Upstream.objects.select_related("account").filter(
        enabled=True, account__enabled=True, low_water_mark__gt=0
    )
    for upstream in watched.iterator():
        try:
            if pool.inventory(upstream.name) >= upstream.low_water_mark:
                continue
        except ActivityError as exc:  # unavailable for now: the next dispatch reads again
            logger.debug("refill %s: inventory unread (%s)", upstream.name, exc.code)
            continue
        cooldown = timedelta(seconds=upstream.refill_cooldown_s)
        outcome = sched.request(now, upstream.account.name, upstream.name, cooldown)
        accepted += outcome is RequestOutcome.ACCEPTED
    return accepted


def _readable(upstream: Upstream) -> bool:
    """Whether the upstream's answers can be read as configured (a row saved before its
    reader's settings were checked may not: it is not fetched, and says why at debug)."""
    try:
        upstream.answer_format()
    except ValueError as exc:
        logger.debug("upstream %s is not fetched: %s", upstream.name, exc)
        return False
    return True


def _plan_or_none(upstream: Upstream) -> FetchPlan | None:
    """The upstream's plan, built once per fetch; None when its answers cannot be read."""
    try:
        return plan_of(upstream)
    except ValueError as exc:
        logger.debug("upstream %s is not fetched: %s", upstream.name, exc)
        return None


def claim_payload(claim: Claim) -> dict[str, Any]:
    """A claim as a task's JSON argument (the token is random and proves only this lease)."""
    payload = asdict(claim)
    payload["lease_expires_at"] = claim.lease_expires_at.isoformat()
    return payload


def claim_of(payload: dict[str, Any]) -> Claim:
    return Claim(
        account_id=str(payload["account_id"]),
        upstream_id=str(payload["upstream_id"]),
        token=str(payload["token"]),
        lease_expires_at=datetime.fromisoformat(str(payload["lease_expires_at"])),
        requested=bool(payload["requested"]),
    )


def run_fetch(payload: dict[str, Any]) -> FetchReport | None:
    """One claimed fetch (``activity.fetch_job.FetchJob``: it finishes its claim), told:
    logged, its usage events, its alerts. None: nothing was fetched (the claim was spent, the
    upstream is gone or no longer fetchable, or the fetch failed: logged)."""
    claim = claim_of(payload)
    clock = SystemClock()
    upstream = (
        Upstream.objects.select_related("account__credential", "static_list")
        .filter(name=claim.upstream_id, account__name=claim.account_id)
        .first()
    )
    try:
        plan = _plan_or_none(upstream) if upstream is not None else None
    except Exception as exc:  # a secret that cannot be read (the key it was sealed with gone)
        _finish_unfetched(claim, clock, upstream)
        assert upstream is not None
        _failed_on_our_side(upstream, claim, exc)
        return None
    if upstream is None or plan is None:
        _finish_unfetched(claim, clock, upstream)
        return None
    job = FetchJob(
        plan,
        pool=get_pool(),
        scheduler=get_scheduler(),
        claim=claim,
        limits=upstream.account.limits,
        lease=settings.FETCH_LEASE,
        handover=fetch_credentials(),
        clock=clock,
    )
    try:
        report = job.run()
    except LeaseLost:  # a redelivered task whose claim is spent or lost: nothing done
        logger.info("fetch %s: its claim is no longer current; nothing done", claim.upstream_id)
        return None
    except ProviderError as exc:
        logger.warning("fetch %s failed: %s (%s)", claim.upstream_id, exc, exc.next_step.value)
        emit_event("fetch_failed", upstream=claim.upstream_id, error=exc.code)
        refused = exc.next_step is NextStep.DISABLE
        kind = Alert.Kind.VENDOR_REFUSES if refused else Alert.Kind.FETCH_FAILING
        alerts.record(upstream, kind, failed=True, detail=f"{exc.code}: {exc}")
        return None
    except FetchInterrupted as exc:
        # The store failed after the vendor answered: say what the pool holds of this fetch.
        r = exc.report.reconcile
        # Each new proxy gets one health update (its check, or trusted, or not checkable).
        unchecked = r.inserted - sum(exc.report.checks.states.values())
        said = (
            f"{type(exc.cause).__name__} after taking in {r.inserted} new proxies "
            f"({unchecked} unchecked, out of extraction until a recheck) and refreshing "
            f"{r.refreshed}"
        )
        logger.error("fetch %s stopped on our side: %s", claim.upstream_id, said)
        emit_event("fetch_failed", upstream=claim.upstream_id, error="our_side")
        _emit_usage(upstream.name, exc.report)
        detail = f"{getattr(exc.cause, 'code', 'our_side')}: {said}"
        alerts.record(upstream, Alert.Kind.FETCH_FAILING, failed=True, detail=detail)
        return None
    except Exception as exc:  # the pool's store, a credential that cannot be read...
        _failed_on_our_side(upstream, claim, exc)
        return None
    _record_alerts(upstream, report)
    _emit_usage(upstream.name, report)
    r, checks = report.reconcile, report.checks
    logger.log(
        logging.INFO if r.asked else logging.DEBUG,
        "fetch %s: asked %d, received %d, inserted %d, refreshed %d, dropped %s, "
        "checked %d, states %s",
        upstream.name,
        r.asked,
        r.received,
        r.inserted,
        r.refreshed,
        drops_of(report),
        checks.checked,
        checks.states,
    )
    return report


def _failed_on_our_side(upstream: Upstream, claim: Claim, exc: Exception) -> None:
    """Not the vendor's fault: the fetch stopped (its claim finished), and the failure counts
    toward an alert. The type only: a traceback's text could quote a URL or a value the
    redacting filter does not see (it reads the message, not the traceback)."""
    logger.error("fetch %s failed on our side: %s", claim.upstream_id, type(exc).__name__)
    emit_event("fetch_failed", upstream=claim.upstream_id, error="our_side")
    detail = f"{getattr(exc, 'code', type(exc).__name__)}: the fetch failed on our side"
    alerts.record(upstream, Alert.Kind.FETCH_FAILING, failed=True, detail=detail)


def _finish_unfetched(claim: Claim, clock: SystemClock, upstream: Upstream | None) -> None:
    """Finish a claim whose upstream is gone or cannot be read as configured: due again after
    its interval (a minute if it is gone: the next dispatch forgets it)."""
    interval = timedelta(seconds=upstream.fetch_interval_s if upstream else 60)
    try:
        get_scheduler().finish(clock.now(), claim, clock.now() + interval)
    except LeaseLost:
        logger.info("fetch %s: its claim is no longer current; nothing done", claim.upstream_id)


def _emit_usage(upstream: str, report: FetchReport) -> None:
    """A fetch that asked its vendor: what came and what was taken, on the usage stream; and
    its intake checks, when it ran any."""
    r = report.reconcile
    if not r.asked:
        return
    emit_event(
        "fetch",
        upstream=upstream,
        received=r.received,
        inserted=r.inserted,
        refreshed=r.refreshed,
        available=report.checks.states.get("available", 0),
        dropped=drops_of(report),
    )
    checks = report.checks
    if checks.checked:
        emit_event(
            "check",
            upstream=upstream,
            source="intake",
            states=checks.states,
            latency_ms=checks.latency_ms,
            timed=checks.timed,
        )


def drops_of(report: FetchReport) -> dict[str, int]:
    """What of a vendor's answer the pool did not take, by reason (the parser's and the
    pool's), only the reasons that occurred."""
    r = report.reconcile
    dropped = {reason.value: n for reason, n in r.dropped.items()}
    dropped |= {
        "beyond_ask": r.beyond_ask,
        "duplicate": r.duplicates,
        "over_capacity": r.over_capacity,
        "conflict": r.conflicts,
        "quarantined": r.quarantined,
        "rejected": r.rejected,
        "terminal": r.skipped_terminal,
    }
    return {reason: n for reason, n in dropped.items() if n}


def _record_alerts(upstream: Upstream, report: FetchReport) -> None:
    """A fetch that asked its vendor and was answered: its fetch alerts close; its checks' and
    inventory's are judged. One that asked nothing (full, or its budget spent) says nothing."""
    if not report.reconcile.asked:
        return
    alerts.record(upstream, Alert.Kind.FETCH_FAILING, failed=False)
    alerts.record(upstream, Alert.Kind.VENDOR_REFUSES, failed=False)
    r = report.reconcile
    taken = r.inserted + r.refreshed
    dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(drops_of(report).items()))
    detail = f"received {r.received}, taken 0" + (f": {dropped}" if dropped else "")
    alerts.record(upstream, Alert.Kind.NOTHING_TAKEN, failed=taken == 0, detail=detail)
    checks = report.checks
    if checks.checked >= 4:  # too few checks say nothing about a rate
        bad = checks.states.get("unhealthy", 0) + checks.states.get("suspect", 0)
        share = f"{bad} of {checks.checked} fetched proxies failed their check"
        alerts.record(
            upstream, Alert.Kind.CHECKS_FAILING, failed=2 * bad > checks.checked, detail=share
        )
    if upstream.low_water_mark:
        # What the fetch read (max_size less its deficit: it asked, so it was under max_size)
        # and what it added: no second read of the inventory per fetch.
        left = upstream.max_size - r.deficit + r.inserted
        mark = upstream.low_water_mark
        detail = f"{left} unextracted, low-water mark {mark}"
        alerts.record(upstream, Alert.Kind.LOW_INVENTORY, failed=left < mark, detail=detail)


def plan_of(upstream: Upstream) -> FetchPlan:
    """How to fetch and check ``upstream``, from its configuration."""
    params = {str(k): _param(v) for k, v in (upstream.request_params or {}).items()}
    headers: dict[str, str] = {}
    credential = upstream.account.credential
    secrets: tuple[str, ...] = ()
    if credential is not None:  # redacted from the vendor's text however it is sent
        secret = credential.reveal()
        secrets = (secret,)
    if credential is not None and (upstream.credential_param or upstream.credential_header):
        if upstream.credential_param:
            params[upstream.credential_param] = secret
        if upstream.credential_header:
            headers[upstream.credential_header] = secret
    check = None if upstream.trust_provider else CheckTarget(upstream.check_url)
    static = None
    if upstream.kind == Upstream.Kind.STATIC_LIST and upstream.static_list is not None:
        static = upstream.static_list.reveal().encode()
    return FetchPlan(
        target=UpstreamTarget(
            upstream.name, upstream.max_size, upstream.safety_margin, labels=upstream.labels()
        ),
        url=upstream.endpoint_url,
        format=upstream.answer_format(),
        count_param=upstream.count_param or None,
        params=params,
        headers=headers,
        limits=limits_of(upstream),
        check=check,
        check_timeout=upstream.check_timeout_ms / 1000,
        check_concurrency=CHECK_CONCURRENCY,
        static_body=static,
        secrets=secrets,
        interval=timedelta(seconds=upstream.fetch_interval_s),
        max_retry_after=settings.FETCH_MAX_RETRY_AFTER,
    )


def limits_of(upstream: Upstream) -> FetchLimits:
    """The vendor call's bounds: the upstream's deadline, no step of it longer."""
    deadline = float(upstream.fetch_timeout_s)
    defaults = FetchLimits()
    return FetchLimits(
        connect_timeout=min(defaults.connect_timeout, deadline),
        read_timeout=min(defaults.read_timeout, deadline),
        total_timeout=deadline,
    )


def _param(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(_param(v) for v in value)
    return str(value)


def now() -> datetime:
    return datetime.now(UTC)
