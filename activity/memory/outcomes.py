"""Outcomes and quarantine: how an extracting client says a proxy went, and the quarantine of
banned exits that follows (port OutcomeStore)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from activity._checks import aware_ms
from activity._time import from_ms, span_ms
from activity._validation.outcomes import prepare_outcome, quarantine_query
from activity.deadline import check_deadline
from activity.errors import InvalidBatch, OutcomeRejected, ScanBudgetExhausted
from activity.memory._records import StoredOutcome
from activity.memory._state import PoolState
from activity.types import EVERY_HOST, Outcome, OutcomeReport, OutcomeResult

#: Outcomes that count against an exit (passive health).
FAILURE_OUTCOMES = (Outcome.TIMEOUT, Outcome.AUTH_FAILED)
#: The pseudo-hosts of an exit's failure count and suspicion in the quarantine's expiry index
#: (no target host has these characters: activity.hosts).
FAILURES, SUSPECT = "#", "!"


class Outcomes:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    def report_outcome(self, report: OutcomeReport) -> OutcomeResult:
        s = self._s
        with s.lock:
            now = s.now()
            p = prepare_outcome(report, s.options, now)
            check_deadline()
            clean_quarantine(s, now, s.options.clean_budget)
            rec = s.records.get(p.proxy_id)
            if rec is None or rec.expires_ms <= now or rec.extracted_by != p.client_id:
                # One answer for all three: a client never learns of another's proxies.
                raise OutcomeRejected("no such proxy extracted by this client", reason="not_found")
            stored = s.outcomes.get(p.proxy_id)
            replayed = stored is not None
            if stored is None:
                until = None
                if p.until_ms is not None:
                    until = _quarantine_exit(s, rec.key_digest, p.host or EVERY_HOST, p.until_ms)
                stored = s.outcomes[p.proxy_id] = StoredOutcome(p.outcome, p.host, until)
                _count_failure(s, rec.key_digest, p.outcome, now)
            elif (stored.outcome, stored.host) != (p.outcome, p.host):
                raise OutcomeRejected("this proxy already has another outcome", reason="conflict")
            quarantined_until = None if stored.until_ms is None else from_ms(stored.until_ms)
            suspect = s.suspects.get(rec.key_digest, 0)
            return OutcomeResult(
                p.proxy_id,
                rec.upstream_id,
                stored.outcome,
                stored.host,
                replayed,
                quarantined_until,
                from_ms(suspect) if suspect > now else None,
            )

    def quarantine_of(self, proxy_ids: Sequence[str], now: datetime) -> dict[str, frozenset[str]]:
        s = self._s
        ids = quarantine_query(proxy_ids, s.options)
        now_ms = aware_ms(now, "now", InvalidBatch)
        with s.lock:
            check_deadline()
            out: dict[str, frozenset[str]] = {}
            examined = 0
            for pid in ids:
                rec = s.records.get(pid)
                if rec is None or rec.expires_ms <= now_ms:
                    continue
                hosts = s.quarantine.get(rec.key_digest, {})
                examined += len(hosts)
                if examined > s.options.scan_budget:
                    raise ScanBudgetExhausted("more quarantine entries than one read may examine")
                live = frozenset(h for h, until in hosts.items() if until > now_ms)
                if live:
                    out[pid] = live
            return out


def suspected(state: PoolState, key_digest: str, now_ms: int) -> bool:
    """Whether the exit's recent failures make its new lifecycles enter SUSPECT."""
    return state.suspects.get(key_digest, 0) > now_ms


def _count_failure(state: PoolState, key_digest: str, outcome: Outcome, now_ms: int) -> None:
    """Passive health (its pair: lua/report_outcome.lua): ``timeout`` and ``auth_failed``
    count against the exit in a window from the first; at the threshold it is suspect for a
    window from then (a longer suspicion stands); ``ok`` clears both."""
    options, expiry = state.options, state.quarantine_expiry
    count_entry, suspect_entry = f"{key_digest}|{FAILURES}", f"{key_digest}|{SUSPECT}"
    if outcome is Outcome.OK:
        state.strikes.pop(key_digest, None)
        state.suspects.pop(key_digest, None)
        expiry.remove(count_entry)
        expiry.remove(suspect_entry)
        return
    if outcome not in FAILURE_OUTCOMES or options.suspect_after_failures == 0:
        return
    window = span_ms(options.failure_window)
    count, ends = state.strikes.get(key_digest, (0, 0))
    if ends <= now_ms:
        count, ends = 0, now_ms + window
    state.strikes[key_digest] = (count + 1, ends)
    expiry.add(count_entry, ends)
    if count + 1 >= options.suspect_after_failures:
        until = state.suspects[key_digest] = max(state.suspects.get(key_digest, 0), now_ms + window)
        expiry.add(suspect_entry, until)


def quarantined(state: PoolState, key_digest: str, host: str, now_ms: int) -> bool:
    """Whether the exit is quarantined for ``host`` at ``now_ms`` (upsert asks for "*")."""
    until = state.quarantine.get(key_digest, {}).get(host)
    return until is not None and until > now_ms


def _quarantine_exit(state: PoolState, key_digest: str, host: str, until_ms: int) -> int:
    """Quarantine the exit for ``host`` until ``until_ms``; a longer one stands."""
    hosts = state.quarantine.setdefault(key_digest, {})
    until = hosts[host] = max(hosts.get(host, 0), until_ms)
    state.quarantine_expiry.add(f"{key_digest}|{host}", until)
    return until


def clean_quarantine(state: PoolState, now_ms: int, limit: int) -> tuple[int, bool]:
    """Forget up to ``limit`` ended quarantine entries; (removed, more remain)."""
    due = state.quarantine_expiry.at_most(now_ms, limit + 1)
    for member in due[:limit]:
        state.quarantine_expiry.remove(member)
        key_digest, _, host = member.partition("|")
        if host == FAILURES:
            del state.strikes[key_digest]
            continue
        if host == SUSPECT:
            del state.suspects[key_digest]
            continue
        hosts = state.quarantine[key_digest]
        del hosts[host]
        if not hosts:
            del state.quarantine[key_digest]
    return min(len(due), limit), len(due) > limit
