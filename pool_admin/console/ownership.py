"""The console's ownership page: live worker sessions (``PoolInspector.worker_sessions``), and
for one worker its assignments and drain tickets (``ControlStore``), read through the pool's
ports only, each read bounded (the page says when it shows part of it).

A worker's freshness, as the control plane sees it:

* **fresh**: its runtime report is this session's and not expired: its slots count;
* **stale**: its session is live and it holds an ACKed snapshot, but no fresh report: it may
  still serve from that snapshot, and the pool counts none of its slots (fails closed);
* **failing closed**: its session is live but it never ACKed a snapshot: it serves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from activity.errors import ActivityError, InvalidRequest
from activity.inspection import LiveWorkers, WorkerStatus
from activity.types import DrainTicket, WorkerAssignments
from pool_admin.bootstrap import get_pool

#: Sessions, and one worker's assignments and tickets, one page shows at most.
MAX_WORKERS = 200
MAX_ROWS = 200


def freshness(worker: WorkerStatus) -> str:
    if worker.runtime is not None:
        return "fresh"
    return "stale" if worker.session.acked is not None else "failing closed"


def report_age(worker: WorkerStatus, now: datetime) -> float | None:
    at = worker.runtime.reported_at if worker.runtime else None
    return None if at is None else max(0.0, (now - at).total_seconds())


@dataclass
class WorkerPage:
    worker_id: str
    assignments: WorkerAssignments | None = None
    tickets: list[DrainTicket] = field(default_factory=list)
    tickets_complete: bool = True


@dataclass
class OwnershipPage:
    live: LiveWorkers | None = None
    worker: WorkerPage | None = None
    unavailable: str = ""
    problem: str = ""


def ownership_page(worker_id: str | None) -> OwnershipPage:
    page = OwnershipPage()
    pool = get_pool()
    try:
        page.live = pool.worker_sessions(MAX_WORKERS)
        if worker_id:
            one = WorkerPage(worker_id)
            one.assignments = pool.worker_assignments(worker_id, MAX_ROWS)
            # One more than shown: whether the worker has more tickets than the page.
            tickets = pool.drain_tickets(worker_id, MAX_ROWS + 1)
            one.tickets, one.tickets_complete = tickets[:MAX_ROWS], len(tickets) <= MAX_ROWS
            page.worker = one
    except InvalidRequest:
        page.problem = "not a worker ID"
    except ActivityError as exc:
        page.unavailable = exc.code
    return page
