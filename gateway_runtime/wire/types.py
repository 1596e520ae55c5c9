"""The documents the control plane and a gateway worker exchange, as Python values.

Times are timezone-aware datetimes; on the wire they are integer milliseconds since the epoch
(UTC), so an encoded time loses what is below the millisecond (floored, as the pool does).
Sequences keep their order (it is part of the content and of the checksum); the allowed-value
sets of a client are sets, written sorted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gateway_runtime.wire.limits import WIRE_VERSION


@dataclass(frozen=True, slots=True)
class Credential:
    """A proxy's login, sent once per reference however many proxies share it."""

    #: An opaque name the control plane chooses for this snapshot, never a raw SecretRef.
    ref: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class SnapshotProxy:
    proxy_id: str
    host: str
    port: int
    protocol: str
    region: str | None
    carrier: str | None
    upstream: str
    labels: Mapping[str, str]
    #: The proxy's capacity ``max``: connections the worker may hold through it at once.
    max_concurrency: int
    #: The assignment epoch the worker holds the proxy under: its reports count the proxy
    #: under it (``ReportEntry.epoch``), also while the proxy drains out of later snapshots.
    assignment_epoch: int
    lease_expires_at: datetime
    usable_until: datetime
    credential_ref: str | None = None


@dataclass(frozen=True, slots=True)
class GatewayClient:
    """An API client allowed to use the gateway, and what it may do there."""

    name: str
    #: One ``make_verifier(api_key, salt)`` per active key of the client (two while a key is
    #: rotated): a presented key is the client's if it verifies against any of them.
    verifiers: tuple[str, ...] = field(repr=False)
    #: Connections the client may hold open through one worker at once.
    max_connections: int
    requests_per_second: int
    #: Empty: any.
    allowed_upstreams: frozenset[str] = frozenset()
    allowed_regions: frozenset[str] = frozenset()
    allowed_protocols: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One worker's complete view: the proxies it holds and the clients it serves."""

    #: Strictly increasing per worker.
    version: int
    #: The global ownership epoch the snapshot was built at.
    epoch: int
    issued_at: datetime
    #: Past this age without a newer snapshot the worker stops taking new traffic (whole
    #: seconds on the wire).
    max_staleness: timedelta
    proxies: tuple[SnapshotProxy, ...] = ()
    credentials: tuple[Credential, ...] = ()
    clients: tuple[GatewayClient, ...] = ()
    #: SHA-256 (hex) of the canonical encoding without this field; None until sealed.
    checksum: str | None = None
    wire: int = WIRE_VERSION

    def ack(self) -> SnapshotAck:
        """The ACK of this snapshot (it must be sealed: decoded, or from ``seal_snapshot``)."""
        if self.checksum is None:
            raise ValueError("an unsealed snapshot has no checksum to acknowledge")
        return SnapshotAck(version=self.version, epoch=self.epoch, checksum=self.checksum)


@dataclass(frozen=True, slots=True)
class SnapshotAck:
    version: int
    epoch: int
    checksum: str


@dataclass(frozen=True, slots=True)
class ReportEntry:
    """A proxy's counts; a proxy the report leaves out counts zero (the report is sparse)."""

    proxy_id: str
    #: The assignment epoch the worker holds the proxy under.
    epoch: int
    active: int
    reserved: int


@dataclass(frozen=True, slots=True)
class ClientTraffic:
    """What the worker carried for one client through one upstream's proxies since the traffic
    it reported before (gateway_runtime/traffic.py). ``client`` and ``upstream`` are names, or
    ``limits.OTHER`` for pairs past the worker's table bound."""

    client: str
    upstream: str
    #: Plain HTTP requests forwarded through the upstream's proxies.
    requests: int = 0
    #: Tunnels (CONNECT, SOCKS5) opened through them.
    tunnels: int = 0
    #: Bytes from the client towards the upstream's proxies, and back.
    bytes_up: int = 0
    bytes_down: int = 0
    #: Requests and tunnels that failed, by kind: the upstream's proxy could not be reached or
    #: refused the worker's login; a connect or first-byte timeout; the proxy answered an error
    #: for the target (its 502 or 503 to a CONNECT); the connection broke mid-transfer.
    failed_connect: int = 0
    failed_timeout: int = 0
    failed_upstream: int = 0
    failed_closed: int = 0

    @property
    def failed(self) -> int:
        """Failures of every kind."""
        return self.failed_connect + self.failed_timeout + self.failed_upstream + self.failed_closed


#: ClientTraffic's counts, in the order they are declared (the wire names are these).
TRAFFIC_COUNTS = (
    "requests",
    "tunnels",
    "bytes_up",
    "bytes_down",
    "failed_connect",
    "failed_timeout",
    "failed_upstream",
    "failed_closed",
)


@dataclass(frozen=True, slots=True)
class RuntimeReportBody:
    #: Strictly increasing per session; the same sequence with the same body is a replay.
    report_sequence: int
    #: The snapshot the worker ACKed and serves from.
    snapshot_version: int
    epoch: int
    entries: tuple[ReportEntry, ...] = ()
    #: Per (client, upstream) pair, unique, at most ``limits.MAX_TRAFFIC_ENTRIES``.
    traffic: tuple[ClientTraffic, ...] = ()
    #: Snapshots the worker refused since the previous report it sent (its draining registry
    #: was full: it kept serving the older view).
    refused_snapshots: int = 0
