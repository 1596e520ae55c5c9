"""The one extract code path, shared by ``POST /api/v1/extract`` and ``manage.py extract``.

``perform_extract`` applies, in order: the client's requests-per-second limit (429), the body's
validation (400, the API's serializer rules), its largest count (403), its allowed upstreams,
regions and protocols (403), its proxies-per-minute limit (429), then ``RedisPool.extract`` with
its gateway reserve and idempotency TTL, gives back to the per-minute limit what it did not hand
out, and emits one usage event. Errors are raised; the API's exception handler (problems.py)
and the command each turn them into their own output.

Both limits are taken in one Redis call once the body is known to be valid and allowed
(ratelimit.py); a call refused by the body or its filters takes only its request, and a
requests-per-second refusal still comes first.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

from activity import ExtractFilters, ExtractMode, ExtractRequest, ExtractResult
from activity.errors import ActivityError
from pool_admin.api.auth import Principal
from pool_admin.api.problems import Forbidden
from pool_admin.api.ratelimit import ClientLimiter, Reservation, get_limiter
from pool_admin.api.serializers import validate_extract_body
from pool_admin.api.usage import emit_usage
from pool_admin.pool import get_pool

logger = logging.getLogger(__name__)


def _restrict(dimension: str, given: str | None, allowed: frozenset[str]) -> str | None:
    """The filter value to use for one dimension under the client's allowed set."""
    if not allowed:
        return given
    if given is not None:
        if given not in allowed:
            raise Forbidden(f"This client may not draw from {dimension} {given!r}.")
        return given
    if len(allowed) == 1:
        return next(iter(allowed))
    raise Forbidden(
        f"This client may draw from several {dimension}s only with a filter: "
        f"set filters.{dimension} to one of {sorted(allowed)}."
    )


def vars_of(filters: ExtractFilters) -> dict[str, str | None]:
    return {
        "protocol": filters.protocol,
        "region": filters.region,
        "carrier": filters.carrier,
        "upstream": filters.upstream,
    }


def _give_back(limiter: ClientLimiter, reservation: Reservation, units: int) -> None:
    """Refund unused proxies; a failure only over-counts the client, so it is logged."""
    if units <= 0:
        return
    try:
        limiter.refund(reservation, units)
    except Exception as exc:  # the extract's own outcome stands
        logger.warning("could not give back %d proxies to the limit: %s", units, type(exc).__name__)


def perform_extract(
    principal: Principal,
    raw_body: Any,
    idempotency_key: str | None = None,
    request_id: str | None = None,
    source: str = "api",
) -> ExtractResult:
    """Validate ``raw_body`` (the API's JSON body) and extract for ``principal``."""
    limiter = get_limiter()
    try:
        data = validate_extract_body(raw_body)
        count = data["count"]
        if count > principal.max_count_per_request:
            raise Forbidden(
                f"count may be at most {principal.max_count_per_request} for this client.",
            )
        given = data.get("filters") or {}
        filters = ExtractFilters(
            protocol=_restrict("protocol", given.get("protocol"), principal.allowed_protocols),
            region=_restrict("region", given.get("region"), principal.allowed_regions),
            carrier=given.get("carrier"),
            upstream=_restrict("upstream", given.get("upstream"), principal.allowed_upstreams),
        )
    except Exception:
        limiter.hit_request(principal)  # every call counts; over the limit, 429 comes first
        raise
    remaining = data.get("min_remaining_s")
    request_id = request_id or uuid.uuid4().hex
    extract = ExtractRequest(
        client_id=principal.client_id,
        count=count,
        mode=ExtractMode(data["mode"]),
        filters=filters,
        idempotency_key=idempotency_key,
        request_id=request_id,
        min_remaining=None if remaining is None else timedelta(seconds=remaining),
        reserve_for_gateway=principal.gateway_reserve,
    )
    event: dict[str, Any] = {
        "event": "extract",
        "source": source,
        "request_id": request_id,
        "client": principal.client_id,
        "key_prefix": principal.key_prefix,
        "mode": extract.mode.value,
        "requested": count,
        "filters": {k: v for k, v in vars_of(filters).items() if v is not None},
        "idempotent": idempotency_key is not None,
        "outcome": "error",
    }
    reservation = limiter.take(principal, count)
    started = time.monotonic()
    try:
        result = get_pool(principal.idempotency_ttl).extract(extract)
    except BaseException as exc:
        if isinstance(exc, ActivityError):
            event.update(outcome=exc.code, returned=0, replayed=False)
        _give_back(limiter, reservation, count)
        raise
    else:
        event.update(outcome="ok", returned=result.returned, replayed=result.replayed)
        event["upstreams"] = sorted({p.upstream_id for p in result.proxies})
    finally:
        event["duration_ms"] = round((time.monotonic() - started) * 1000, 2)
        emit_usage(event)
    _give_back(limiter, reservation, count if result.replayed else count - result.returned)
    return result
