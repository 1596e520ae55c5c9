"""One fetch of one upstream, end to end: ask its vendor for what it lacks, put the proxies in
the pool, check each through itself, and apply what the checks found (ADR-005: FETCHED, then
AVAILABLE, SUSPECT or UNHEALTHY). What the fetch task of a claim runs (pool_admin/tasks.py);
plain Python, given its configuration, pool and credentials store.

A proxy is checked once, here, at intake (FETCHED, then AVAILABLE, SUSPECT or UNHEALTHY; not
CHECKING on the way: a proxy handed out again is refreshed with its state kept, and marking it
CHECKING would take a working proxy out of extraction for the check's length): most vendors'
proxies live minutes, and one check when it arrives (with a timeout of a few seconds) is what a
short-lived proxy is worth; after that, outcome reports (passive health) tell, and a proxy that
lives long enough is rechecked while idle (activity/rechecking.py). An upstream that trusts its
provider skips the probe: its proxies are AVAILABLE at once, except those whose exit clients
found failing lately (they entered SUSPECT and stay out of extraction).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from activity.checker import CheckTarget, ProbeResult, ProxyEndpoint, health_of, probe_all
from activity.clock import Clock
from activity.credentials import (
    CredentialUnavailable,
    CredentialVersion,
    FetchCredentials,
    SecretRef,
)
from activity.providers.entries import ParsedResponse
from activity.providers.errors import VendorError
from activity.providers.fetch import FetchLimits, fetch
from activity.providers.presets import Format
from activity.providers.redaction import RequestSecrets
from activity.reconciler import Reconciler, ReconcileResult, UpstreamTarget
from activity.types import (
    FetchedBatch,
    FetchedProxy,
    HealthResult,
    HealthUpdate,
    ProxyState,
    UpsertResult,
)

#: Health updates per ``apply_health`` call (the pool's ``max_health_batch``).
HEALTH_BATCH = 1_000


class FillingPool(Protocol):
    def inventory(self, upstream_id: str) -> int: ...

    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult: ...

    def apply_health(self, updates: list[HealthUpdate]) -> HealthResult: ...


@dataclass(frozen=True)
class UpstreamFill:
    """How to fetch and check one upstream (built from its configuration by the caller)."""

    target: UpstreamTarget
    url: str
    format: Format
    #: The request parameter that says how many proxies to hand out (None: the vendor's own).
    count_param: str | None = None
    #: May hold the account's credential (``credential_param``): never in a repr.
    params: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    limits: FetchLimits = field(default_factory=FetchLimits)
    #: None: the provider is trusted, no probe.
    check: CheckTarget | None = None
    check_timeout: float = 5.0
    check_concurrency: int = 200
    #: A fixed list to read instead of asking a vendor (a static-list upstream): never in a
    #: repr, it holds the proxies' logins.
    static_body: bytes | None = field(default=None, repr=False)
    #: The account's credential material, whether or not the request sends it as it is: a
    #: vendor's text is redacted of it (and of every parameter and header value).
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def request_secrets(self) -> RequestSecrets:
        """What the vendor's answers must not repeat: the credential, the request's values."""
        return RequestSecrets((*self.secrets, *self.params.values(), *self.headers.values()))


@dataclass
class FillReport:
    reconcile: ReconcileResult
    checked: int = 0
    #: Proxies by the state their check gave (AVAILABLE for a trusted provider's).
    states: dict[str, int] = field(default_factory=dict)
    health: HealthResult | None = None
    #: Sum of the checks' measured latencies (ms) and how many were measured.
    latency_ms: int = 0
    timed: int = 0


def fill(
    now: datetime,
    plan: UpstreamFill,
    *,
    pool: FillingPool,
    credentials: FetchCredentials,
    clock: Clock,
    operation_id: str,
    proxy_budget: int,
    take_budget: Callable[[int], int] | None = None,
    give_back: Callable[[int], object] | None = None,
    keep_alive: Callable[[], object] | None = None,
) -> FillReport:
    """Fetch, upsert, check and mark the upstream's proxies. A provider's error
    (``ProviderError``) propagates with nothing written; a fetch that finds the upstream full
    or its budget spent asks nothing. ``take_budget(n)``, when given, grants how many of those
    ``n`` the account's budget allows now (the scheduler's ``take_proxies``), and
    ``give_back(m)`` returns what of it the vendor did not give (all of it when the vendor
    failed); ``keep_alive()`` is called before each round of checks (the caller renews its
    lease there). A failure on our side after the vendor answered (the pool's store, half-way
    through the write or the checks) raises :class:`FetchInterrupted` once what was written
    has been checked as far as the store allows: its report says what is in the pool.

    The checks run in rounds of ``check_concurrency`` proxies, each round's results applied
    when it ends (the first proxies are AVAILABLE before the last are checked), so a round
    takes at most ``check_timeout``, less for short-lived proxies (``intake_timeout``). A
    proxy its entry cannot be checked through (a SOCKS5 login over 255 bytes) is UNHEALTHY,
    never a failed fetch."""
    reconciler = Reconciler(pool, credentials)
    deficit = reconciler.deficit(plan.target)
    asked = min(deficit, max(0, proxy_budget))
    if take_budget is not None and asked:
        asked = min(asked, take_budget(asked))
    if asked == 0:
        return FillReport(ReconcileResult(deficit=deficit))
    try:
        parsed = _ask(plan, clock, asked)
    except Exception:
        if give_back is not None:
            give_back(asked)  # nothing came: none of it counts
        raise
    kept = _Recorded(credentials)
    interrupted: Exception | None = None
    result = ReconcileResult(deficit=deficit, asked=asked)
    try:
        recorded = Reconciler(pool, kept)
        intake = recorded.prepare(now, plan.target, parsed, keep=asked, operation_id=operation_id)
        got = sum(len(batch.proxies) for batch in intake.batches)
        if give_back is not None and got < asked:
            give_back(asked - got)
        try:
            recorded.write(intake, into=result)
        except Exception as exc:  # the store failed half-way: what it took is checked still
            interrupted = exc
        # Only what the pool took in as new: a refreshed proxy keeps the state its checks gave
        # it, and one the pool refused (another upstream's exit, a lifetime it does not
        # believe, extracted already) is not the pool's to check or count.
        endpoints = _endpoints(intake.batches[: result.batches_written], credentials,
                               set(result.inserted_ids))  # fmt: skip
    finally:
        credentials.discard(kept.refs)  # the records carry them now; nothing else may
    report = FillReport(result)
    try:
        _check_intake(plan, pool, endpoints, clock, report, keep_alive)
    except Exception as exc:
        interrupted = interrupted or exc
    if interrupted is not None:
        raise FetchInterrupted(report, interrupted) from interrupted
    return report


class FetchInterrupted(Exception):
    """A fetch that failed on our side (the pool's store) after the vendor answered: its
    ``report`` says what it wrote and checked before it stopped (what is in the pool now);
    ``cause`` is what stopped it. Proxies it wrote and could not check are FETCHED, out of
    extraction, until a recheck takes them (due at once: activity/rechecking.py)."""

    def __init__(self, report: FillReport, cause: Exception) -> None:
        super().__init__(f"the fetch stopped on our side ({type(cause).__name__})")
        self.report, self.cause = report, cause


def _check_intake(
    plan: UpstreamFill,
    pool: FillingPool,
    endpoints: list[tuple[FetchedProxy, ProxyEndpoint | None]],
    clock: Clock,
    report: FillReport,
    keep_alive: Callable[[], object] | None,
) -> None:
    """The intake checks of the proxies the fetch took in, in rounds, each applied as it
    ends; ``report`` counts them as they are applied."""
    checkable = [(proxy, endpoint) for proxy, endpoint in endpoints if endpoint is not None]
    updates = [
        HealthUpdate(proxy.proxy_id, ProxyState.UNHEALTHY, clock.now(), None, "check_unusable")
        for proxy, endpoint in endpoints
        if endpoint is None
    ]
    if plan.check is None:
        # Only from FETCHED: a proxy whose exit clients found failing entered SUSPECT
        # (passive health), and trusting the provider does not override what clients saw.
        updates += [
            HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, clock.now(), expected=ProxyState.FETCHED)
            for p, _ in checkable
        ]
    report.health = HealthResult()
    _apply(pool, updates, report)
    if plan.check is not None:
        for start in range(0, len(checkable), plan.check_concurrency):
            if keep_alive is not None:
                keep_alive()
            checked = _checked(plan, checkable[start : start + plan.check_concurrency], clock)
            _apply(pool, checked, report)
            report.checked += len(checked)


def _apply(pool: FillingPool, updates: list[HealthUpdate], report: FillReport) -> None:
    """Apply ``updates`` in the pool's batches, each counted in ``report`` once applied."""
    for start in range(0, len(updates), HEALTH_BATCH):
        part = updates[start : start + HEALTH_BATCH]
        health = pool.apply_health(part)
        report.health = health if report.health is None else report.health + health
        for update in part:
            report.states[update.state.value] = report.states.get(update.state.value, 0) + 1
            if update.latency_ms is not None:
                report.latency_ms += update.latency_ms
                report.timed += 1


class _Recorded:
    """The credentials store, with every reference put through it noted (to discard them all,
    also when the fetch fails half-way through putting them)."""

    def __init__(self, store: FetchCredentials) -> None:
        self.store = store
        self.refs: list[SecretRef] = []

    def put(self, username: str, password: str) -> CredentialVersion:
        version = self.store.put(username, password)
        self.refs.append(version.ref)
        return version


def _ask(plan: UpstreamFill, clock: Clock, count: int) -> ParsedResponse:
    """The vendor's answer, parsed; its own error redacted of what the request carried."""
    if plan.static_body is not None:  # the list is here: read it, ask nobody
        return plan.format.parse(plan.static_body, clock.now())
    params = dict(plan.params)
    if plan.count_param:
        params[plan.count_param] = str(count)
    answer = fetch(plan.url, clock=clock, limits=plan.limits, params=params,
                   headers=plan.headers)  # fmt: skip
    try:
        return plan.format.parse(answer.body, answer.sent_at)
    except VendorError as said:
        redacted = said.redacted(plan.request_secrets())
    # Raised here, not in the except clause: there it would carry the vendor's own error,
    # secret and all, as its context.
    raise redacted


def _endpoints(
    batches: tuple[FetchedBatch, ...], credentials: FetchCredentials, inserted: set[str]
) -> list[tuple[FetchedProxy, ProxyEndpoint | None]]:
    """Each proxy the pool took in as new, with where to check it (None: it cannot be checked
    as listed)."""
    out: list[tuple[FetchedProxy, ProxyEndpoint | None]] = []
    for batch in batches:
        for proxy in batch.proxies:
            if proxy.proxy_id not in inserted:
                continue
            username = password = None
            try:
                if proxy.secret_ref is not None:
                    login = credentials.resolve(proxy.secret_ref)
                    username, password = login.username, login.password
                endpoint = ProxyEndpoint.of(proxy.host, proxy.port, proxy.protocol, username,
                                            password)  # fmt: skip
            except (CredentialUnavailable, ValueError):
                out.append((proxy, None))
                continue
            out.append((proxy, endpoint))
    return out


#: An intake check takes at most this share of the shortest remaining life in its round, and
#: never less than MIN_INTAKE_TIMEOUT seconds (research/providers.md 5.2: at most min(3 s, 5%
#: of the TTL) for a 30 s-2 min proxy; a check that costs a third of its life is not worth it).
INTAKE_TIMEOUT_SHARE = 0.05
MIN_INTAKE_TIMEOUT = 1.0


def intake_timeout(configured: float, remaining_s: float) -> float:
    """The round's check timeout: the upstream's, shortened for short-lived proxies."""
    return min(configured, max(MIN_INTAKE_TIMEOUT, remaining_s * INTAKE_TIMEOUT_SHARE))


def _checked(
    plan: UpstreamFill,
    checkable: list[tuple[FetchedProxy, ProxyEndpoint]],
    clock: Clock,
) -> list[HealthUpdate]:
    """One round of checks: each proxy's update from its check (it was just fetched)."""
    assert plan.check is not None
    shortest = min(proxy.expires_at for proxy, _ in checkable) - clock.now()
    results: list[ProbeResult] = asyncio.run(
        probe_all(
            [endpoint for _, endpoint in checkable],
            plan.check,
            concurrency=plan.check_concurrency,
            timeout=intake_timeout(plan.check_timeout, shortest.total_seconds()),
        )
    )
    now = clock.now()
    return [
        health_of(proxy.proxy_id, result, now, ProxyState.FETCHED)
        for (proxy, _), result in zip(checkable, results, strict=True)
    ]
