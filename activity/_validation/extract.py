"""Checks of the extract and quota family: an extract request and a client's CallQuota."""

from __future__ import annotations

import json
from dataclasses import dataclass

from activity._checks import count, digest, duration_ms, token
from activity._time import span_ms
from activity._validation.common import filter_key, text
from activity.errors import InvalidRequest
from activity.types import (
    MAX_FILTER_VALUES,
    PROTOCOLS,
    QUOTA_MAX_UNITS,
    CallQuota,
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    PoolOptions,
)


@dataclass(frozen=True, slots=True)
class PreparedExtract:
    client_id: str
    count: int
    mode: ExtractMode
    #: (dimension, its values sorted: any one of them matches), in index order.
    filters: tuple[tuple[str, tuple[str, ...]], ...]
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


#: Longest window of a CallQuota (its largest limit: activity.types.QUOTA_MAX_UNITS).
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


def _filter_values(dim: str, given: object) -> tuple[str, ...] | None:
    """One dimension of ExtractFilters in its matching form, sorted and without repeats (``US``
    and ``us`` are one region); None when it names nothing."""
    if given is None:
        return None
    what = f"filters.{dim}"
    if isinstance(given, frozenset):
        if not 1 <= len(given) <= MAX_FILTER_VALUES:
            raise InvalidRequest(f"{what} must name 1-{MAX_FILTER_VALUES} values")
        given_values: tuple[object, ...] = tuple(given)
    else:
        given_values = (given,)
    values: set[str] = set()
    for value in given_values:
        if dim in ("region", "carrier"):  # vendors' words, matched in one form
            values.add(filter_key(value, what))
        else:
            values.add(token(value, what))
    if dim == "protocol" and not values <= PROTOCOLS:
        raise InvalidRequest(f"{what} must be one of {sorted(PROTOCOLS)}")
    return tuple(sorted(values))


def prepare_extract(request: object, options: PoolOptions) -> PreparedExtract:
    if not isinstance(request, ExtractRequest):
        raise InvalidRequest("extract takes an ExtractRequest")
    client_id = text(request.client_id, "client_id", options)
    n = count(request.count, "count", low=1, high=options.max_extract_count)
    if not isinstance(request.mode, ExtractMode):
        raise InvalidRequest(f"mode must be one of {[m.value for m in ExtractMode]}")
    if not isinstance(request.filters, ExtractFilters):
        raise InvalidRequest("filters must be ExtractFilters")
    filters = tuple(
        (dim, values)
        for dim in FILTER_DIMENSIONS
        if (values := _filter_values(dim, getattr(request.filters, dim))) is not None
    )
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
    # A one-value filter is digested as its value alone: the digest of a request that names
    # one value is the same as before sets existed, so a retry across an upgrade still replays.
    digested = [(dim, values[0] if len(values) == 1 else list(values)) for dim, values in filters]
    body = json.dumps(
        [n, request.mode.value, digested, health_age, remaining, reserve], separators=(",", ":")
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
        filters=filters,
        max_health_age_ms=health_age,
        min_remaining_ms=remaining,
        reserve=reserve,
        replay_kind=kind,
        replay_digest=replay,
        replay_ttl_ms=replay_ttl_ms,
        request_digest=request_digest,
        quota=prepare_quota(request.quota),
    )
