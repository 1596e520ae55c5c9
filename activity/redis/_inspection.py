"""RedisPool's console reads (port PoolInspector): a bounded page of the pool in expiry order,
the live workers, and one proxy whole.

The pool delegates these calls here (activity/redis/__init__.py); the Lua is browse.lua,
worker_sessions.lua and proxy_detail.lua; MemoryPool's pair is activity/memory/inspection.py.
"""

from __future__ import annotations

from collections.abc import Callable

from activity import _validation as v
from activity._validation.inspection import prepare_browse
from activity.inspection import (
    BrowseCursor,
    BrowsePage,
    BrowseQuery,
    LiveWorkers,
    ProxyDetail,
    WorkerStatus,
)
from activity.lua_functions import Scripts
from activity.redis._codec import as_list, detail_of, proxy_summary, runtime_view, session
from activity.types import PoolOptions


class InspectionCalls:
    """The console's reads of one namespace, on the pool's scripts; ``now`` is the pool's
    clock in ms (what has expired by it is not shown)."""

    def __init__(self, scripts: Scripts, options: PoolOptions, now: Callable[[], int]) -> None:
        self._scripts = scripts
        self.options = options
        self._now = now

    def browse(self, query: BrowseQuery) -> BrowsePage:
        q = prepare_browse(query, self.options)
        reply = self._scripts.call(
            "browse",
            self._now(),
            q.upstream,
            q.state,
            q.protocol,
            q.region,
            q.carrier,
            "" if q.after_ms is None else q.after_ms,
            q.after_id,
            q.limit,
            q.budget,
        )
        proxies = tuple(proxy_summary(*row) for row in as_list(reply["proxies"]))
        after = reply.get("next")
        return BrowsePage(
            proxies=proxies,
            next=None if not after else BrowseCursor(int(after[0]), str(after[1])),
            examined=int(reply["examined"]),
            partial=bool(reply["partial"]),
        )

    def worker_sessions(self, limit: int) -> LiveWorkers:
        n = v.limit(limit, self.options)
        reply = self._scripts.call("worker_sessions", n)
        workers = tuple(
            WorkerStatus(
                session(w["w"], w["s"]),
                None if not w.get("rt") else runtime_view(w["w"], w["rt"]),
                int(w["owned"]),
                int(w["draining"]),
            )
            for w in as_list(reply["workers"])
        )
        return LiveWorkers(workers, bool(reply["complete"]))

    def proxy_detail(self, proxy_id: str) -> ProxyDetail | None:
        v.text(proxy_id, "proxy_id", self.options)
        reply = self._scripts.call("proxy_detail", self._now(), proxy_id)
        return None if reply is None else detail_of(as_list(reply))
