"""Checks of the sessions, snapshots and reports family: what a gateway worker sends."""

from __future__ import annotations

import json
from dataclasses import dataclass

from activity._checks import MAX_COUNTER, count, digest
from activity._validation.common import MAX_CONCURRENCY, epoch, once, text
from activity.errors import InvalidBatch, InvalidRequest
from activity.types import PoolOptions, RuntimeEntry, RuntimeReport, SnapshotRef


@dataclass(frozen=True, slots=True)
class PreparedReport:
    report: RuntimeReport
    body_digest: str


def prepare_report(report: object, options: PoolOptions) -> PreparedReport:
    if not isinstance(report, RuntimeReport):
        raise InvalidBatch("write_report takes a RuntimeReport")
    text(report.worker_id, "worker_id", options, InvalidBatch)
    text(report.session_id, "session_id", options, InvalidBatch)
    count(report.sequence, "sequence", low=1, high=MAX_COUNTER, error=InvalidBatch)
    count(report.snapshot_version, "snapshot_version", low=0, high=MAX_COUNTER, error=InvalidBatch)
    count(report.epoch, "epoch", low=0, high=MAX_COUNTER, error=InvalidBatch)
    if not isinstance(report.entries, tuple):
        raise InvalidBatch("entries must be a tuple")
    if len(report.entries) > options.max_report_entries:
        raise InvalidBatch(f"report has more than {options.max_report_entries} entries")
    seen: set[str] = set()
    for index, entry in enumerate(report.entries):
        where = f"entries[{index}]"
        if not isinstance(entry, RuntimeEntry):
            raise InvalidBatch(f"{where} must be a RuntimeEntry")
        pid = text(entry.proxy_id, f"{where}.proxy_id", options, InvalidBatch)
        once(pid, seen, "entries", index, "proxy ID", "report")
        count(entry.epoch, f"{where}.epoch", low=0, high=MAX_COUNTER, error=InvalidBatch)
        count(entry.active, f"{where}.active", low=0, high=MAX_CONCURRENCY, error=InvalidBatch)
        count(entry.reserved, f"{where}.reserved", low=0, high=MAX_CONCURRENCY, error=InvalidBatch)
        if not isinstance(entry.draining, bool):
            raise InvalidBatch(f"{where}.draining must be a bool")
    body = json.dumps(
        [
            report.snapshot_version,
            report.epoch,
            sorted([e.proxy_id, e.epoch, e.active, e.reserved, e.draining] for e in report.entries),
        ],
        separators=(",", ":"),
    )
    return PreparedReport(report, digest("report", body))


def proxy_ids(values: object, options: PoolOptions, what: str) -> frozenset[str]:
    if not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidRequest(f"{what} must be a collection of proxy IDs")
    if len(values) > options.max_report_entries:
        raise InvalidRequest(f"{what} has more than {options.max_report_entries} entries")
    return frozenset(text(v, what, options) for v in values)


def snapshot_ref(ref: object, options: PoolOptions) -> SnapshotRef:
    if not isinstance(ref, SnapshotRef):
        raise InvalidRequest("ref must be a SnapshotRef")
    count(ref.version, "ref.version", low=1, high=MAX_COUNTER)
    epoch(ref.epoch, "ref.epoch")
    text(ref.checksum, "ref.checksum", options)
    return ref
