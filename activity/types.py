"""Domain types of the activity pool (ADR-005). All frozen; datetimes are aware UTC."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

# The label shape is re-exported here: the admin validates the same pattern the pool refuses.
from activity._checks import LABEL_MAX_LENGTH as LABEL_MAX_LENGTH
from activity._checks import LABEL_PATTERN as LABEL_PATTERN
from activity._checks import YEAR_MS, count, duration_ms
from activity._time import span_ms
from activity.credentials import SecretRef
from activity.errors import InvalidRequest
from activity.extract_types import (
    MAX_FILTER_VALUES as MAX_FILTER_VALUES,
)
from activity.extract_types import (
    CallQuota as CallQuota,
)
from activity.extract_types import (
    ExtractedProxy as ExtractedProxy,
)
from activity.extract_types import (
    ExtractFilters as ExtractFilters,
)
from activity.extract_types import (
    ExtractMode as ExtractMode,
)
from activity.extract_types import (
    ExtractRequest as ExtractRequest,
)
from activity.extract_types import (
    ExtractResult as ExtractResult,
)
from activity.worker_types import (
    AssignableProxies as AssignableProxies,
)
from activity.worker_types import (
    AssignableProxy as AssignableProxy,
)
from activity.worker_types import (
    Assignment as Assignment,
)
from activity.worker_types import (
    DrainStatus as DrainStatus,
)
from activity.worker_types import (
    DrainTicket as DrainTicket,
)
from activity.worker_types import (
    ReportResult as ReportResult,
)
from activity.worker_types import (
    RuntimeEntry as RuntimeEntry,
)
from activity.worker_types import (
    RuntimeReport as RuntimeReport,
)
from activity.worker_types import (
    RuntimeView as RuntimeView,
)
from activity.worker_types import (
    SnapshotRef as SnapshotRef,
)
from activity.worker_types import (
    WorkerRevision as WorkerRevision,
)
from activity.worker_types import (
    WorkerSession as WorkerSession,
)


class ProxyState(StrEnum):
    FETCHED = "fetched"
    CHECKING = "checking"
    AVAILABLE = "available"
    SUSPECT = "suspect"
    UNHEALTHY = "unhealthy"
    DRAINING = "draining"
    EXTRACTED = "extracted"
    EXPIRED = "expired"
    REMOVED = "removed"


#: States a health checker may report.
HEALTH_STATES = frozenset(
    {
        ProxyState.CHECKING,
        ProxyState.AVAILABLE,
        ProxyState.SUSPECT,
        ProxyState.UNHEALTHY,
        ProxyState.REMOVED,
    }
)
#: States that count toward ``managed`` (ADR "Worker 运行态与容量汇总").
MANAGED_STATES = frozenset(
    {
        ProxyState.FETCHED,
        ProxyState.CHECKING,
        ProxyState.AVAILABLE,
        ProxyState.SUSPECT,
        ProxyState.DRAINING,
    }
)
#: Protocols a proxy may speak.
PROTOCOLS = frozenset({"http", "https", "socks4", "socks5"})
#: Largest limit of a CallQuota (units per window).
QUOTA_MAX_UNITS = 10_000_000


@dataclass(frozen=True, slots=True)
class PoolOptions:
    """Bounds and defaults of one pool namespace; identical for MemoryPool and RedisPool.

    Every loop in the pool is bounded by one of these numbers.
    """

    prefix: str = "pp"
    #: Largest upsert batch accepted in one call (larger: InvalidBatch).
    max_upsert_batch: int = 10_000
    #: Largest number of proxies one upsert script handles; larger batches are chunked.
    script_batch_cap: int = 500
    #: Largest health batch.
    max_health_batch: int = 1_000
    #: Largest count one extract may ask for.
    max_extract_count: int = 1_000
    #: Largest gateway reserve one extract may keep back.
    max_gateway_reserve: int = 10_000
    #: Index members one extract or slots read may examine before giving up (fail closed).
    scan_budget: int = 5_000
    #: Expired records each write cleans opportunistically before its own work.
    clean_budget: int = 16
    #: Largest ``limit`` of sweep and ownership expire.
    max_sweep_limit: int = 10_000
    #: Replay TTL of an extract with an idempotency key (capped by the earliest hard expiry).
    idempotency_ttl: timedelta = timedelta(minutes=10)
    #: Lifetime of an internal operation result (request ID, upsert chunk).
    operation_ttl: timedelta = timedelta(minutes=2)
    #: Lifetime of a worker runtime report (Redis server time).
    report_ttl: timedelta = timedelta(seconds=30)
    #: Largest number of entries in one runtime report and in one snapshot.
    max_report_entries: int = 10_000
    #: Longest client ID, idempotency key, proxy ID, label value.
    max_text: int = 256
    #: A provider TTL longer than this is not believed: the candidate is dropped. It also
    #: bounds how long any key of the namespace can live.
    max_proxy_ttl: timedelta = timedelta(days=1)
    #: Longest ownership lease and worker session TTL one call may ask for.
    max_lease_ttl: timedelta = timedelta(days=1)
    #: How far in the future a health check time may lie (checker clocks drift).
    max_clock_skew: timedelta = timedelta(seconds=60)
    #: Quarantine of a banned exit when the report names none (``OutcomeReport.quarantine``).
    default_quarantine: timedelta = timedelta(minutes=30)
    #: Longest quarantine one report may ask for; it also bounds how long the quarantine keys
    #: live past the pool's horizon.
    max_quarantine: timedelta = timedelta(days=7)
    #: Longest target host of an outcome report (a DNS name's limit).
    max_host_length: int = 253
    #: Most proxy IDs one ``quarantine_of`` call may ask about (more: InvalidBatch).
    max_quarantine_batch: int = 1_000
    #: Passive health: this many ``timeout``/``auth_failed`` reports on one exit within
    #: ``failure_window`` of its first make it suspect for ``failure_window`` (0: never); a
    #: new lifecycle of a suspect exit enters SUSPECT, not FETCHED, and an ``ok`` report
    #: clears the exit's count and suspicion.
    suspect_after_failures: int = 2
    failure_window: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        _check_options(self)


_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")


def _check_options(options: PoolOptions) -> None:
    if not isinstance(options.prefix, str) or not _PREFIX.fullmatch(options.prefix):
        raise InvalidRequest("prefix must be 1-32 characters of [A-Za-z0-9._-]")
    for name in (
        "max_upsert_batch",
        "script_batch_cap",
        "max_health_batch",
        "max_extract_count",
        "scan_budget",
        "clean_budget",
        "max_sweep_limit",
        "max_report_entries",
        "max_text",
        "max_host_length",
        "max_quarantine_batch",
    ):
        value = getattr(options, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidRequest(f"PoolOptions.{name} must be a positive integer")
    count(options.max_gateway_reserve, "PoolOptions.max_gateway_reserve", low=0, high=10**9)
    for name in (
        "idempotency_ttl",
        "operation_ttl",
        "report_ttl",
        "max_proxy_ttl",
        "max_lease_ttl",
        "max_clock_skew",
        "max_quarantine",
    ):
        value = getattr(options, name)
        # A year bounds every TTL: key lifetimes stay finite and datetime arithmetic exact.
        if not isinstance(value, timedelta) or not 1 <= span_ms(value) <= YEAR_MS:
            raise InvalidRequest(f"PoolOptions.{name} must be a timedelta of 1 ms to a year")
    duration_ms(
        options.default_quarantine,
        "PoolOptions.default_quarantine",
        maximum=span_ms(options.max_quarantine),
    )
    count(options.suspect_after_failures, "PoolOptions.suspect_after_failures", low=0, high=1_000)
    duration_ms(
        options.failure_window,
        "PoolOptions.failure_window",
        minimum=1,
        maximum=span_ms(options.max_quarantine),
    )


@dataclass(frozen=True, slots=True)
class FetchedProxy:
    proxy_id: str
    unique_key: str
    host: str
    port: int
    protocol: str
    expires_at: datetime
    region: str | None = None
    carrier: str | None = None
    max_concurrency: int = 1
    secret_ref: SecretRef | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    upstream_id: str
    proxies: tuple[FetchedProxy, ...] | list[FetchedProxy]
    max_size: int
    safety_margin: timedelta
    fetched_at: datetime
    #: Retrying the same batch with the same ID returns the first result and changes nothing.
    operation_id: str | None = None


@dataclass(frozen=True, slots=True)
class UpsertResult:
    inserted: int = 0
    refreshed: int = 0
    #: Candidates invalid on their own: already past usable_until, credentials unresolvable.
    dropped: int = 0
    #: Unique key held by another proxy ID or upstream (the incumbent keeps it).
    conflicts: int = 0
    #: EXTRACTED or REMOVED in this lifecycle: never re-enters by refresh.
    skipped_terminal: int = 0
    #: Not inserted because the upstream's unextracted inventory reached max_size.
    over_capacity: int = 0
    #: Expired records cleaned on the way.
    cleaned: int = 0
    replayed: bool = False
    #: New lifecycles refused because their exit is quarantined for every host ("*").
    quarantined: int = 0
    #: Of ``inserted``, entered SUSPECT: their exit failed clients lately (passive health).
    suspect: int = 0
    #: The inserted proxies' IDs (new lifecycles, FETCHED or SUSPECT), in the batch's order:
    #: what an intake check probes. Empty when the call was replayed (its first answer had
    #: them).
    inserted_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HealthUpdate:
    proxy_id: str
    state: ProxyState
    checked_at: datetime
    latency_ms: int | None = None
    failure_reason: str | None = None
    #: Apply only to a proxy in this state (else counted ``ignored``): a trusted provider's
    #: proxies go AVAILABLE only from FETCHED, never over a suspicion.
    expected: ProxyState | None = None


@dataclass(frozen=True, slots=True)
class HealthResult:
    applied: int = 0
    #: No live record with that ID.
    missing: int = 0
    #: EXTRACTED or REMOVED records (health no longer applies), or not in the state the
    #: update expected.
    ignored: int = 0
    #: Older than the check already recorded (out-of-order checker results).
    stale: int = 0

    def __add__(self, other: HealthResult) -> HealthResult:
        """The counts of two calls together (a checker applies its results in rounds)."""
        return HealthResult(
            self.applied + other.applied,
            self.missing + other.missing,
            self.ignored + other.ignored,
            self.stale + other.stale,
        )


@dataclass(frozen=True, slots=True)
class RecheckPolicy:
    """When an idle proxy is checked again (``RecheckQueue.take_due_checks``; check effort
    follows remaining lifetime: docs/activity-pool.md, "Rechecks").

    A proxy with less than ``min_remaining`` of usable life left is never rechecked (a check
    would cost a good part of what is left; outcome reports tell instead). Otherwise an
    AVAILABLE one is due ``max(min_interval, remaining / lifetime_fraction)`` after its last
    check, a SUSPECT one ``min_interval`` after it (its second check decides: AVAILABLE or
    UNHEALTHY). A proxy fetched and not checked within ``min_interval`` (its filler died) is
    handed out too: it needs its first check.
    """

    min_interval: timedelta = timedelta(seconds=30)
    lifetime_fraction: int = 10
    min_remaining: timedelta = timedelta(minutes=2)
    #: False: only unchecked and SUSPECT proxies are handed out (a trusted provider's upstream,
    #: whose AVAILABLE proxies are never probed); its AVAILABLE ones wait out their lives.
    available: bool = True


@dataclass(frozen=True, slots=True)
class DueCheck:
    """An idle proxy due for a recheck: where to reach it and what it was when listed."""

    proxy_id: str
    upstream_id: str
    state: ProxyState
    host: str
    port: int
    protocol: str
    #: None: never checked (FETCHED, or entered SUSPECT: its exit failed clients).
    checked_at: datetime | None
    usable_until: datetime
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class DueChecks:
    #: Oldest check first.
    checks: tuple[DueCheck, ...]
    #: False when the bounded scan stopped (``limit`` or ``scan_budget``) before it had seen
    #: every candidate: more may be due; ask again after checking these.
    complete: bool


@dataclass(frozen=True, slots=True)
class HeldProxy:
    """A proxy a gateway worker holds, as its snapshot describes it and the ownership manager
    judges it: the proxy whole (credentials included), its health and its capacity."""

    proxy: ExtractedProxy
    state: ProxyState
    #: Connections at once: what the proxy adds to its worker's capacity.
    max_concurrency: int


@dataclass(frozen=True, slots=True)
class WorkerAssignments:
    """What a snapshot for one worker is built from, read atomically."""

    epoch: int
    assignments: tuple[Assignment, ...]
    #: False when the worker holds more than the limit asked for.
    complete: bool
    #: Each assignment's proxy, by proxy ID, read in the same atomic step.
    held: Mapping[str, HeldProxy] = field(default_factory=dict)
    #: The worker's holdings revision these were read at (``WorkerRevision.revision``).
    revision: int = 0


@dataclass(frozen=True, slots=True)
class UpstreamInventory:
    #: Records the pool still manages (fetched, checking, available, suspect, draining).
    managed: int
    #: Free connection slots of its AVAILABLE proxies (unassigned, or assigned with a fresh
    #: runtime report).
    available_slots: int
    #: AVAILABLE proxies no one holds, unexpired: what an extract could draw now (before a
    #: client's gateway reserve and its other filters).
    extractable: int = 0
    #: AVAILABLE proxies gateway workers hold without draining, unexpired (the upstream's
    #: owned index above now; a lapsed lease counts until ``expire`` reclaims it).
    gateway_held: int = 0
    #: The connections those held proxies offer: their ``max_concurrency`` summed, busy or not.
    gateway_capacity: int = 0


@dataclass(frozen=True, slots=True)
class ExpiredTally:
    """One upstream's records removed at their hard expiry: used (extracted, or assigned to a
    worker) or never used (paid for and wasted)."""

    used: int = 0
    unused: int = 0


@dataclass(frozen=True, slots=True)
class SweepResult:
    #: Records past their hard expiry that were removed.
    expired: int = 0
    #: Expired worker sessions (with their snapshot references and runtime) removed.
    sessions: int = 0
    #: True when more expired records, sessions or quarantine entries remain: call again.
    more: bool = False
    #: Expired quarantine entries (of banned exits, and exits' failure counts and
    #: suspicions) removed.
    quarantines: int = 0
    #: Every record removed at its expiry since the previous sweep, wherever it was cleaned
    #: (a write's cleaning too), by upstream: taken, so each is told once (usage metrics).
    tally: Mapping[str, ExpiredTally] = field(default_factory=dict)


class Outcome(StrEnum):
    """How a client's use of an extracted proxy went."""

    OK = "ok"
    BANNED = "banned"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"


#: The target host of a quarantine that covers every host.
EVERY_HOST = "*"


@dataclass(frozen=True, slots=True)
class OutcomeReport:
    """The extracting client says how a proxy went; one outcome per proxy."""

    client_id: str
    proxy_id: str
    outcome: Outcome
    reported_at: datetime
    #: The host the client was reaching (a DNS name or an IP, no scheme or port), or None.
    target_host: str | None = None
    #: How long a ``banned`` exit stays quarantined; None: ``PoolOptions.default_quarantine``.
    #: Zero records the ban without a quarantine.
    quarantine: timedelta | None = None


@dataclass(frozen=True, slots=True)
class OutcomeResult:
    proxy_id: str
    upstream_id: str
    outcome: Outcome
    #: The host as stored (lowercased, normalised), or None.
    target_host: str | None
    #: True when this exact report was already recorded: nothing changed.
    replayed: bool
    #: End of the exit's quarantine for this host (a longer earlier one stays), or None.
    quarantined_until: datetime | None
    #: Until when the exit is suspect after this report (its new lifecycles enter SUSPECT),
    #: or None.
    suspect_until: datetime | None = None
