"""A worker's messages to the control plane on the wire: the snapshot ACK and the runtime
report. Encoded by the worker and decoded by the control plane, by this one code; neither has
a checksum (each is a request of its own, refused whole if malformed).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway_runtime.wire import _fields as f
from gateway_runtime.wire import limits
from gateway_runtime.wire.errors import WireBoundError
from gateway_runtime.wire.types import (
    TRAFFIC_COUNTS,
    ClientTraffic,
    ReportEntry,
    RuntimeReportBody,
    SnapshotAck,
)

_ACK = frozenset({"wire", "version", "epoch", "checksum"})
_REPORT = frozenset(
    {
        "wire",
        "report_sequence",
        "snapshot_version",
        "epoch",
        "entries",
        "traffic",
        "refused_snapshots",
    }
)
_ENTRY = frozenset({"proxy_id", "epoch", "active", "reserved"})
_TRAFFIC = frozenset({"client", "upstream", *TRAFFIC_COUNTS})


def encode_ack(ack: SnapshotAck) -> bytes:
    tree = f.attributes(ack, SnapshotAck, "ack", _ACK)
    return _encode(tree, _parse_ack, limits.MAX_ACK_BYTES, "ack")


def decode_ack(data: bytes) -> SnapshotAck:
    return _parse_ack(f.load(data, limits.MAX_ACK_BYTES, "ack"))


def encode_report(report: RuntimeReportBody) -> bytes:
    tree = f.attributes(report, RuntimeReportBody, "report", _REPORT)
    tree["entries"] = f.to_list(report.entries, _entry_tree, "entries")
    tree["traffic"] = f.to_list(report.traffic, _traffic_tree, "traffic")
    return _encode(tree, _parse_report, limits.MAX_REPORT_BYTES, "report")


def decode_report(data: bytes) -> RuntimeReportBody:
    return _parse_report(f.load(data, limits.MAX_REPORT_BYTES, "report"))


def _encode(tree: f.Tree, parse: Callable[[object], object], maximum: int, document: str) -> bytes:
    """``tree`` checked by the decoder's own reader, then encoded within its byte bound."""
    parse(tree)
    data = f.canonical(tree)
    if len(data) > maximum:
        raise WireBoundError(document, f"is longer than {maximum} bytes")
    return data


def _parse_ack(value: object) -> SnapshotAck:
    t = f.fields(value, "", _ACK)
    f.wire_version(t["wire"])
    return SnapshotAck(
        version=f.integer(t["version"], "version", 1, limits.MAX_COUNTER),
        epoch=f.integer(t["epoch"], "epoch", 0, limits.MAX_COUNTER),
        checksum=f.checksum(t["checksum"], "checksum"),
    )


def _entry_tree(entry: ReportEntry, path: str) -> f.Tree:
    return f.attributes(entry, ReportEntry, path, _ENTRY)


def _traffic_tree(traffic: ClientTraffic, path: str) -> f.Tree:
    return f.attributes(traffic, ClientTraffic, path, _TRAFFIC)


def _parse_report(value: object) -> RuntimeReportBody:
    t = f.fields(value, "", _REPORT)
    f.wire_version(t["wire"])
    sequence = f.integer(t["report_sequence"], "report_sequence", 1, limits.MAX_COUNTER)
    version = f.integer(t["snapshot_version"], "snapshot_version", 0, limits.MAX_COUNTER)
    epoch = f.integer(t["epoch"], "epoch", 0, limits.MAX_COUNTER)
    entries = f.parsed_items(t["entries"], "entries", limits.MAX_REPORT_ENTRIES, _parse_entry)
    f.unique([e.proxy_id for e in entries], "entries", "proxy_id")
    traffic = f.parsed_items(t["traffic"], "traffic", limits.MAX_TRAFFIC_ENTRIES, _parse_traffic)
    f.unique([f"{u.client} {u.upstream}" for u in traffic], "traffic", "client and upstream")
    refused = f.integer(t["refused_snapshots"], "refused_snapshots", 0, limits.MAX_COUNTER)
    return RuntimeReportBody(sequence, version, epoch, entries, traffic, refused)


def _parse_entry(value: object, path: str) -> ReportEntry:
    t = f.fields(value, path, _ENTRY)
    return ReportEntry(
        proxy_id=f.text(t["proxy_id"], f"{path}.proxy_id"),
        epoch=f.integer(t["epoch"], f"{path}.epoch", 0, limits.MAX_COUNTER),
        active=f.integer(t["active"], f"{path}.active", 0, limits.MAX_CONCURRENCY),
        reserved=f.integer(t["reserved"], f"{path}.reserved", 0, limits.MAX_CONCURRENCY),
    )


def _parse_traffic(value: object, path: str) -> ClientTraffic:
    t = f.fields(value, path, _TRAFFIC)
    counts = {
        name: f.integer(t[name], f"{path}.{name}", 0, limits.MAX_COUNTER) for name in TRAFFIC_COUNTS
    }
    return ClientTraffic(
        client=f.traffic_name(t["client"], f"{path}.client"),
        upstream=f.traffic_name(t["upstream"], f"{path}.upstream"),
        **counts,
    )
