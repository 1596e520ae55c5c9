"""The one extract code path, shared by ``POST /api/v1/extract`` and ``manage.py extract``.

``perform_extract`` applies, in order: the ``Idempotency-Key``'s and the body's validation (400,
the API's serializer rules), its largest count (403), its allowed upstreams, regions and
protocols (403 for a value named outside them; naming none draws from any allowed one), then
``RedisPool.extract`` with the client's gateway reserve, idempotency TTL and limits
(ratelimit.py: the pool checks and charges them in the same atomic step, 429), and emits one
usage event, also for a call refused with a 400, 403 or 429. Errors are raised; the
API's exception handler (problems.py) and the command each turn them into their own output.

A call refused before the pool is asked still takes its request unit
(:func:`count_refused_call`, which the view also calls for a body it cannot parse); over the
limit, that refusal is a 429 instead.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from activity import ExtractedProxy, ExtractFilters, ExtractMode, ExtractRequest, ExtractResult
from activity.errors import ActivityError, InvalidRequest, QuotaExceeded
from activity.labels import label_key
from pool_admin.api.auth import Principal
from pool_admin.api.call_log import log_call
from pool_admin.api.problems import Forbidden, Problem, problem_code
from pool_admin.api.ratelimit import charge_call, quota_of, rate_limited
from pool_admin.api.serializers import POOL_BOUNDS, validate_extract_body
from pool_admin.bootstrap import get_pool
from pool_admin.metrics.events import MAX_DRAWS
from pool_admin.metrics.stream import emit_event

IDEMPOTENCY_KEY_MAX = POOL_BOUNDS.max_text  # what the pool takes as a key
#: Visible ASCII, no spaces (what the pool accepts: activity/_validation/common.py ``text``).
IDEMPOTENCY_KEY_PATTERN = rf"^[!-~]{{1,{IDEMPOTENCY_KEY_MAX}}}$"
_IDEMPOTENCY_KEY = re.compile(rf"[!-~]{{1,{IDEMPOTENCY_KEY_MAX}}}")


def _checked_idempotency_key(key: str | None) -> str | None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise Problem(
            400,
            "invalid_request",
            f"Idempotency-Key must be 1-{IDEMPOTENCY_KEY_MAX} printable ASCII characters "
            "without spaces.",
        )
    return key


def _base_event(principal: Principal, request_id: str, source: str) -> dict[str, Any]:
    return {
        "event": "extract",
        "source": source,
        "request_id": request_id,
        "client": principal.client_id,
        "key_prefix": principal.key_prefix,
    }


def _charge_refused(principal: Principal, refusal: BaseException, event: dict[str, Any]) -> None:
    """Take the request unit of a call refused before the pool counted it, and set ``event``'s
    outcome: the refusal's problem code, or, when taking the unit fails (429 over the limit,
    503 without Redis), that failure's, which is then raised as the answer."""
    event.update(outcome=problem_code(refusal), returned=0, replayed=False)
    try:
        charge_call(principal)
    except Exception as exc:
        event["outcome"] = problem_code(exc)
        raise


def count_refused_call(
    principal: Principal, refusal: BaseException, request_id: str, source: str = "api"
) -> None:
    """Take the request unit of an extract call refused before the pool was asked, and emit its
    usage event. Every call counts: over the limit this raises ``RateLimited``, which is then
    the answer (and the event's outcome)."""
    event = _base_event(principal, request_id, source)
    try:
        _charge_refused(principal, refusal, event)
    finally:
        log_call(event)
        _emit_extract(event, ())


def _emit_extract(event: dict[str, Any], proxies: tuple[ExtractedProxy, ...]) -> None:
    """The call's usage event on the metrics stream: its outcome, and the proxies it drew by
    upstream and region with their summed age since fetch (the time from fetch to first use).

    A replay (the same idempotency key or request ID again) is a call of outcome ``replayed``
    that returned and drew nothing: its proxies were counted, and their first use timed, by
    the call that took them."""
    if event.get("replayed") and event["outcome"] == "ok":
        event = event | {"outcome": "replayed", "returned": 0}
        proxies = ()
    now_ms = int(time.time() * 1000)
    draws: dict[tuple[str, str], list[int]] = {}
    for p in proxies:
        row = draws.setdefault((p.upstream_id, p.region or ""), [0, 0])
        row[0] += 1
        if p.fetched_at is not None:
            row[1] += max(0, now_ms - int(p.fetched_at.timestamp() * 1000))
    fields: dict[str, Any] = {
        "client": event["client"],
        "outcome": event["outcome"],
        "returned": event.get("returned", 0),
        "duration_ms": int(event.get("duration_ms", 0)),
    }
    if len(draws) > MAX_DRAWS:  # too many regions to tell apart: by upstream only
        merged: dict[tuple[str, str], list[int]] = {}
        for (upstream, _), (n, age) in draws.items():
            row = merged.setdefault((upstream, ""), [0, 0])
            row[0] += n
            row[1] += age
        draws = merged
    if draws:
        fields["draws"] = [[u, r, n, age] for (u, r), (n, age) in sorted(draws.items())]
    emit_event("extract", **fields)


def _restrict(
    dimension: str,
    given: str | None,
    allowed: frozenset[str],
    key: Callable[[str], str] = str,
) -> str | frozenset[str] | None:
    """The filter of one dimension under the client's allowed set, compared in ``key``'s form
    (a region's matching form: a client allowed ``US`` may ask for ``us``): the value given, or
    with none given, any of the allowed ones (none allowed: any at all)."""
    if not allowed:
        return given
    if given is not None:
        if key(given) not in {key(value) for value in allowed}:
            raise Forbidden(
                f"This client may not draw from {dimension} {given!r}; it may draw from "
                f"{', '.join(repr(v) for v in sorted(allowed))}."
            )
        return given
    if len(allowed) == 1:
        return next(iter(allowed))
    return allowed


def vars_of(filters: ExtractFilters) -> dict[str, str | list[str] | None]:
    """The filters as JSON values (a set of allowed values as its sorted list)."""
    return {
        dimension: sorted(value) if isinstance(value, frozenset) else value
        for dimension, value in (
            ("protocol", filters.protocol),
            ("region", filters.region),
            ("carrier", filters.carrier),
            ("upstream", filters.upstream),
        )
    }


def perform_extract(
    principal: Principal,
    raw_body: Any,
    idempotency_key: str | None = None,
    request_id: str | None = None,
    source: str = "api",
) -> ExtractResult:
    """Validate ``raw_body`` (the API's JSON body) and extract for ``principal``."""
    request_id = request_id or uuid.uuid4().hex
    try:
        idempotency_key = _checked_idempotency_key(idempotency_key)
        data = validate_extract_body(raw_body)
        count = data["count"]
        if count > principal.max_count_per_request:
            raise Forbidden(
                f"count may be at most {principal.max_count_per_request} for this client.",
            )
        given = data.get("filters") or {}
        filters = ExtractFilters(
            protocol=_restrict("protocol", given.get("protocol"), principal.allowed_protocols),
            region=_restrict("region", given.get("region"), principal.allowed_regions, label_key),
            carrier=given.get("carrier"),
            upstream=_restrict("upstream", given.get("upstream"), principal.allowed_upstreams),
        )
    except Exception as exc:
        count_refused_call(principal, exc, request_id, source)
        raise
    remaining = data.get("min_remaining_s")
    extract = ExtractRequest(
        client_id=principal.client_id,
        count=count,
        mode=ExtractMode(data["mode"]),
        filters=filters,
        idempotency_key=idempotency_key,
        idempotency_ttl=principal.idempotency_ttl,
        request_id=request_id,
        min_remaining=None if remaining is None else timedelta(seconds=remaining),
        reserve_for_gateway=principal.gateway_reserve,
        quota=quota_of(principal),
    )
    event = _base_event(principal, request_id, source)
    event |= {
        "mode": extract.mode.value,
        "requested": count,
        "filters": {k: v for k, v in vars_of(filters).items() if v is not None},
        "idempotent": idempotency_key is not None,
        "outcome": "error",
    }
    started = time.monotonic()
    try:
        result = get_pool().extract(extract)
    except QuotaExceeded as refusal:
        event.update(outcome="rate_limited", returned=0, replayed=False)
        raise rate_limited(refusal, principal, count) from None
    except InvalidRequest as exc:  # refused before the pool counted the call: it counts here
        _charge_refused(principal, exc, event)
        raise
    except BaseException as exc:
        if isinstance(exc, ActivityError):
            event.update(outcome=exc.code, returned=0, replayed=False)
        raise
    else:
        event.update(outcome="ok", returned=result.returned, replayed=result.replayed)
        event["generation"] = result.generation
        event["upstreams"] = sorted({p.upstream_id for p in result.proxies})
    finally:
        event["duration_ms"] = round((time.monotonic() - started) * 1000, 2)
        log_call(event)
        _emit_extract(event, result.proxies if event["outcome"] == "ok" else ())
    return result
