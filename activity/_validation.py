"""Input checks done in Python before any store is touched (ADR-005, "Provider Upsert").

Both implementations call these, so bad input gets the same typed error from either, and a
rejected call never changes anything.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import orjson

from activity._time import span_ms, to_ms
from activity.credentials import Credential, CredentialResolver, CredentialUnavailable, SecretRef
from activity.errors import InvalidBatch, InvalidRequest, StoreUnavailable
from activity.hosts import normalize_host
from activity.types import (
    HEALTH_STATES,
    PROTOCOLS,
    CallQuota,
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    Outcome,
    OutcomeReport,
    ProxyState,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
)

if TYPE_CHECKING:
    from activity.types import PoolOptions

# Labels that become part of an index key name: short, no spaces, no control characters.
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,63}")
_NO_SPACE = re.compile(r"\S+")  # C-speed: text() runs several times per upserted proxy
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
_MAX_LABELS = 32
_MAX_CONCURRENCY = 100_000
_MAX_REASON = 200
_YEAR_MS = 366 * 24 * 3600 * 1000
#: Largest epoch, version or sequence: Redis's Lua JSON keeps 14 significant digits exactly.
MAX_COUNTER = 10**14 - 1
#: Latest instant accepted anywhere (year 5138 in ms, still exact in 14 digits).
_MAX_MS = 10**14 - 1


def check_options(options: PoolOptions) -> None:
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
    for name in ("idempotency_ttl", "operation_ttl", "report_ttl", "max_proxy_ttl",
                 "max_lease_ttl", "max_clock_skew", "max_quarantine"):  # fmt: skip
        value = getattr(options, name)
        # A year bounds every TTL: key lifetimes stay finite and datetime arithmetic exact.
        if not isinstance(value, timedelta) or not 1 <= span_ms(value) <= _YEAR_MS:
            raise InvalidRequest(f"PoolOptions.{name} must be a timedelta of 1 ms to a year")
    duration_ms(
        options.default_quarantine,
        "PoolOptions.default_quarantine",
        maximum=span_ms(options.max_quarantine),
    )


def aware_ms(value: object, what: str, error: type[InvalidRequest] = InvalidRequest) -> int:
    if not isinstance(value, datetime):
        raise error(f"{what} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise error(f"{what} must be timezone-aware")
    ms = to_ms(value)
    if not 0 <= ms <= _MAX_MS:  # before 1970 or unrepresentable: never a real proxy time
        raise error(f"{what} is out of range")
    return ms


def duration_ms(
    value: object,
    what: str,
    *,
    minimum: int = 0,
    maximum: int = _YEAR_MS,
    error: type[InvalidRequest] = InvalidRequest,
) -> int:
    if not isinstance(value, timedelta):
        raise error(f"{what} must be a timedelta")
    ms = span_ms(value)
    if not minimum <= ms <= maximum:
        raise error(f"{what} must be between {minimum} ms and {maximum} ms")
    return ms


def count(
    value: object, what: str, *, low: int, high: int, error: type[InvalidRequest] = InvalidRequest
) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise error(f"{what} must be an integer")
    if not low <= value <= high:
        raise error(f"{what} must be between {low} and {high}")
    return value


def text(
    value: object, what: str, options: PoolOptions, error: type[InvalidRequest] = InvalidRequest
) -> str:
    if not isinstance(value, str) or not value:
        raise error(f"{what} must be a non-empty string")
    if len(value) > options.max_text:
        raise error(f"{what} is longer than {options.max_text} characters")
    if not value.isprintable() or not _NO_SPACE.fullmatch(value):
        raise error(f"{what} must be printable without spaces")
    return value


def _is_text(value: object, max_text: int) -> bool:
    """What ``text`` accepts, without building a message."""
    return (
        type(value) is str
        and 0 < len(value) <= max_text
        and value.isprintable()
        and _NO_SPACE.fullmatch(value) is not None
    )


def _is_token(value: object) -> bool:
    """What ``token`` accepts, without building a message."""
    return type(value) is str and _TOKEN.fullmatch(value) is not None


def token(value: object, what: str, error: type[InvalidRequest] = InvalidRequest) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise error(f"{what} must be 1-64 characters of [A-Za-z0-9._:@+-]")
    return value


def digest(*parts: str) -> str:
    """Stable 128-bit digest used in key names; a digest never reveals its input."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]


def unique_key_digest(upstream_independent_key: str) -> str:
    # Not scoped by upstream on purpose: the same exit from two providers is one proxy, and
    # the incumbent upstream keeps it (ADR-005 upsert step 3).
    return digest("unique", upstream_independent_key.strip().lower())


@dataclass(slots=True)  # not frozen: its __init__ is three times cheaper; nobody mutates it
class PreparedProxy:
    """One upsert candidate after Python-side validation, digesting and credential lookup."""

    proxy_id: str
    #: Index in the caller's batch: chunks are cut by position in the input, so a retry in
    #: which other candidates were dropped still sends each survivor in the same chunk.
    position: int
    key_digest: str
    host: str
    port: int
    protocol: str
    region: str | None
    carrier: str | None
    max_concurrency: int
    expires_ms: int
    usable_ms: int
    username: str | None
    password: str | None
    labels: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    upstream_id: str
    max_size: int
    fetched_ms: int
    candidates: tuple[PreparedProxy, ...]
    #: Candidates dropped in Python (past usable_until, unresolvable credentials).
    dropped: int
    #: Digest of the whole batch, to detect an operation ID reused for other content.
    content_digest: str
    #: Number of proxies the caller sent (before any was dropped).
    size: int

    def chunks(self, cap: int) -> list[tuple[PreparedProxy, ...]]:
        """The candidates in chunks of `cap` input positions (one script call each in Redis).

        An empty batch is one empty chunk: its bounded cleaning still runs.
        """
        count = max(1, -(-self.size // cap))
        out: list[list[PreparedProxy]] = [[] for _ in range(count)]
        for candidate in self.candidates:
            out[candidate.position // cap].append(candidate)
        return [tuple(chunk) for chunk in out]


def prepare_batch(
    batch: object, options: PoolOptions, resolver: CredentialResolver, now_ms: int
) -> PreparedBatch:
    if not isinstance(batch, FetchedBatch):
        raise InvalidBatch("upsert_fetched takes a FetchedBatch")
    upstream_id = token(batch.upstream_id, "upstream_id", InvalidBatch)
    max_size = count(batch.max_size, "max_size", low=0, high=10**9, error=InvalidBatch)
    margin_ms = duration_ms(batch.safety_margin, "safety_margin", error=InvalidBatch)
    fetched_ms = aware_ms(batch.fetched_at, "fetched_at", InvalidBatch)
    if batch.operation_id is not None:
        text(batch.operation_id, "operation_id", options, InvalidBatch)
    if not isinstance(batch.proxies, (list, tuple)):
        raise InvalidBatch("proxies must be a list or tuple")
    if len(batch.proxies) > options.max_upsert_batch:
        raise InvalidBatch(f"batch has more than {options.max_upsert_batch} proxies")

    max_ttl_ms = span_ms(options.max_proxy_ttl)
    max_text = options.max_text
    seen_ids: set[str] = set()
    seen_keys: set[str] = set()
    accepted: list[PreparedProxy] = []
    raw: list[list[object]] = []
    dropped = 0
    # The checks below are the helpers' (text, token, count, aware_ms, _labels) as inline
    # expressions; only a failing value goes through the helper, for its exact message. This
    # loop runs for every upserted proxy: formatting field names up front cost more than all
    # the checks together.
    for index, proxy in enumerate(batch.proxies):
        if not isinstance(proxy, FetchedProxy):
            raise InvalidBatch(f"proxies[{index}] must be a FetchedProxy")
        pid = proxy.proxy_id
        if not _is_text(pid, max_text):
            text(pid, f"proxies[{index}].proxy_id", options, InvalidBatch)
        if pid in seen_ids:
            raise InvalidBatch(f"proxies[{index}]: proxy ID appears twice in the batch")
        seen_ids.add(pid)
        key = proxy.unique_key
        if not _is_text(key, max_text):
            text(key, f"proxies[{index}].unique_key", options, InvalidBatch)
        key_digest = unique_key_digest(key)
        if key_digest in seen_keys:
            raise InvalidBatch(f"proxies[{index}]: unique key appears twice in the batch")
        seen_keys.add(key_digest)
        host = proxy.host
        if not _is_text(host, max_text):
            text(host, f"proxies[{index}].host", options, InvalidBatch)
        port = proxy.port
        if type(port) is not int or not 1 <= port <= 65535:
            count(port, f"proxies[{index}].port", low=1, high=65535, error=InvalidBatch)
        if not isinstance(proxy.protocol, str) or proxy.protocol not in PROTOCOLS:
            raise InvalidBatch(f"proxies[{index}].protocol must be one of {sorted(PROTOCOLS)}")
        if proxy.secret_ref is not None and not isinstance(proxy.secret_ref, SecretRef):
            raise InvalidBatch(f"proxies[{index}].secret_ref must be a SecretRef")
        region, carrier = proxy.region, proxy.carrier
        if region is not None and not _is_token(region):
            token(region, f"proxies[{index}].region", InvalidBatch)
        if carrier is not None and not _is_token(carrier):
            token(carrier, f"proxies[{index}].carrier", InvalidBatch)
        concurrency = proxy.max_concurrency
        if type(concurrency) is not int or not 1 <= concurrency <= _MAX_CONCURRENCY:
            count(concurrency, f"proxies[{index}].max_concurrency", low=1,
                  high=_MAX_CONCURRENCY, error=InvalidBatch)  # fmt: skip
        expires = proxy.expires_at
        if type(expires) is datetime and expires.tzinfo is UTC:
            expires_ms = to_ms(expires)
            if not 0 <= expires_ms <= _MAX_MS:
                aware_ms(expires, f"proxies[{index}].expires_at", InvalidBatch)
        else:
            expires_ms = aware_ms(expires, f"proxies[{index}].expires_at", InvalidBatch)
        labels: tuple[tuple[str, str], ...] = ()
        if type(proxy.labels) is not dict or proxy.labels:
            labels = _labels(proxy.labels, f"proxies[{index}]", options)
        usable_ms = expires_ms - margin_ms
        ref = None if proxy.secret_ref is None else digest("ref", proxy.secret_ref.ref)
        # The operation digest covers the caller's input, not what survived filtering, so a
        # retry after the clock moved or a secret rotated is still recognised as the same call.
        raw.append([pid, key_digest, host, port, proxy.protocol, region, carrier, concurrency,
                    expires_ms, ref, labels])  # fmt: skip
        username: str | None = None
        password: str | None = None
        if usable_ms <= now_ms or expires_ms - now_ms > max_ttl_ms:
            dropped += 1  # dies inside the safety margin, or an unbelievable provider TTL
            continue
        if proxy.secret_ref is not None:
            credential = _resolve(resolver, proxy.secret_ref)
            if credential is None or not (_storable(credential.username)
                                          and _storable(credential.password)):  # fmt: skip
                dropped += 1
                continue
            username, password = credential.username, credential.password
        accepted.append(
            PreparedProxy(pid, index, key_digest, host, port, proxy.protocol, region, carrier,
                          concurrency, expires_ms, usable_ms, username, password, labels)
        )  # fmt: skip
    content = orjson.dumps([upstream_id, max_size, margin_ms, raw]).decode()
    return PreparedBatch(
        upstream_id=upstream_id,
        max_size=max_size,
        fetched_ms=fetched_ms,
        candidates=tuple(accepted),
        dropped=dropped,
        content_digest=digest("batch", content),
        size=len(batch.proxies),
    )


def _storable(value: object) -> bool:
    """A credential part the record can hold: a string that is valid UTF-8 (no lone surrogate)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _resolve(resolver: CredentialResolver, ref: SecretRef) -> Credential | None:
    """None when this reference cannot be resolved; a failing store fails the whole call."""
    try:
        return resolver.resolve(ref)
    except CredentialUnavailable:
        return None
    except Exception as exc:  # any other failure is the store's, not this candidate's
        raise StoreUnavailable("the credentials store failed; nothing was written") from exc


def _labels(value: object, where: str, options: PoolOptions) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise InvalidBatch(f"{where}.labels must be a mapping")
    if len(value) > _MAX_LABELS:
        raise InvalidBatch(f"{where}.labels has more than {_MAX_LABELS} entries")
    pairs = []
    for k, v in value.items():
        text(k, f"{where}.labels key", options, InvalidBatch)
        if not isinstance(v, str) or len(v) > options.max_text or not v.isprintable():
            raise InvalidBatch(f"{where}.labels values must be printable strings")
        pairs.append((k, v))
    return tuple(sorted(pairs))


@dataclass(frozen=True, slots=True)
class PreparedHealth:
    proxy_id: str
    state: ProxyState
    checked_ms: int
    latency_ms: int | None
    failure_reason: str | None


def prepare_health(
    updates: object, options: PoolOptions, now_ms: int
) -> tuple[PreparedHealth, ...]:
    if not isinstance(updates, (list, tuple)):
        raise InvalidBatch("apply_health takes a list of HealthUpdate")
    if len(updates) > options.max_health_batch:
        raise InvalidBatch(f"health batch has more than {options.max_health_batch} updates")
    seen: set[str] = set()
    out = []
    for index, update in enumerate(updates):
        where = f"updates[{index}]"
        if not isinstance(update, HealthUpdate):
            raise InvalidBatch(f"{where} must be a HealthUpdate")
        pid = text(update.proxy_id, f"{where}.proxy_id", options, InvalidBatch)
        if pid in seen:
            raise InvalidBatch(f"{where}: proxy ID appears twice in the batch")
        seen.add(pid)
        if not isinstance(update.state, ProxyState) or update.state not in HEALTH_STATES:
            raise InvalidBatch(f"{where}.state must be one of {sorted(HEALTH_STATES)}")
        checked_ms = aware_ms(update.checked_at, f"{where}.checked_at", InvalidBatch)
        if checked_ms > now_ms + span_ms(options.max_clock_skew):
            # A check from the future would make every later one look stale.
            raise InvalidBatch(f"{where}.checked_at is in the future")
        latency = None
        if update.latency_ms is not None:
            latency = count(
                update.latency_ms, f"{where}.latency_ms", low=0, high=3_600_000, error=InvalidBatch
            )
        reason = update.failure_reason
        if reason is not None and (
            not isinstance(reason, str) or len(reason) > _MAX_REASON or not reason.isprintable()
        ):
            raise InvalidBatch(f"{where}.failure_reason must be printable, at most 200 characters")
        out.append(PreparedHealth(pid, update.state, checked_ms, latency, reason))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PreparedExtract:
    client_id: str
    count: int
    mode: ExtractMode
    filters: tuple[tuple[str, str], ...]  # (dimension, value), in index order
    max_health_age_ms: int | None
    min_remaining_ms: int
    reserve: int
    #: Where the replay is stored ("idem" for a client key, "op" for a request ID), or None.
    replay_kind: str | None
    replay_digest: str | None
    #: How long the replay lives (before the earliest hard expiry caps it); 0 without one.
    replay_ttl_ms: int
    request_digest: str
    quota: PreparedQuota | None = None


#: Largest limit of a CallQuota (units per window) and its longest window.
QUOTA_MAX_UNITS = 10_000_000
QUOTA_MAX_WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class PreparedQuota:
    calls: int
    call_window_ms: int
    proxies: int
    proxy_window_ms: int


def prepare_quota(value: object) -> PreparedQuota | None:
    if value is None:
        return None
    if not isinstance(value, CallQuota):
        raise InvalidRequest("quota must be a CallQuota")
    return PreparedQuota(
        calls=count(value.calls, "quota.calls", low=1, high=QUOTA_MAX_UNITS),
        call_window_ms=duration_ms(
            value.call_window, "quota.call_window", minimum=1, maximum=QUOTA_MAX_WINDOW_MS
        ),
        proxies=count(value.proxies, "quota.proxies", low=1, high=QUOTA_MAX_UNITS),
        proxy_window_ms=duration_ms(
            value.proxy_window, "quota.proxy_window", minimum=1, maximum=QUOTA_MAX_WINDOW_MS
        ),
    )


def prepare_charge(
    client_id: object, quota: object, options: PoolOptions
) -> tuple[str, PreparedQuota]:
    """``charge_call``'s arguments, checked."""
    client = text(client_id, "client_id", options)
    prepared = prepare_quota(quota)
    if prepared is None:
        raise InvalidRequest("charge_call takes a CallQuota")
    return client, prepared


FILTER_DIMENSIONS = ("upstream", "region", "carrier", "protocol")


def prepare_extract(request: object, options: PoolOptions) -> PreparedExtract:
    if not isinstance(request, ExtractRequest):
        raise InvalidRequest("extract takes an ExtractRequest")
    client_id = text(request.client_id, "client_id", options)
    n = count(request.count, "count", low=1, high=options.max_extract_count)
    if not isinstance(request.mode, ExtractMode):
        raise InvalidRequest(f"mode must be one of {[m.value for m in ExtractMode]}")
    if not isinstance(request.filters, ExtractFilters):
        raise InvalidRequest("filters must be ExtractFilters")
    filters = []
    for dim in FILTER_DIMENSIONS:
        value = getattr(request.filters, dim)
        if value is not None:
            filters.append((dim, token(value, f"filters.{dim}")))
    if request.filters.protocol is not None and request.filters.protocol not in PROTOCOLS:
        raise InvalidRequest(f"filters.protocol must be one of {sorted(PROTOCOLS)}")
    health_age = None
    if request.max_health_age is not None:
        health_age = duration_ms(request.max_health_age, "max_health_age", minimum=1)
    remaining = 0
    if request.min_remaining is not None:
        remaining = duration_ms(request.min_remaining, "min_remaining")
    reserve = count(
        request.reserve_for_gateway,
        "reserve_for_gateway",
        low=0,
        high=options.max_gateway_reserve,
    )
    if n + reserve > options.scan_budget:
        raise InvalidRequest("count + reserve_for_gateway exceeds the scan budget")
    body = json.dumps(
        [n, request.mode.value, filters, health_age, remaining, reserve], separators=(",", ":")
    )
    request_digest = digest("extract", body)
    kind: str | None = None
    replay: str | None = None
    replay_ttl_ms = 0
    idempotency_ttl_ms = span_ms(options.idempotency_ttl)
    if request.idempotency_ttl is not None:
        # Not part of the request digest: a client whose TTL changes between a call and its
        # retry still gets its replay.
        idempotency_ttl_ms = duration_ms(
            request.idempotency_ttl,
            "idempotency_ttl",
            minimum=1,
            maximum=span_ms(options.max_proxy_ttl),
        )
    if request.idempotency_key is not None:
        key = text(request.idempotency_key, "idempotency_key", options)
        kind, replay = "idem", digest("idem", client_id, key)
        replay_ttl_ms = idempotency_ttl_ms
    elif request.request_id is not None:
        rid = text(request.request_id, "request_id", options)
        kind, replay = "op", digest("op-extract", client_id, rid)
        replay_ttl_ms = span_ms(options.operation_ttl)
    return PreparedExtract(
        client_id=client_id,
        count=n,
        mode=request.mode,
        filters=tuple(filters),
        max_health_age_ms=health_age,
        min_remaining_ms=remaining,
        reserve=reserve,
        replay_kind=kind,
        replay_digest=replay,
        replay_ttl_ms=replay_ttl_ms,
        request_digest=request_digest,
        quota=prepare_quota(request.quota),
    )


def limit(value: object, options: PoolOptions, what: str = "limit") -> int:
    return count(value, what, low=1, high=options.max_sweep_limit)


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
        if pid in seen:
            raise InvalidBatch(f"{where}: proxy ID appears twice in the report")
        seen.add(pid)
        count(entry.epoch, f"{where}.epoch", low=0, high=MAX_COUNTER, error=InvalidBatch)
        count(entry.active, f"{where}.active", low=0, high=_MAX_CONCURRENCY, error=InvalidBatch)
        count(entry.reserved, f"{where}.reserved", low=0, high=_MAX_CONCURRENCY, error=InvalidBatch)
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


def epoch(value: object, what: str = "epoch") -> int:
    return count(value, what, low=0, high=MAX_COUNTER)


def snapshot_ref(ref: object, options: PoolOptions) -> SnapshotRef:
    if not isinstance(ref, SnapshotRef):
        raise InvalidRequest("ref must be a SnapshotRef")
    count(ref.version, "ref.version", low=1, high=MAX_COUNTER)
    epoch(ref.epoch, "ref.epoch")
    text(ref.checksum, "ref.checksum", options)
    return ref


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
        if until > _MAX_MS:
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
