"""Checks of the upsert and health family (ADR-005, "Provider Upsert"): the batch a provider
fetched, with its credentials resolved, and the health checker's updates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from activity._checks import MAX_MS, aware_ms, count, digest, duration_ms, token
from activity._time import span_ms, to_ms
from activity._validation.common import MAX_CONCURRENCY, is_text, once, text
from activity.credentials import Credential, CredentialResolver, CredentialUnavailable, SecretRef
from activity.errors import InvalidBatch, InvalidRequest, StoreUnavailable
from activity.labels import MAX_LABEL, is_kept_label, label_key
from activity.types import (
    HEALTH_STATES,
    PROTOCOLS,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    PoolOptions,
    ProxyState,
    RecheckPolicy,
)

_MAX_LABELS = 32
_MAX_REASON = 200


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
    #: The region's and carrier's matching form (activity/labels.py): what the indexes and
    #: filters use; the labels themselves are kept as the vendor sent them.
    region_key: str | None = None
    carrier_key: str | None = None


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
        if not is_text(pid, max_text):
            text(pid, f"proxies[{index}].proxy_id", options, InvalidBatch)
        once(pid, seen_ids, "proxies", index, "proxy ID", "batch")
        key = proxy.unique_key
        if not is_text(key, max_text):
            text(key, f"proxies[{index}].unique_key", options, InvalidBatch)
        key_digest = unique_key_digest(key)
        once(key_digest, seen_keys, "proxies", index, "unique key", "batch")
        host = proxy.host
        if not is_text(host, max_text):
            text(host, f"proxies[{index}].host", options, InvalidBatch)
        port = proxy.port
        if type(port) is not int or not 1 <= port <= 65535:
            count(port, f"proxies[{index}].port", low=1, high=65535, error=InvalidBatch)
        if not isinstance(proxy.protocol, str) or proxy.protocol not in PROTOCOLS:
            raise InvalidBatch(f"proxies[{index}].protocol must be one of {sorted(PROTOCOLS)}")
        if proxy.secret_ref is not None and not isinstance(proxy.secret_ref, SecretRef):
            raise InvalidBatch(f"proxies[{index}].secret_ref must be a SecretRef")
        region, carrier = proxy.region, proxy.carrier
        region_key = None if region is None else _label_key(region, index, "region")
        carrier_key = None if carrier is None else _label_key(carrier, index, "carrier")
        concurrency = proxy.max_concurrency
        if type(concurrency) is not int or not 1 <= concurrency <= MAX_CONCURRENCY:
            count(
                concurrency,
                f"proxies[{index}].max_concurrency",
                low=1,
                high=MAX_CONCURRENCY,
                error=InvalidBatch,
            )
        expires = proxy.expires_at
        if type(expires) is datetime and expires.tzinfo is UTC:
            expires_ms = to_ms(expires)
            if not 0 <= expires_ms <= MAX_MS:
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
        raw.append(
            [
                pid,
                key_digest,
                host,
                port,
                proxy.protocol,
                region,
                carrier,
                concurrency,
                expires_ms,
                ref,
                labels,
            ]
        )
        username: str | None = None
        password: str | None = None
        if usable_ms <= now_ms or expires_ms - now_ms > max_ttl_ms:
            dropped += 1  # dies inside the safety margin, or an unbelievable provider TTL
            continue
        if proxy.secret_ref is not None:
            credential = _resolve(resolver, proxy.secret_ref)
            if credential is None or not (
                _storable(credential.username) and _storable(credential.password)
            ):
                dropped += 1
                continue
            username, password = credential.username, credential.password
        accepted.append(
            PreparedProxy(
                pid,
                index,
                key_digest,
                host,
                port,
                proxy.protocol,
                region,
                carrier,
                concurrency,
                expires_ms,
                usable_ms,
                username,
                password,
                labels,
                region_key,
                carrier_key,
            )
        )
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


def _label_key(value: object, index: int, name: str) -> str:
    """A region's or carrier's matching form; the label must be kept as it is (clean)."""
    if is_kept_label(value):
        return label_key(value)
    raise InvalidBatch(
        f"proxies[{index}].{name} must be a clean label: 1-{MAX_LABEL} printable characters, "
        "NFC, single spaces, none at either end"
    )


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
    expected: ProxyState | None = None


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
        once(pid, seen, "updates", index, "proxy ID", "batch")
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
        if update.expected is not None and not isinstance(update.expected, ProxyState):
            raise InvalidBatch(f"{where}.expected must be a ProxyState or None")
        out.append(PreparedHealth(pid, update.state, checked_ms, latency, reason, update.expected))
    return tuple(out)


#: Largest ``RecheckPolicy.lifetime_fraction``: keeps ``elapsed * fraction`` exact in Lua's
#: doubles for any elapsed time shorter than a year (lua/take_due_checks.lua).
MAX_LIFETIME_FRACTION = 1_000


@dataclass(frozen=True, slots=True)
class PreparedRecheck:
    upstream_id: str
    now_ms: int
    min_interval_ms: int
    lifetime_fraction: int
    min_remaining_ms: int
    limit: int
    available: bool = True


def prepare_recheck(
    upstream_id: object, now: object, policy: object, limit: object, options: PoolOptions
) -> PreparedRecheck:
    """A ``take_due_checks`` call: at most ``max_health_batch`` proxies (what one ``apply_health``
    takes), intervals of 1 ms to a year."""
    token(upstream_id, "upstream_id")
    now_ms = aware_ms(now, "now")
    if not isinstance(policy, RecheckPolicy):
        raise InvalidRequest("policy must be a RecheckPolicy")
    interval = duration_ms(policy.min_interval, "policy.min_interval", minimum=1)
    fraction = count(
        policy.lifetime_fraction, "policy.lifetime_fraction", low=1, high=MAX_LIFETIME_FRACTION
    )
    remaining = duration_ms(policy.min_remaining, "policy.min_remaining")
    n = count(limit, "limit", low=1, high=options.max_health_batch)
    if not isinstance(policy.available, bool):
        raise InvalidRequest("policy.available must be a bool")
    assert isinstance(upstream_id, str)
    return PreparedRecheck(upstream_id, now_ms, interval, fraction, remaining, n, policy.available)
