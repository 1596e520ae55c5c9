"""One fetch of one upstream, end to end: ask its vendor for what it lacks, put the proxies in
the pool, check each through itself, and apply what the checks found (ADR-005: FETCHED, then
AVAILABLE, SUSPECT or UNHEALTHY). What the fetch task of a claim runs (pool_admin/tasks.py);
plain Python, given its configuration, pool, credentials store and HTTP client.

A proxy is checked once, here, at intake: most vendors' proxies live minutes, and one check
when it arrives (with a timeout of a few seconds) is what a short-lived proxy is worth; after
that, outcome reports (passive health) tell. An upstream that trusts its provider skips the
probe: its proxies are AVAILABLE at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import httpx

from activity.checker import CheckTarget, ProbeResult, ProxyEndpoint, health_of, probe_all
from activity.clock import Clock
from activity.credentials import CredentialUnavailable, FetchCredentials
from activity.providers.entries import ParsedResponse
from activity.providers.fetch import FetchLimits, fetch
from activity.providers.presets import Format
from activity.reconciler import Intake, Reconciler, ReconcileResult, UpstreamTarget
from activity.types import (
    FetchedBatch,
    FetchedProxy,
    HealthResult,
    HealthUpdate,
    ProxyState,
    UpsertResult,
    UpstreamInventory,
)

#: Health updates per ``apply_health`` call (the pool's ``max_health_batch``).
HEALTH_BATCH = 1_000


class FillingPool(Protocol):
    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory: ...

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
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    limits: FetchLimits = field(default_factory=FetchLimits)
    #: None: the provider is trusted, no probe.
    check: CheckTarget | None = None
    check_timeout: float = 5.0
    check_concurrency: int = 200


@dataclass
class FillReport:
    reconcile: ReconcileResult
    checked: int = 0
    #: Proxies by the state their check gave (AVAILABLE for a trusted provider's).
    states: dict[str, int] = field(default_factory=dict)
    health: HealthResult | None = None


def fill(
    now: datetime,
    plan: UpstreamFill,
    *,
    pool: FillingPool,
    credentials: FetchCredentials,
    client: httpx.Client,
    clock: Clock,
    operation_id: str,
    proxy_budget: int,
    take_budget: Callable[[int], int] | None = None,
) -> FillReport:
    """Fetch, upsert, check and mark the upstream's proxies. A provider's error
    (``ProviderError``) propagates with nothing written; a fetch that finds the upstream full
    or its budget spent asks nothing. ``take_budget(n)``, when given, grants how many of those
    ``n`` the account's budget allows now (the scheduler's ``take_proxies``)."""
    reconciler = Reconciler(pool, credentials)
    deficit = reconciler.deficit(plan.target)
    asked = min(deficit, max(0, proxy_budget))
    if take_budget is not None and asked:
        asked = min(asked, take_budget(asked))
    if asked == 0:
        return FillReport(ReconcileResult(deficit=deficit))
    parsed = _ask(plan, client, clock, asked)
    intake = reconciler.prepare(now, plan.target, parsed, keep=asked, operation_id=operation_id)
    refs = [p.secret_ref for b in intake.batches for p in b.proxies if p.secret_ref is not None]
    try:
        result = reconciler.write(intake)
        result.deficit, result.asked = deficit, asked
        endpoints = _endpoints(intake, credentials)
    finally:
        credentials.discard(refs)  # the records carry them now; nothing else may
    report = FillReport(result)
    total = _apply(pool, _before_check(plan, endpoints, clock))
    if plan.check is not None:
        updates = _checked(plan, endpoints, clock)
        report.checked = len(updates)
        total = _apply(pool, updates)
        for update in updates:
            report.states[update.state.value] = report.states.get(update.state.value, 0) + 1
    else:
        report.states[ProxyState.AVAILABLE.value] = total.applied
    report.health = total
    return report


def _apply(pool: FillingPool, updates: list[HealthUpdate]) -> HealthResult:
    total = HealthResult()
    for start in range(0, len(updates), HEALTH_BATCH):
        part = pool.apply_health(updates[start : start + HEALTH_BATCH])
        total = HealthResult(
            total.applied + part.applied,
            total.missing + part.missing,
            total.ignored + part.ignored,
            total.stale + part.stale,
        )
    return total


def _ask(plan: UpstreamFill, client: httpx.Client, clock: Clock, count: int) -> ParsedResponse:
    params = dict(plan.params)
    if plan.count_param:
        params[plan.count_param] = str(count)
    answer = fetch(client, plan.url, clock=clock, limits=plan.limits, params=params,
                   headers=plan.headers)  # fmt: skip
    return plan.format.parse(answer.body, answer.sent_at)


def _endpoints(
    intake: Intake, credentials: FetchCredentials
) -> list[tuple[FetchedProxy, ProxyEndpoint | None]]:
    """Each proxy of the intake with where to check it (None: its credential is gone)."""
    out: list[tuple[FetchedProxy, ProxyEndpoint | None]] = []
    for batch in intake.batches:
        for proxy in batch.proxies:
            username = password = None
            if proxy.secret_ref is not None:
                try:
                    login = credentials.resolve(proxy.secret_ref)
                except CredentialUnavailable:
                    out.append((proxy, None))
                    continue
                username, password = login.username, login.password
            protocol = "socks5" if proxy.protocol.startswith("socks") else "http"
            out.append((proxy, ProxyEndpoint(proxy.host, proxy.port, protocol, username, password)))
    return out


def _before_check(
    plan: UpstreamFill,
    endpoints: list[tuple[FetchedProxy, ProxyEndpoint | None]],
    clock: Clock,
) -> list[HealthUpdate]:
    """CHECKING while the probe runs (the console shows it); a trusted provider's proxies go
    AVAILABLE at once instead."""
    checkable = [(proxy, endpoint) for proxy, endpoint in endpoints if endpoint is not None]
    if plan.check is None:
        now = clock.now()
        return [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now) for p, _ in checkable]
    return [HealthUpdate(p.proxy_id, ProxyState.CHECKING, clock.now()) for p, _ in checkable]


def _checked(
    plan: UpstreamFill,
    endpoints: list[tuple[FetchedProxy, ProxyEndpoint | None]],
    clock: Clock,
) -> list[HealthUpdate]:
    checkable = [(proxy, endpoint) for proxy, endpoint in endpoints if endpoint is not None]
    assert plan.check is not None
    results: list[ProbeResult] = asyncio.run(
        probe_all(
            [endpoint for _, endpoint in checkable if endpoint is not None],
            plan.check,
            concurrency=plan.check_concurrency,
            timeout=plan.check_timeout,
        )
    )
    now = clock.now()
    return [
        health_of(proxy.proxy_id, result, now, ProxyState.FETCHED)
        for (proxy, _), result in zip(checkable, results, strict=True)
    ]
