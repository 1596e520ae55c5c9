"""Checks of the outcomes and quarantine family: a client's outcome report, a quarantine read."""

from __future__ import annotations

from dataclasses import dataclass

from activity._checks import MAX_MS, aware_ms, duration_ms
from activity._time import span_ms
from activity._validation.common import text
from activity.errors import InvalidBatch, InvalidRequest
from activity.hosts import normalize_host
from activity.types import Outcome, OutcomeReport, PoolOptions


@dataclass(frozen=True, slots=True)
class PreparedOutcome:
    client_id: str
    proxy_id: str
    outcome: Outcome
    #: Normal form (activity.hosts), or None.
    host: str | None
    #: End of the quarantine this report asks for (banned with a non-zero quarantine), or None.
    until_ms: int | None


def prepare_outcome(report: object, options: PoolOptions, now_ms: int) -> PreparedOutcome:
    if not isinstance(report, OutcomeReport):
        raise InvalidRequest("report_outcome takes an OutcomeReport")
    client_id = text(report.client_id, "client_id", options)
    proxy_id = text(report.proxy_id, "proxy_id", options)
    if not isinstance(report.outcome, Outcome):
        raise InvalidRequest(f"outcome must be one of {[o.value for o in Outcome]}")
    reported_ms = aware_ms(report.reported_at, "reported_at")
    if reported_ms > now_ms + span_ms(options.max_clock_skew):
        raise InvalidRequest("reported_at lies too far in the future")  # would stretch a ban
    host = None
    if report.target_host is not None:
        try:
            host = normalize_host(report.target_host, options.max_host_length)
        except ValueError as exc:
            raise InvalidRequest(f"target_host {exc}") from None
    quarantine = options.default_quarantine if report.quarantine is None else report.quarantine
    quarantine_ms = duration_ms(quarantine, "quarantine", maximum=span_ms(options.max_quarantine))
    until = None
    if report.outcome is Outcome.BANNED and quarantine_ms > 0:
        until = reported_ms + quarantine_ms
        if until > MAX_MS:
            raise InvalidRequest("reported_at + quarantine is out of range")
        if until <= now_ms:
            until = None  # reported so late that its quarantine already ended
    return PreparedOutcome(client_id, proxy_id, report.outcome, host, until)


def quarantine_query(values: object, options: PoolOptions) -> tuple[str, ...]:
    """The proxy IDs of a ``quarantine_of`` call, each once, in the caller's order."""
    if not isinstance(values, (list, tuple)):
        raise InvalidBatch("proxy_ids must be a list or tuple of proxy IDs")
    if len(values) > options.max_quarantine_batch:
        raise InvalidBatch(f"proxy_ids has more than {options.max_quarantine_batch} entries")
    return tuple(dict.fromkeys(text(v, "proxy_ids", options, InvalidBatch) for v in values))
