"""``POST /api/v1/extract`` and ``GET /api/v1/inventory``: thin views over ``RedisPool``.

An extract touches no database once its key is cached (auth.py): limits come from the cached
principal, proxies from Redis. Errors are raised and turned into problem+json centrally
(problems.py).

The ordinary extract is answered ahead of Django's handler by ``direct.py`` with
:func:`run_extract`, the function ``ExtractView.post`` calls; an error it meets is handed over
to this view (``HANDED_OVER``), which answers it as DRF answers any other.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from activity.errors import ScanBudgetExhausted
from pool_admin.api.auth import ConfigUnavailable, Principal
from pool_admin.api.extracting import (
    IDEMPOTENCY_KEY_PATTERN,
    count_refused_call,
    perform_extract,
)
from pool_admin.api.openapi import (
    NOT_ACCEPTABLE,
    REQUEST_ID,
    RETRY_AFTER,
    UNAUTHENTICATED,
    UNSUPPORTED_MEDIA_TYPE,
    problems,
)
from pool_admin.api.problems import Forbidden
from pool_admin.api.ratelimit import charge_call
from pool_admin.api.serializers import (
    ExtractRequestSerializer,
    ExtractResponseSerializer,
    InventoryResponseSerializer,
    proxy_body,
)
from pool_admin.config.models import Upstream
from pool_admin.pool import get_pool

#: WSGI environ key under which direct.py hands an extract's error over to ExtractView:
#: (the exception, the principal, the request ID or None). Set by the server side only: a client's
#: headers reach the environ as HTTP_* keys.
HANDED_OVER = "pool_admin.api.direct.error"


class ExtractView(APIView):
    @extend_schema(
        operation_id="extract",
        summary="Extract proxies for exclusive use",
        description=(
            "Takes up to `count` matching proxies out of the pool; nobody else gets them. "
            "`all_or_nothing` takes exactly `count` or none (409 `insufficient_inventory`). "
            "A repeated `Idempotency-Key` with the same body replays the first answer "
            "(`replayed: true`); with another body it is a 409 `idempotency_conflict`. "
            "A count above the client's limit, or a filter outside what the client may draw "
            "from, is a 403 `forbidden`; a client restricted to several upstreams, regions "
            "or protocols must name one in the filters (with exactly one allowed, it is "
            "applied). Each client has a requests-per-second limit (every call) and a "
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
                r415=UNSUPPORTED_MEDIA_TYPE,
                r429="A rate limit of the client is used up (`rate_limited`); see Retry-After.",
                r503="`store_unavailable` or `scan_budget_exhausted`; see Retry-After.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        request_id = uuid.uuid4().hex
        try:
            body = request.data
        except Exception as exc:  # malformed JSON, 415...: the call counts, a 429 comes first
            request.request_id = request_id  # type: ignore[attr-defined]
            count_refused_call(request.user, exc, request_id)
            raise
        body_out = run_extract(request, request.user, body, request_id)
        return Response(body_out, headers={"X-Request-ID": request_id})

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        handed_over = request.environ.pop(HANDED_OVER, None)  # type: ignore[attr-defined]
        if handed_over is None:
            return super().dispatch(request, *args, **kwargs)
        # An error direct.py met: answered as DRF's dispatch answers an exception.
        exc, principal, request_id = handed_over
        request.user = principal  # as DRF's authentication does
        if request_id is None:  # the body could not be read: the call counts, as in post
            request_id = uuid.uuid4().hex
            try:
                count_refused_call(principal, exc, request_id)
            except Exception as refused:  # over the limit (or no Redis): that is the answer
                exc = refused
        request.request_id = request_id  # type: ignore[attr-defined]
        self.args, self.kwargs = args, kwargs
        self.headers = self.default_response_headers
        self.request = self.initialize_request(request, *args, **kwargs)
        return self.finalize_response(self.request, self.handle_exception(exc))


def run_extract(
    request: Request | HttpRequest, principal: Principal, body: Any, request_id: str
) -> dict[str, Any]:
    """The extract's response body for ``body`` (parsed JSON); errors are raised."""
    request.request_id = request_id  # type: ignore[union-attr]  # problems.py reports it
    # request.headers, without building them all; perform_extract checks it
    key = request.META.get("HTTP_IDEMPOTENCY_KEY")
    result = perform_extract(principal, body, key, request_id)
    return {
        "proxies": [proxy_body(p) for p in result.proxies],
        "requested": result.requested,
        "returned": result.returned,
        "replayed": result.replayed,
    }


class InventoryView(APIView):
    @extend_schema(
        operation_id="inventory",
        summary="Live inventory per upstream this client may draw from",
        description=(
            "`unextracted`: proxies in the pool not yet extracted; `managed`: records the "
            "pool still manages (fetched, checking, available, suspect, draining); "
            "`available_slots`: free connection slots of its available proxies. "
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
        principal: Principal = request.user
        charge_call(principal)  # every call counts, as an extract's does
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
                    unextracted=pool.inventory(name),
                    managed=slots.managed,
                    available_slots=slots.available_slots,
                )
            except ScanBudgetExhausted:
                entry.update(available=False, unextracted=None, managed=None, available_slots=None)
            out.append(entry)
        return Response({"upstreams": out})
