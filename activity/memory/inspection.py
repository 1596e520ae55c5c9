"""The console's reads (port PoolInspector): a bounded page of the pool in expiry order, and
one proxy whole. The pair of lua/browse.lua and lua/proxy_detail.lua (docs/activity-pool.md)."""

from __future__ import annotations

from activity._time import from_ms
from activity._validation.common import limit as check_limit
from activity._validation.common import text
from activity._validation.inspection import PreparedBrowse, prepare_browse
from activity._zset import ZSet
from activity.inspection import (
    BrowseCursor,
    BrowsePage,
    BrowseQuery,
    LiveWorkers,
    ProxyDetail,
    ProxySummary,
    WorkerStatus,
    username_hint,
)
from activity.labels import label_key
from activity.memory._records import Record
from activity.memory._state import PoolState
from activity.types import ProxyState, RuntimeView


class Inspector:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    def browse(self, query: BrowseQuery) -> BrowsePage:
        s = self._s
        q = prepare_browse(query, s.options)
        with s.lock:
            now = s.now()
            index = s.upstream_expiry.get(q.upstream) or ZSet() if q.upstream else s.expiry
            start, skip_ties = 0, False
            if q.after_ms is not None:
                rank = index.rank(q.after_id)
                if rank is not None and index.score(q.after_id) == q.after_ms:
                    start = rank + 1
                else:  # the cursor's proxy left the index: from its score, past its ties
                    start, skip_ties = index.count_below(q.after_ms), True
            # One more than the budget: whether the index goes on past what may be examined.
            entries = index.range(start, q.budget + 1)
            found: list[ProxySummary] = []
            last: tuple[str, int] | None = None
            examined = 0
            for pid, score in entries[: q.budget]:
                examined += 1
                last = (pid, score)
                if skip_ties and score == q.after_ms and pid <= q.after_id:
                    continue
                rec = s.records.get(pid)
                if rec is None or rec.expires_ms <= now:
                    continue
                summary = self._summary(rec)
                if _matches(q, summary):
                    found.append(summary)
                    if len(found) == q.limit:
                        break
            full = len(found) == q.limit
            more = len(entries) > examined  # entries after the last one examined
            return BrowsePage(
                proxies=tuple(found),
                next=BrowseCursor(last[1], last[0]) if more and last else None,
                examined=examined,
                partial=more and not full,
            )

    def proxy_detail(self, proxy_id: str) -> ProxyDetail | None:
        s = self._s
        text(proxy_id, "proxy_id", s.options)
        with s.lock:
            rec = s.records.get(proxy_id)
            if rec is None or rec.expires_ms <= s.now():
                return None
            owner = s.owners.get(proxy_id)
            return ProxyDetail(
                summary=self._summary(rec),
                max_concurrency=rec.max_concurrency,
                labels=dict(rec.labels),
                last_success_at=None if rec.success_ms is None else from_ms(rec.success_ms),
                latency_ms=rec.latency_ms,
                failure_reason=rec.failure_reason or None,
                assignment=None if owner is None else owner.view(proxy_id),
            )

    def worker_sessions(self, limit: int) -> LiveWorkers:
        s = self._s
        n = check_limit(limit, s.options)
        with s.lock:
            snow = s.server_now()
            live = s.session_expiry.above(snow, n + 1)  # expires after now: live
            workers = []
            for wid in live[:n]:
                runtime = s.fresh_runtime(wid)
                view = None
                if runtime is not None:
                    view = RuntimeView(
                        wid,
                        runtime.session_id,
                        runtime.sequence,
                        runtime.snapshot_version,
                        runtime.epoch,
                        tuple(sorted(runtime.entries.values(), key=lambda e: e.proxy_id)),
                        from_ms(runtime.expires_ms),
                        None if runtime.reported_ms is None else from_ms(runtime.reported_ms),
                    )
                workers.append(
                    WorkerStatus(
                        s.sessions[wid].view(wid),
                        view,
                        len(s.worker_owned.get(wid) or ()),
                        len(s.worker_draining.get(wid) or ()),
                    )
                )
            return LiveWorkers(tuple(workers), len(live) <= n)

    def _summary(self, rec: Record) -> ProxySummary:
        owner = self._s.owners.get(rec.proxy_id)
        state = ProxyState.DRAINING if owner is not None and owner.draining else rec.state
        return ProxySummary(
            proxy_id=rec.proxy_id,
            upstream_id=rec.upstream_id,
            state=state,
            protocol=rec.protocol,
            region=rec.region,
            carrier=rec.carrier,
            host=rec.host,
            port=rec.port,
            expires_at=from_ms(rec.expires_ms),
            usable_until=from_ms(rec.usable_ms),
            fetched_at=from_ms(rec.fetched_ms),
            checked_at=None if rec.checked_ms is None else from_ms(rec.checked_ms),
            extracted_by=rec.extracted_by,
            worker_id=None if owner is None else owner.worker_id,
            username_hint=username_hint(rec.username),
        )


def _matches(q: PreparedBrowse, p: ProxySummary) -> bool:
    return (
        (not q.state or p.state.value == q.state)
        and (not q.protocol or p.protocol == q.protocol)
        and (not q.region or (p.region is not None and label_key(p.region) == q.region))
        and (not q.carrier or (p.carrier is not None and label_key(p.carrier) == q.carrier))
    )
