"""Extract and quota: clients take proxies out of the pool for good, within their CallQuota
(ports ExtractionStore, CallCounter)."""

from __future__ import annotations

import heapq
from itertools import islice
from operator import itemgetter

from activity import _quota
from activity._time import from_ms
from activity._validation.extract import (
    PreparedExtract,
    PreparedQuota,
    prepare_charge,
    prepare_extract,
)
from activity._zset import ZSet
from activity.deadline import check_deadline
from activity.errors import (
    IdempotencyConflict,
    InsufficientInventory,
    QuotaExceeded,
    ScanBudgetExhausted,
)
from activity.labels import label_key
from activity.memory._records import Record
from activity.memory._state import MAX_QUOTA_COUNTERS, PoolState
from activity.types import (
    CallQuota,
    ExtractedProxy,
    ExtractMode,
    ExtractRequest,
    ExtractResult,
    ProxyState,
)


class Extracts:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    # ------------------------------------------------------------------ ExtractionStore
    def extract(self, request: ExtractRequest) -> ExtractResult:
        s = self._s
        prepared = prepare_extract(request, s.options)
        with s.lock:
            check_deadline()
            now = s.now()
            kind, digest = prepared.replay_kind, prepared.replay_digest
            quota = prepared.quota
            stored: object = None
            conflict: IdempotencyConflict | None = None
            if kind is not None and digest is not None:
                try:
                    stored = s.replayed(kind, digest, prepared.request_digest, now)
                except IdempotencyConflict as exc:
                    conflict = exc
            if quota is not None:  # every call takes its unit: a replay's, a conflict's too
                self._take_quota(prepared.client_id, quota, "calls", now, 1)
            if conflict is not None:
                raise conflict
            if isinstance(stored, ExtractResult):  # a replay hands out no new proxy
                return ExtractResult(
                    stored.proxies, stored.requested, replayed=True, generation=stored.generation
                )
            if quota is not None:  # count more must fit; only what is returned is charged
                self._quota_room(prepared.client_id, quota, "proxies", now, prepared.count)
            s.clean_expired(now, s.options.clean_budget)
            selected = self._select(prepared, now)
            proxies = []
            for rec in selected:
                with s.tracking(rec, keep_checks=True):  # its checks entry goes later
                    rec.state = ProxyState.EXTRACTED
                    rec.extracted_by = prepared.client_id
                proxies.append(extracted_view(rec))
            result = ExtractResult(tuple(proxies), prepared.count, generation=s.pool_generation)
            if quota is not None and proxies:
                self._take_quota(prepared.client_id, quota, "proxies", now, len(proxies))
            if kind is not None and digest is not None:
                expires = now + prepared.replay_ttl_ms
                if selected:  # a replay must never outlive a proxy it returns
                    expires = min(expires, min(rec.expires_ms for rec in selected))
                s.store_replay(kind, digest, prepared.request_digest, result, expires)
            return result

    def _select(self, req: PreparedExtract, now: int) -> list[Record]:
        s = self._s
        # The candidates of a dimension: the union of its values' indexes (disjoint: a proxy has
        # one value per dimension). Drive from the smallest; ties go to the most specific
        # (filters come first).
        sources: list[list[ZSet]] = [[s.index(("available", ""))]]
        sources += [[s.index((dim, value)) for value in values] for dim, values in req.filters]
        driving = min(reversed(sources), key=lambda indexes: sum(map(len, indexes)))
        threshold = now + req.min_remaining_ms
        budget = s.options.scan_budget
        need = req.count + req.reserve
        wanted = {dim: frozenset(values) for dim, values in req.filters}
        matches: list[Record] = []
        # Soonest usable-until first across the union; equal scores: the earlier value's index
        # first (heapq.merge is stable), as the Lua merge breaks ties (lua/extract.lua).
        merged = heapq.merge(
            *(index.above_scored(threshold, budget) for index in driving), key=itemgetter(0)
        )
        for _, pid in islice(merged, budget):
            rec = s.records[pid]
            if self._matches(rec, wanted, req, now, threshold):
                matches.append(rec)
                if len(matches) == need:
                    break
        above = sum(index.count_above(threshold) for index in driving)
        if len(matches) < need and above > budget:
            raise ScanBudgetExhausted("extract scan budget exhausted; retry shortly")
        take = min(req.count, max(0, len(matches) - req.reserve))
        if req.mode is ExtractMode.ALL_OR_NOTHING and take < req.count:
            raise InsufficientInventory(
                "not enough matching proxies", requested=req.count, available=take
            )
        return matches[:take]

    def _matches(
        self,
        rec: Record,
        wanted: dict[str, frozenset[str]],
        req: PreparedExtract,
        now: int,
        threshold: int,
    ) -> bool:
        if (
            rec.state is not ProxyState.AVAILABLE
            or rec.proxy_id in self._s.owners
            or rec.expires_ms <= now
            or rec.usable_ms <= threshold
        ):
            return False
        if req.max_health_age_ms is not None and (
            rec.checked_ms is None or now - rec.checked_ms > req.max_health_age_ms
        ):
            return False
        region = None if rec.region is None else label_key(rec.region)
        carrier = None if rec.carrier is None else label_key(rec.carrier)
        actual = {
            "upstream": rec.upstream_id,
            "protocol": rec.protocol,
            "region": region,
            "carrier": carrier,
        }
        return all(actual[dim] in values for dim, values in wanted.items())

    # ------------------------------------------------------------------ CallCounter
    def charge_call(self, client_id: str, quota: CallQuota) -> None:
        s = self._s
        client, prepared = prepare_charge(client_id, quota, s.options)
        with s.lock:
            check_deadline()
            self._take_quota(client, prepared, "calls", s.now(), 1)

    def _quota_room(
        self, client: str, quota: PreparedQuota, limit: str, now: int, cost: int
    ) -> _quota.Window:
        """The counter with ``cost`` more units, or ``QuotaExceeded`` (nothing stored)."""
        key, units, window = _quota_counter(client, quota, limit)
        after = _quota.take(self._s.quotas.get(key), now, units, window, cost)
        if isinstance(after, _quota.Refusal):
            raise QuotaExceeded(
                f"quota_exceeded: {limit}",
                reason=limit,
                retry_after_ms=after.wait_ms,
                left=after.left,
            )
        return after

    def _take_quota(
        self, client: str, quota: PreparedQuota, limit: str, now: int, cost: int
    ) -> None:
        s = self._s
        key = _quota_counter(client, quota, limit)[0]
        s.quotas[key] = self._quota_room(client, quota, limit, now, cost)
        if len(s.quotas) > s.quota_prune_at:
            # Drop counters that no longer count (two windows old), as Redis expires them. The
            # next prune waits until the live ones have doubled: at most twice the live counters
            # (and MAX_QUOTA_COUNTERS) are kept, at an amortized constant cost per charge.
            stale = [k for k, w in s.quotas.items() if w.index < now // k[3] - 1]
            for k in stale:
                del s.quotas[k]
            s.quota_prune_at = max(MAX_QUOTA_COUNTERS, 2 * len(s.quotas))


def _quota_counter(
    client: str, quota: PreparedQuota, limit: str
) -> tuple[tuple[str, str, int, int], int, int]:
    if limit == "calls":
        units, window = quota.calls, quota.call_window_ms
    else:
        units, window = quota.proxies, quota.proxy_window_ms
    return (client, limit, units, window), units, window


def extracted_view(rec: Record) -> ExtractedProxy:
    return ExtractedProxy(
        proxy_id=rec.proxy_id,
        upstream_id=rec.upstream_id,
        host=rec.host,
        port=rec.port,
        protocol=rec.protocol,
        region=rec.region,
        carrier=rec.carrier,
        expires_at=from_ms(rec.expires_ms),
        usable_until=from_ms(rec.usable_ms),
        username=rec.username,
        password=rec.password,
        labels=dict(rec.labels),
        fetched_at=from_ms(rec.fetched_ms),
    )
