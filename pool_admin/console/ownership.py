"""The console's ownership page: live worker sessions (``PoolInspector.worker_sessions``), and
for one worker its assignments and drain tickets (``ControlStore``), read through the pool's
ports only, each read bounded (the page says when it shows part of it); beside them the
configured worker groups and workers from PostgreSQL (console/groups.py).

A worker's freshness, as the control plane sees it (``FRESHNESS``, which the page shows as
its legend):

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
from activity.types import DrainTicket, PoolOptions, WorkerAssignments
from pool_admin.bootstrap import get_pool
from pool_admin.console.groups import Configured, Fleet, fleet

#: Sessions, and one worker's assignments and tickets, one page shows at most.
MAX_WORKERS = 200
MAX_ROWS = 200


#: How long a runtime report stays fresh: pool_admin runs the pool with its default options.
_REPORT_TTL_S = int(PoolOptions().report_ttl.total_seconds())

#: Each freshness and what it means to an operator: the page's legend and its cells' titles.
FRESHNESS = {
    "fresh": "Its last runtime report is this session's and younger than the pool's report "
    f"TTL ({_REPORT_TTL_S} s): the pool counts the free slots it reports.",
    "stale": "Its session is live and it ACKed a snapshot, but it has no fresh report (none "
    "yet, or older than the report TTL): it may still serve from that snapshot, and the pool "
    "counts none of its slots (fails closed).",
    "failing closed": "Its session is live but it never ACKed a snapshot: it serves nothing, "
    "and the pool counts none of its slots.",
}


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
    #: The configured groups and workers (None: not read, the request was refused).
    fleet: Fleet | None = None

    @property
    def legend(self) -> list[tuple[str, str]]:
        return list(FRESHNESS.items())

    @property
    def sessions(self) -> list[tuple[WorkerStatus, Configured | None]]:
        """Each live session with its worker as configured (None: no such worker)."""
        if self.live is None:
            return []
        configured = self.fleet.configured if self.fleet is not None else {}
        return [(w, configured.get(w.session.worker_id)) for w in self.live.workers]


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
    if not page.problem:
        page.fleet = fleet(page.live)
    return page
