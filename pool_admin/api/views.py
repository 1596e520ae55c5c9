"""``POST /api/v1/extract`` and ``GET /api/v1/inventory``: thin views over ``RedisPool``.

An extract touches no database once its key is cached (auth.py): limits come from the cached
principal, proxies from Redis. Errors are raised and turned into problem+json centrally
(problems.py).

The ordinary extract is also answered ahead of Django's handler, by the fast extract
application (``fast_extract.py``), with :func:`run_extract`, the function ``ExtractView.post``
calls; tests/pool_admin/api/test_fast_extract.py holds the two answers alike.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from activity.errors import ScanBudgetExhausted
from pool_admin.api.auth import ConfigUnavailable, Principal, principal_of
from pool_admin.api.base import ApiView
from pool_admin.api.extracting import (
    IDEMPOTENCY_KEY_PATTERN,
    count_refused_call,
    perform_extract,
)
from pool_admin.api.openapi import (
    BODY_TIMED_OUT,
    LENGTH_REQUIRED,
    NO_STORE,
    NOT_ACCEPTABLE,
    PAYLOAD_TOO_LARGE,
    REQUEST_ID,
    RETRY_AFTER,
    UNAUTHENTICATED,
    UNSUPPORTED_MEDIA_TYPE,
    problems,
)
from pool_admin.api.problems import Forbidden
from pool_admin.api.serializers import (
    ExtractRequestSerializer,
    ExtractResponseSerializer,
    InventoryResponseSerializer,
    proxy_body,
)
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import Upstream


class ExtractView(ApiView):
    charges_request_unit = False  # the pool counts the call with the extract

    @extend_schema(
        operation_id="extract",
        summary="Extract proxies for exclusive use",
        description=(
            "Takes up to `count` (default 1) matching proxies out of the pool; nobody else "
            "gets them, so `{}` is a whole request for one proxy. `partial` (the default) "
            "returns what there is; `all_or_nothing` takes exactly `count` or none (409 "
            "`insufficient_inventory`). "
            "A repeated `Idempotency-Key` with the same body replays the first answer "
            "(`replayed: true`); with another body it is a 409 `idempotency_conflict`. "
            "A count above the client's limit, or a filter outside what the client may draw "
            "from, is a 403 `forbidden`; a filter left out draws from any value the client "
            "is allowed (a client restricted to several upstreams that names none draws from "
            "all of them). Each client has a requests-per-second limit (every call) and a "
            "proxies-per-minute limit (proxies returned; a call is refused unless `count` more "
            "fit): over either it is a 429 `rate_limited` with Retry-After."
        ),
        request=ExtractRequestSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="Replays the first answer for the same client, key and body.",
                pattern=IDEMPOTENCY_KEY_PATTERN,
            ),
            REQUEST_ID,
            NO_STORE,
            RETRY_AFTER,
        ],
        responses={
            200: ExtractResponseSerializer,
            **problems(
                r400="Malformed body, unknown field or bad value (`invalid_request`).",
                r401=UNAUTHENTICATED,
                r403="Count above the client's limit or a disallowed filter (`forbidden`).",
                r406=NOT_ACCEPTABLE,
                r409="`idempotency_conflict` or `insufficient_inventory`.",
                r408=BODY_TIMED_OUT,
                r411=LENGTH_REQUIRED,
                r413=PAYLOAD_TOO_LARGE,
                r415=UNSUPPORTED_MEDIA_TYPE,
                r429="A rate limit of the client is used up (`rate_limited`); see Retry-After.",
                r503="`store_unavailable` or `scan_budget_exhausted`; see Retry-After.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        request_id: str = request.request_id  # type: ignore[attr-defined]  # base.py
        try:
            body = request.data
        except Exception as exc:  # malformed JSON, 415, 413...: the call counts, a 429 first
            count_refused_call(principal_of(request), exc, request_id)
            raise
        idempotency_key = request.META.get("HTTP_IDEMPOTENCY_KEY")
        body_out = run_extract(principal_of(request), body, idempotency_key, request_id)
        return Response(body_out, headers={"X-Request-ID": request_id})

    @property
    def default_response_headers(self) -> dict[str, str]:
        # Every answer of the view, errors too: its answers hold proxy passwords, which no
        # cache may keep (the fast path sends the same headers: fast_extract.py).
        return {**super().default_response_headers, "Cache-Control": "no-store"}


def run_extract(
    principal: Principal, body: Any, idempotency_key: str | None, request_id: str
) -> dict[str, Any]:
    """The extract's response body for ``body`` (parsed JSON); errors are raised. The one
    function both ExtractView and the fast extract application (fast_extract.py) answer with."""
    result = perform_extract(principal, body, idempotency_key, request_id)
    return {
        "proxies": [proxy_body(p) for p in result.proxies],
        "requested": result.requested,
        "returned": result.returned,
        "replayed": result.replayed,
        "generation": result.generation,
    }


class InventoryView(ApiView):
    @extend_schema(
        operation_id="inventory",
        summary="Live inventory per upstream this client may draw from",
        description=(
            "`extractable`: proxies an extract could draw now (checked available, held by "
            "no one, usable); `unextracted`: records not yet extracted in any health state; "
            "`managed`: records the pool still manages (fetched, checking, available, suspect, "
            "draining); `available_slots`: free connection slots of its available proxies. "
            "An upstream the pool could not count within its scan budget is listed with "
            "`available: false` and null numbers. Only for clients an operator allowed to "
            "see it (API client: may see inventory); others get a 403 `forbidden`. Each call "
            "takes one unit of the client's requests-per-second limit."
        ),
        parameters=[RETRY_AFTER],
        responses={
            200: InventoryResponseSerializer,
            **problems(
                r401=UNAUTHENTICATED,
                r403="This client may not see the inventory (`forbidden`).",
                r406=NOT_ACCEPTABLE,
                r429="The client's requests-per-second limit (`rate_limited`); see Retry-After.",
                r503="`store_unavailable` (Redis or PostgreSQL); see Retry-After.",
            ),
        },
    )
    def get(self, request: Request) -> Response:
        principal = principal_of(request)  # its request unit is taken (base.py)
        if not principal.may_view_inventory:
            raise Forbidden(
                "This client may not see the inventory; an operator can allow it "
                "(API client: may see inventory)."
            )
        try:
            rows = Upstream.objects.order_by("name")
            if principal.allowed_upstreams:
                rows = rows.filter(name__in=principal.allowed_upstreams)
            upstreams = list(rows.values_list("name", "enabled"))
        except DatabaseError:
            raise ConfigUnavailable() from None
        pool = get_pool()
        out = []
        for name, enabled in upstreams:
            entry: dict[str, Any] = {"upstream": name, "enabled": enabled}
            try:
                slots = pool.upstream_inventory(name)
                entry.update(
                    available=True,
                    extractable=slots.extractable,
                    unextracted=pool.inventory(name),
                    managed=slots.managed,
                    available_slots=slots.available_slots,
                )
            except ScanBudgetExhausted:
                entry.update(
                    available=False,
                    extractable=None,
                    unextracted=None,
                    managed=None,
                    available_slots=None,
                )
            out.append(entry)
        return Response({"upstreams": out})
