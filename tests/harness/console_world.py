"""A pool with something of everything, seeded through the pool's and the scheduler's ports
and the usage aggregates, for the console's tests (server-side and in the browser).

Upstream ``acme-us`` (account ``acme``): 14 proxies fetched, one in every state: 8 checked
AVAILABLE (2 then extracted by client ``crawler-1``), 2 SUSPECT, 1 UNHEALTHY, 1 left FETCHED,
1 CHECKING, 1 REMOVED; each takes 5 connections, and the gateway may hold 30% of the
upstream. Worker ``edge-1`` holds 2 of the AVAILABLE ones (one draining, its ticket bound to
snapshot 1, still busy), with a fresh report; worker sessions ``edge-2`` (no snapshot: failing
closed) and ``edge-3`` (no report: stale). ``acme-eu``: 3 AVAILABLE. The scheduler runs a
fetch of acme-us and has acme-eu due in 5 minutes. The last hour: 20 fetched, 8 extracted, 3
of the 4 that expired never used; 10 checks, 8 passed. One open alert on acme-us. Configured
in PostgreSQL: group ``edge`` (target 40 connections) with workers edge-1, edge-2, edge-4
(enabled, no session) and edge-5 (disabled); group ``spare`` (target 0) with none; edge-3's
session belongs to no configured worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from activity import ExtractMode, ExtractRequest
from activity.credentials import SecretRef
from activity.scheduler.types import AccountLimits
from activity.types import (
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ProxyState,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)
from pool_admin import alerts
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.credential_store import CredentialStore
from pool_admin.config.models import (
    Alert,
    Credential,
    GatewayWorker,
    ProviderAccount,
    Upstream,
    WorkerGroup,
)
from pool_admin.metrics.aggregates import apply_events
from pool_admin.metrics.events import Event

PROXY_PASSWORD = "console-pw-Zq81"  # must never appear in a page


def console_user(name: str, *codenames: str, password: str = "a-Long-pass-123") -> Any:
    """A staff user with these of the console's permissions (``view_console``,
    ``operate_pool``) and no other."""
    user = get_user_model().objects.create_user(name, password=password, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="console", codename__in=codenames)
    )
    return user


@dataclass
class World:
    now: datetime
    us: Upstream
    eu: Upstream
    extracted: list[str]
    owned: list[str]


def _proxies(upstream: str, n: int, now: datetime, ref: SecretRef) -> list[FetchedProxy]:
    return [
        FetchedProxy(
            proxy_id=f"{upstream}-p{i}", unique_key=f"{upstream}-10.7.0.{i + 1}:8080",
            host=f"10.7.{len(upstream)}.{i + 1}", port=8080, protocol="http",
            expires_at=now + timedelta(minutes=30), region="us" if upstream.endswith("us")
            else "de", carrier="att", secret_ref=ref,
            max_concurrency=5 if upstream.endswith("us") else 1,
        )
        for i in range(n)
    ]  # fmt: skip


def seed_world() -> World:
    now = datetime.now(UTC)
    account = ProviderAccount.objects.create(name="acme", api_calls_per_minute=60,
                                             proxies_per_minute=1_000)  # fmt: skip
    us = Upstream.objects.create(
        name="acme-us",
        account=account,
        kind="preset",
        preset="webshare_list",
        endpoint_url="http://vendor.invalid/",
        gateway_share_percent=30,
    )
    eu = Upstream.objects.create(
        name="acme-eu",
        account=account,
        kind="preset",
        preset="webshare_list",
        endpoint_url="http://vendor.invalid/",
    )
    pool = get_pool()
    ref = CredentialStore().put("console-proxy-auth", PROXY_PASSWORD, username="console-user",
                                purpose=Credential.Purpose.PROXY_AUTH).ref  # fmt: skip
    pool.upsert_fetched(FetchedBatch("acme-us", _proxies("acme-us", 14, now, ref), 1000,
                                     timedelta(seconds=5), now))  # fmt: skip
    pool.upsert_fetched(FetchedBatch("acme-eu", _proxies("acme-eu", 3, now, ref), 1000,
                                     timedelta(seconds=5), now))  # fmt: skip
    states = [ProxyState.AVAILABLE] * 8 + [ProxyState.SUSPECT] * 2 + [ProxyState.UNHEALTHY]
    states += [None, ProxyState.CHECKING, ProxyState.REMOVED]  # p11: no check, FETCHED
    pool.apply_health([HealthUpdate(f"acme-us-p{i}", s, now, latency_ms=30)
                       for i, s in enumerate(states) if s is not None])  # fmt: skip
    pool.apply_health([HealthUpdate(f"acme-eu-p{i}", ProxyState.AVAILABLE, now, latency_ms=30)
                       for i in range(3)])  # fmt: skip
    taken = pool.extract(ExtractRequest("crawler-1", 2, ExtractMode.PARTIAL,
                                        filters=_upstream("acme-us")))  # fmt: skip
    extracted = [p.proxy_id for p in taken.proxies]
    free = [f"acme-us-p{i}" for i in range(8) if f"acme-us-p{i}" not in extracted]
    owned = free[:2]
    assignments = [pool.assign(now, pid, "edge-1", timedelta(minutes=10)) for pid in owned]
    pool.begin_drain(owned[1], "edge-1", assignments[1].epoch)
    # Three worker sessions: edge-1 fresh (an ACKed snapshot without the draining proxy, which
    # binds its ticket, and a report), edge-2 failing closed (no snapshot ACKed), edge-3 stale
    # (an ACKed empty snapshot, no report).
    pool.open_session("edge-1", "sess-1", timedelta(minutes=10))
    held = pool.worker_assignments("edge-1", 100)
    ref = SnapshotRef(1, held.epoch, "c0ffee0123456789")
    pool.issue_snapshot("edge-1", "sess-1", ref, [owned[0]])
    pool.acknowledge_snapshot("edge-1", "sess-1", 1)
    entries = (
        RuntimeEntry(owned[0], assignments[0].epoch, 1, 0),
        RuntimeEntry(owned[1], assignments[1].epoch, 1, 0, True),  # busy: not released yet
    )
    pool.write_report(RuntimeReport("edge-1", "sess-1", 1, 1, held.epoch, entries))
    pool.open_session("edge-2", "sess-2", timedelta(minutes=9))
    pool.open_session("edge-3", "sess-3", timedelta(minutes=8))
    pool.issue_snapshot("edge-3", "sess-3", SnapshotRef(1, held.epoch, "ab12"), [])
    pool.acknowledge_snapshot("edge-3", "sess-3", 1)
    sched = get_scheduler()
    sched.schedule("acme", "acme-us", now - timedelta(seconds=1))
    sched.schedule("acme", "acme-eu", now + timedelta(minutes=5))
    claim = sched.claim(now, "acme", AccountLimits(concurrency=1, calls_per_minute=60),
                        timedelta(minutes=2))  # fmt: skip
    assert getattr(claim, "upstream_id", None) == "acme-us", claim
    ms = int(now.timestamp() * 1000)
    apply_events([
        Event("fetch", ms, {"upstream": "acme-us", "received": 21, "inserted": 20,
                            "refreshed": 0, "available": 16, "dropped": {"bad_port": 1}}),
        Event("check", ms, {"upstream": "acme-us", "source": "intake",
                            "states": {"available": 8, "unhealthy": 2}, "latency_ms": 400,
                            "timed": 10}),
        Event("extract", ms, {"client": "crawler-1", "outcome": "ok", "returned": 8,
                              "duration_ms": 9, "draws": [["acme-us", "us", 8, 80_000]]}),
        Event("expired", ms, {"upstream": "acme-us", "used": 1, "unused": 3}),
    ])  # fmt: skip
    for _ in range(3):
        alerts.record(us, Alert.Kind.FETCH_FAILING, failed=True, detail="vendor said 500")
    edge = WorkerGroup.objects.create(name="edge", target_capacity=40)
    WorkerGroup.objects.create(name="spare", target_capacity=0)
    for name in ("edge-1", "edge-2", "edge-4", "edge-5"):
        GatewayWorker.objects.create(name=name, group=edge, enabled=name != "edge-5")
    assert Alert.objects.filter(opened_at__isnull=False, closed_at__isnull=True).count() == 1
    return World(now, us, eu, extracted, owned)


def _upstream(name: str):
    from activity import ExtractFilters

    return ExtractFilters(upstream=name)
