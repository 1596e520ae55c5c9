"""RedisPool's worker-runtime family: sessions, snapshots and drain tickets, runtime reports, slots.

The pool delegates these ports here (activity/redis/__init__.py); the Lua is open_session.lua,
worker_assignments.lua, worker_revision.lua, assignable.lua, issue_snapshot.lua,
acknowledge_snapshot.lua, drain_tickets.lua, write_report.lua, read_runtime.lua,
upstream_inventory.lua and extractable.lua with lua/lib/sessions_slots.lua.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from activity import _validation as v
from activity._time import from_ms, span_ms
from activity.lua_functions import Scripts
from activity.redis._codec import (
    as_list,
    assignment,
    drain_ticket,
    held_proxy,
    runtime_view,
    session,
)
from activity.types import (
    AssignableProxies,
    AssignableProxy,
    DrainTicket,
    PoolOptions,
    ReportResult,
    RuntimeReport,
    RuntimeView,
    SnapshotRef,
    UpstreamInventory,
    WorkerAssignments,
    WorkerRevision,
    WorkerSession,
)


def lease_ms(ttl: object, options: PoolOptions) -> int:
    """A lease or session TTL in ms: 1 ms to ``max_lease_ttl`` (else InvalidRequest)."""
    return v.duration_ms(ttl, "ttl", minimum=1, maximum=span_ms(options.max_lease_ttl))


class WorkerCalls:
    """The worker-runtime ports of one namespace, on the pool's scripts."""

    def __init__(self, scripts: Scripts, options: PoolOptions) -> None:
        self._scripts = scripts
        self.options = options

    # ------------------------------------------------------------------ sessions
    def open_session(self, worker_id: str, session_id: str, ttl: timedelta) -> WorkerSession:
        v.text(worker_id, "worker_id", self.options)
        v.text(session_id, "session_id", self.options)
        ttl_ms = lease_ms(ttl, self.options)
        reply = self._scripts.call("open_session", worker_id, session_id, ttl_ms, history=True)
        return session(worker_id, reply)

    # ------------------------------------------------------------------ ControlStore
    def worker_assignments(self, worker_id: str, limit: int, offset: int = 0) -> WorkerAssignments:
        v.text(worker_id, "worker_id", self.options)
        n = v.count(limit, "limit", low=1, high=self.options.max_report_entries)
        at = v.count(offset, "offset", low=0, high=self.options.max_report_entries)
        reply = self._scripts.call("worker_assignments", worker_id, n, at)
        items = tuple(assignment(a) for a in as_list(reply["assignments"]))
        held = {str(h["id"]): held_proxy(h["s"], h["j"]) for h in as_list(reply["held"])}
        return WorkerAssignments(
            int(reply["epoch"]), items, bool(reply["complete"]), held, int(reply["revision"])
        )

    def worker_revision(self, worker_id: str) -> WorkerRevision:
        v.text(worker_id, "worker_id", self.options)
        reply = self._scripts.call("worker_revision", worker_id)
        live = reply["s"]
        return WorkerRevision(int(reply["r"]), None if live is None else session(worker_id, live))

    def assignable(
        self, upstream_id: str, limit: int, min_remaining: timedelta, now_ms: int
    ) -> AssignableProxies:
        v.token(upstream_id, "upstream_id")
        n = v.count(limit, "limit", low=1, high=self.options.scan_budget)
        remaining = v.duration_ms(min_remaining, "min_remaining")
        reply = self._scripts.call("assignable", now_ms, upstream_id, n, remaining)
        proxies = tuple(
            AssignableProxy(str(p["id"]), int(p["m"]), from_ms(int(p["uu"])))
            for p in as_list(reply["proxies"])
        )
        return AssignableProxies(proxies, complete=bool(reply["complete"]))

    def issue_snapshot(
        self, worker_id: str, session_id: str, ref: SnapshotRef, proxy_ids: Collection[str]
    ) -> int:
        v.snapshot_ref(ref, self.options)
        included = v.proxy_ids(proxy_ids, self.options, "proxy_ids")
        v.text(worker_id, "worker_id", self.options)
        v.text(session_id, "session_id", self.options)
        reply = self._scripts.call(
            "issue_snapshot",
            worker_id,
            session_id,
            {"v": ref.version, "e": ref.epoch, "c": ref.checksum},
            sorted(included),
            self.options.scan_budget,
        )
        return int(reply)

    def acknowledge_snapshot(self, worker_id: str, session_id: str, version: int) -> WorkerSession:
        v.count(version, "version", low=1, high=v.MAX_COUNTER)
        v.text(worker_id, "worker_id", self.options)
        v.text(session_id, "session_id", self.options)
        reply = self._scripts.call("acknowledge_snapshot", worker_id, session_id, version)
        return session(worker_id, reply)

    def drain_tickets(self, worker_id: str, limit: int) -> list[DrainTicket]:
        v.text(worker_id, "worker_id", self.options)
        n = v.limit(limit, self.options)
        return [drain_ticket(t) for t in as_list(self._scripts.call("drain_tickets", worker_id, n))]

    # ------------------------------------------------------------------ reports
    def write_report(self, report: RuntimeReport) -> ReportResult:
        prepared = v.prepare_report(report, self.options)
        body = {
            "w": report.worker_id,
            "sid": report.session_id,
            "seq": report.sequence,
            "sv": report.snapshot_version,
            "ep": report.epoch,
            "en": [[e.proxy_id, e.epoch, e.active, e.reserved, e.draining] for e in report.entries],
        }
        reply = self._scripts.call(
            "write_report",
            body,
            prepared.body_digest,
            span_ms(self.options.report_ttl),
            self.options.scan_budget,
        )
        return ReportResult(
            replayed=bool(reply["replayed"]), released=tuple(as_list(reply["released"]))
        )

    def read_runtime(self, worker_id: str) -> RuntimeView | None:
        v.text(worker_id, "worker_id", self.options)
        reply = self._scripts.call("read_runtime", worker_id)
        return None if reply is None else runtime_view(worker_id, reply)

    # ------------------------------------------------------------------ SlotsReader
    def upstream_inventory(self, upstream_id: str, now_ms: int) -> UpstreamInventory:
        v.token(upstream_id, "upstream_id")
        reply = self._scripts.call(
            "upstream_inventory", now_ms, upstream_id, self.options.scan_budget
        )
        return UpstreamInventory(
            int(reply["managed"]),
            int(reply["available_slots"]),
            extractable=int(reply["extractable"]),
            gateway_held=int(reply["gateway_held"]),
            gateway_capacity=int(reply["gateway_capacity"]),
        )

    def extractable(self, upstream_id: str, now_ms: int) -> int:
        v.token(upstream_id, "upstream_id")
        reply = self._scripts.call("extractable", now_ms, upstream_id, self.options.scan_budget)
        return int(reply)
