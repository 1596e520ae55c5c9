"""A worker's holdings read in pages, as one read.

``ControlStore.worker_assignments`` reads a page of a worker's holdings in one atomic step: one
Lua script, which holds Redis for its whole run (about 14 ms per 1,000 held proxies on the
machine of docs/PERFORMANCE.md: a worker holding 10,000 in one script kept every other client
waiting 140 ms). Read in pages of ``HOLDINGS_PAGE``, each page reports the worker's holdings
revision, which moves with every change to what the worker holds; pages all of the first
page's revision are one consistent read, as if read at once at the first page's epoch (a drain
of this worker begun after it would have moved the revision). A page whose revision moved
starts the read again, at most ``ATTEMPTS`` times; a worker whose holdings change faster than
that is "temporarily unavailable" (``ScanBudgetExhausted``), never a mix of two states.
"""

from __future__ import annotations

from activity.errors import ScanBudgetExhausted
from activity.ports import ControlStore
from activity.types import Assignment, HeldProxy, WorkerAssignments

#: Proxies per page: about 14 ms of Redis at the measured rate.
HOLDINGS_PAGE = 1_000
ATTEMPTS = 3


def read_holdings(
    pool: ControlStore, worker_id: str, maximum: int, page: int = HOLDINGS_PAGE
) -> WorkerAssignments:
    """The worker's holdings, at most ``maximum`` (``complete`` False when it holds more)."""
    for _ in range(ATTEMPTS):
        read = _pages(pool, worker_id, maximum, page)
        if read is not None:
            return read
    raise ScanBudgetExhausted(
        f"the worker's holdings changed during each of {ATTEMPTS} paged reads"
    )


def _pages(pool: ControlStore, worker_id: str, maximum: int, page: int) -> WorkerAssignments | None:
    first = pool.worker_assignments(worker_id, min(page, maximum), 0)
    items: list[Assignment] = list(first.assignments)
    held: dict[str, HeldProxy] = dict(first.held)
    last = first
    while not last.complete and len(items) < maximum:
        last = pool.worker_assignments(worker_id, min(page, maximum - len(items)), len(items))
        if last.revision != first.revision or not last.assignments:
            return None  # the holdings changed between the pages
        items.extend(last.assignments)
        held.update(last.held)
    return WorkerAssignments(first.epoch, tuple(items), last.complete, held, first.revision)
