"""RedisPool: ADR-005's deep module on Redis. Callers see the constructor and the ports.

Python validates, digests, does the TTL/safety-margin arithmetic and resolves credentials
(``activity._validation``, shared with MemoryPool) before anything is sent; each port method is
then one Lua script (``lua/``), one atomic step, exactly as each MemoryPool call holds its lock.
Keys, scripts and reply formats stay private to this package.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

import redis

from activity import _validation as v
from activity._time import from_ms, span_ms
from activity.clock import Clock, SystemClock
from activity.credentials import CredentialResolver, NoCredentials
from activity.errors import InvalidBatch, InvalidRequest
from activity.inspection import BrowsePage, BrowseQuery, LiveWorkers, ProxyDetail
from activity.lua_functions import Scripts
from activity.redis._codec import (
    as_dict,
    as_list,
    candidate,
    due_check,
    expired_tally,
    extracted,
    quota_arg,
    static_record,
)
from activity.redis._inspection import InspectionCalls
from activity.redis._ownership import OwnershipCalls
from activity.redis._scripts import POOL_LIBRARY
from activity.redis._workers import WorkerCalls
from activity.redis_transport import bounded_client
from activity.types import (
    AssignableProxies,
    Assignment,
    CallQuota,
    DrainStatus,
    DrainTicket,
    DueChecks,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    HealthResult,
    HealthUpdate,
    Outcome,
    OutcomeReport,
    OutcomeResult,
    PoolOptions,
    RecheckPolicy,
    ReportResult,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    SweepResult,
    UpsertResult,
    UpstreamInventory,
    WorkerAssignments,
    WorkerRevision,
    WorkerSession,
)

__all__ = ["RedisPool"]

#: Socket timeout of the pool's own connections when the given client has none: every call
#: is bounded in time (ARCHITECTURE "Every remote call is bounded in time").
DEFAULT_CALL_TIMEOUT = timedelta(seconds=2)


class RedisPool:
    """Every activity-pool port on one Redis (single instance or Sentinel)."""

    def __init__(
        self,
        client: redis.Redis,
        options: PoolOptions | None = None,
        *,
        clock: Clock | None = None,
        credentials: CredentialResolver | None = None,
        call_timeout: timedelta = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        if not isinstance(client, redis.Redis):
            raise InvalidRequest("RedisPool takes a redis.Redis client")
        self.options = options or PoolOptions()
        self._clock = clock or SystemClock()
        self._credentials = credentials or NoCredentials()
        self._client = bounded_client(client, call_timeout)
        # `{activity}` is the hash tag: every key lands in one Cluster slot, so every script
        # stays atomic if the deployment ever moves to Cluster single-slot.
        self._ns = f"{self.options.prefix}:{{activity}}:"
        self._scripts = Scripts(self._client, self._ns + "meta", POOL_LIBRARY)
        self._workers = WorkerCalls(self._scripts, self.options)
        self._ownership = OwnershipCalls(self._scripts, self.options, self._ns, self._now)
        self._inspection = InspectionCalls(self._scripts, self.options, self._now)

    def _now(self) -> int:
        return v.aware_ms(self._clock.now(), "clock")

    def close(self) -> None:
        """Close the pool's own connections (a copy of the given client's settings; the given
        client is the caller's to close)."""
        self._client.connection_pool.disconnect()

    # ------------------------------------------------------------------ Upserter
    def upsert_fetched(self, batch: FetchedBatch) -> UpsertResult:
        now = self._now()
        prepared = v.prepare_batch(batch, self.options, self._credentials, now)
        # Without a caller's operation ID, one of our own still makes each chunk's low-level
        # retry (after a dropped connection) return the stored result.
        operation = batch.operation_id or f"internal-{uuid.uuid4().hex}"
        chunks = prepared.chunks(self.options.script_batch_cap)
        whole = f"op:{v.digest('op-upsert-call', prepared.upstream_id, operation)}"
        nonce = uuid.uuid4().hex
        totals: dict[str, int] = {"dropped": prepared.dropped}
        replayed = False
        new: list[str] = []
        for index, chunk in enumerate(chunks):
            op = v.digest("op-upsert", prepared.upstream_id, operation, str(index))
            reply = self._scripts.call(
                "upsert",
                now,
                prepared.upstream_id,
                prepared.max_size,
                self.options.clean_budget,
                self.options.scan_budget,
                prepared.fetched_ms,
                f"op:{op}",
                prepared.content_digest,
                span_ms(self.options.operation_ttl),
                [candidate(c) for c in chunk],
                whole,
                index == len(chunks) - 1,
                totals,
                nonce,
                *[static_record(c, prepared) for c in chunk],
                retry_safe=True,
            )
            if reply.pop("whole", False):
                # The finished call, as it was first answered (replayed unless it was ours).
                totals, replayed = reply, bool(reply["replayed"])
                break
            reply.pop("replayed")  # a chunk replayed after a dropped connection: same call
            new.extend(str(pid) for pid in as_list(reply.pop("new", [])))
            for name, value in reply.items():
                totals[name] = totals.get(name, 0) + int(value)
        return UpsertResult(
            inserted=int(totals["inserted"]),
            refreshed=int(totals["refreshed"]),
            dropped=int(totals["dropped"]),
            conflicts=int(totals["conflicts"]),
            skipped_terminal=int(totals["skipped_terminal"]),
            over_capacity=int(totals["over_capacity"]),
            cleaned=int(totals["cleaned"]),
            replayed=replayed,
            quarantined=int(totals.get("quarantined", 0)),  # absent from older stored results
            suspect=int(totals.get("suspect", 0)),
            inserted_ids=() if replayed else tuple(new),
        )

    # ------------------------------------------------------------------ HealthStore
    def apply_health(self, updates: Sequence[HealthUpdate]) -> HealthResult:
        now = self._now()
        prepared = v.prepare_health(updates, self.options, now)
        rows = [
            [
                u.proxy_id,
                u.state.value,
                u.checked_ms,
                u.latency_ms,
                u.failure_reason,
                None if u.expected is None else u.expected.value,
            ]
            for u in prepared
        ]
        reply = self._scripts.call("apply_health", now, self.options.clean_budget, rows)
        return HealthResult(**{name: int(value) for name, value in reply.items()})

    # ------------------------------------------------------------------ InventoryReader
    def inventory(self, upstream_id: str) -> int:
        v.token(upstream_id, "upstream_id")
        reply = self._scripts.call("inventory", self._now(), upstream_id, self.options.scan_budget)
        return int(reply)

    # ------------------------------------------------------------------ ExtractionStore
    def extract(self, request: ExtractRequest) -> ExtractResult:
        req = v.prepare_extract(request, self.options)
        kind, digest = req.replay_kind, req.replay_digest
        # With neither a key nor a request ID nothing is stored, so nothing could answer a
        # retry: such a call is not retried (a lost reply is StoreUnavailable, outcome unknown).
        # The API always passes its request ID.
        replay = "" if kind is None or digest is None else f"{kind}:{digest}"
        reply = self._scripts.call(
            "extract",
            self._now(),
            req.client_id,
            req.count,
            req.mode.value,
            [[dim, list(values)] for dim, values in req.filters],
            -1 if req.max_health_age_ms is None else req.max_health_age_ms,
            req.min_remaining_ms,
            req.reserve,
            self.options.scan_budget,
            self.options.clean_budget,
            replay,
            req.request_digest,
            req.replay_ttl_ms,
            uuid.uuid4().hex,
            quota_arg(req.quota),
            retry_safe=bool(replay),
            history=True,
        )
        result = reply["result"]
        proxies = tuple(extracted(p) for p in as_list(result["proxies"]))
        return ExtractResult(
            proxies,
            int(result["requested"]),
            replayed=bool(reply["replayed"]),
            # A replay names the generation its proxies were handed out under, which may have
            # ended since (results stored before it was kept name the current one).
            generation=str(result.get("generation") or reply["generation"]),
        )

    # ------------------------------------------------------------------ CallCounter
    def charge_call(self, client_id: str, quota: CallQuota) -> None:
        client, prepared = v.prepare_charge(client_id, quota, self.options)
        self._scripts.call("charge_call", self._now(), client, quota_arg(prepared))

    # ------------------------------------------------------------------ OwnershipRepository:
    # activity/redis/_ownership.py
    def assign(self, now: datetime, proxy_id: str, worker_id: str, ttl: timedelta) -> Assignment:
        return self._ownership.assign(now, proxy_id, worker_id, ttl)

    def renew(
        self, now: datetime, proxy_id: str, worker_id: str, epoch: int, ttl: timedelta
    ) -> Assignment:
        return self._ownership.renew(now, proxy_id, worker_id, epoch, ttl)

    def begin_drain(self, proxy_id: str, worker_id: str, epoch: int) -> Assignment:
        return self._ownership.begin_drain(proxy_id, worker_id, epoch)

    def acknowledge_drain(
        self, proxy_id: str, worker_id: str, epoch: int, active: int, reserved: int
    ) -> DrainStatus:
        return self._ownership.acknowledge_drain(proxy_id, worker_id, epoch, active, reserved)

    def get(self, proxy_id: str) -> Assignment | None:
        return self._ownership.get(proxy_id)

    def expire(self, now: datetime, limit: int) -> list[Assignment]:
        return self._ownership.expire(now, limit)

    # ------------------------------------------------------------------ SessionWriter,
    # ControlStore, ReportWriter, RuntimeReader: activity/redis/_workers.py
    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        return self._workers.open_session(worker_id, session_id, ttl)

    def worker_assignments(self, worker_id: str, limit: int, offset: int = 0) -> WorkerAssignments:
        return self._workers.worker_assignments(worker_id, limit, offset)

    def worker_revision(self, worker_id: str) -> WorkerRevision:
        return self._workers.worker_revision(worker_id)

    def assignable(
        self, upstream_id: str, limit: int, min_remaining: timedelta
    ) -> AssignableProxies:
        return self._workers.assignable(upstream_id, limit, min_remaining, self._now())

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        return self._workers.issue_snapshot(worker_id, session_id, ref, proxy_ids)

    def acknowledge_snapshot(self, worker_id: str, session_id: str, version: int) -> WorkerSession:
        return self._workers.acknowledge_snapshot(worker_id, session_id, version)

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]:
        return self._workers.drain_tickets(worker_id, limit)

    def write_report(self, report: RuntimeReport) -> ReportResult:
        return self._workers.write_report(report)

    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        return self._workers.read_runtime(worker_id)

    # ------------------------------------------------------------------ RecheckQueue
    def take_due_checks(
        self, upstream_id: str, now: datetime, policy: RecheckPolicy, limit: int
    ) -> DueChecks:
        p = v.prepare_recheck(upstream_id, now, policy, limit, self.options)
        reply = self._scripts.call(
            "take_due_checks",
            p.now_ms,
            p.upstream_id,
            p.min_interval_ms,
            p.lifetime_fraction,
            p.min_remaining_ms,
            p.limit,
            self.options.scan_budget,
            "1" if p.available else "0",
        )
        checks = tuple(
            due_check(state, checked, static) for state, checked, static in as_list(reply["checks"])
        )
        return DueChecks(checks, bool(reply["complete"]))

    # ------------------------------------------------------------------ SlotsReader
    def upstream_inventory(self, upstream_id: str) -> UpstreamInventory:
        return self._workers.upstream_inventory(upstream_id, self._now())

    def extractable(self, upstream_id: str) -> int:
        return self._workers.extractable(upstream_id, self._now())

    # ------------------------------------------------------------------ Maintenance
    def sweep(self, limit: int) -> SweepResult:
        n = v.limit(limit, self.options)
        # Retried once after a lost reply: the retry replays the result (and the expiry tally
        # it took, which would otherwise be gone) instead of sweeping again.
        nonce = uuid.uuid4().hex
        op = v.digest("op-sweep", nonce)
        reply = self._scripts.call("sweep", self._now(), n, f"op:{op}", nonce, retry_safe=True)
        return SweepResult(
            int(reply["expired"]),
            int(reply["sessions"]),
            bool(reply["more"]),
            int(reply["quarantines"]),
            expired_tally(as_dict(reply["tally"])),
        )

    # ------------------------------------------------------------------ PoolInspector:
    # activity/redis/_inspection.py
    def browse(self, query: BrowseQuery) -> BrowsePage:
        return self._inspection.browse(query)

    def worker_sessions(self, limit: int) -> LiveWorkers:
        return self._inspection.worker_sessions(limit)

    def proxy_detail(self, proxy_id: str) -> ProxyDetail | None:
        return self._inspection.proxy_detail(proxy_id)

    # ------------------------------------------------------------------ OutcomeStore
    def report_outcome(self, report: OutcomeReport) -> OutcomeResult:
        now = self._now()
        p = v.prepare_outcome(report, self.options, now)
        reply = self._scripts.call(
            "report_outcome",
            now,
            p.client_id,
            p.proxy_id,
            p.outcome.value,
            p.host or "",
            "" if p.until_ms is None else p.until_ms,
            self.options.clean_budget,
            self.options.suspect_after_failures,
            span_ms(self.options.failure_window),
        )
        until, suspect = reply["q"], reply["s"]
        return OutcomeResult(
            proxy_id=p.proxy_id,
            upstream_id=reply["u"],
            outcome=Outcome(reply["o"]),
            target_host=reply["h"] or None,
            replayed=bool(reply["r"]),
            quarantined_until=from_ms(int(until)) if until else None,
            suspect_until=from_ms(int(suspect)) if suspect else None,
        )

    def quarantine_of(self, proxy_ids: Sequence[str], now: datetime) -> dict[str, frozenset[str]]:
        ids = v.quarantine_query(proxy_ids, self.options)
        now_ms = v.aware_ms(now, "now", InvalidBatch)
        reply = self._scripts.call("quarantine_of", now_ms, list(ids), self.options.scan_budget)
        return {pid: frozenset(as_list(hosts)) for pid, hosts in as_list(reply)}
