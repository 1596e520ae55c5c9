"""The one wire shape of the gateway's control traffic: the snapshot the control plane sends a
worker, the worker's ACK of it, and the worker's runtime reports. The control plane and the
worker both import this package (it imports only the standard library), so each document is
encoded and decoded by the same code on both sides.

A document is canonical JSON (sorted keys, no whitespace, UTF-8; integers and strings only,
times as integer milliseconds since the epoch) with a top-level ``"wire": 1``. Decoding is
strict and bounded: the byte length first, then every field's type, range and length, and a
snapshot's SHA-256 checksum; each refusal is a ``WireError`` naming the field path, never the
value. docs/gateway.md, "The wire: snapshot, ACK, report", describes the format.
"""

from gateway_runtime.wire.errors import (
    WireBoundError,
    WireChecksumError,
    WireError,
    WireFormatError,
    WireVersionError,
)
from gateway_runtime.wire.limits import WIRE_VERSION
from gateway_runtime.wire.messages import decode_ack, decode_report, encode_ack, encode_report
from gateway_runtime.wire.snapshot import (
    SealedSnapshot,
    decode_snapshot,
    encode_snapshot,
    seal_snapshot,
)
from gateway_runtime.wire.types import (
    TRAFFIC_COUNTS,
    ClientTraffic,
    Credential,
    GatewayClient,
    ReportEntry,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
)
from gateway_runtime.wire.verifier import make_verifier, new_salt, verify

__all__ = [
    "TRAFFIC_COUNTS",
    "WIRE_VERSION",
    "ClientTraffic",
    "Credential",
    "GatewayClient",
    "ReportEntry",
    "RuntimeReportBody",
    "SealedSnapshot",
    "Snapshot",
    "SnapshotAck",
    "SnapshotProxy",
    "WireBoundError",
    "WireChecksumError",
    "WireError",
    "WireFormatError",
    "WireVersionError",
    "decode_ack",
    "decode_report",
    "decode_snapshot",
    "encode_ack",
    "encode_report",
    "encode_snapshot",
    "make_verifier",
    "new_salt",
    "seal_snapshot",
    "verify",
]
