"""``POST /api/v1/extract`` and ``GET /api/v1/inventory``: thin views over ``RedisPool``.

An extract touches no database once its key is cached (auth.py): limits come from the cached
principal, proxies from Redis. Errors are raised and turned into problem+json centrally
(problems.py).

``ExtractView`` has a direct path for the ordinary request, the one that is the API's load: a
POST with a JSON body, a cached ``Bearer`` key, no ``Accept`` other than ``*/*`` or
``application/json`` and no query string. It skips DRF's request wrapper, content negotiation
and parser (about a fifth of a request's CPU time) and answers with the same bytes and headers;
its errors still go through DRF's ``handle_exception`` and ``finalize_response``. Anything else
(another method or media type, an unknown or uncached key, a body that is not strict JSON)
takes DRF's full path unchanged, which then raises the same errors as before.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils import json as drf_json
from rest_framework.views import APIView

from activity.errors import ScanBudgetExhausted
from pool_admin.api.auth import ConfigUnavailable, Principal, bearer_key, cached_principal
from pool_admin.api.extracting import perform_extract
from pool_admin.api.problems import PROBLEM_JSON, Forbidden, Problem, ProblemSerializer
from pool_admin.api.serializers import (
    ExtractRequestSerializer,
    ExtractResponseSerializer,
    InventoryResponseSerializer,
    proxy_body,
)
from pool_admin.config.models import Upstream
from pool_admin.pool import get_pool

IDEMPOTENCY_KEY_MAX = 256  # PoolOptions.max_text
#: Visible ASCII, no spaces (what the pool accepts: activity/_validation.py ``text``).
IDEMPOTENCY_KEY_PATTERN = rf"^[!-~]{{1,{IDEMPOTENCY_KEY_MAX}}}$"
_IDEMPOTENCY_KEY = re.compile(rf"[!-~]{{1,{IDEMPOTENCY_KEY_MAX}}}")


def _problem(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ProblemSerializer, description=description)


def _problems(**by_status: str) -> dict[Any, Any]:
    return {(int(s[1:]), PROBLEM_JSON): _problem(text) for s, text in by_status.items()}


_COMMON = {"r401": "Missing, invalid or revoked API key (`unauthenticated`)."}


#: What the direct path of ExtractView takes (anything else goes through DRF's full path).
_DIRECT_CONTENT_TYPES = frozenset({"application/json", "application/json; charset=utf-8"})
_DIRECT_ACCEPT = frozenset({"", "*/*", "application/json"})
#: Largest body the direct path reads (an extract body is well under 1 KiB).
_DIRECT_MAX_BODY = 64 * 1024
_render_json = JSONRenderer().render


def _direct_inputs(request: HttpRequest) -> tuple[Principal, Any] | None:
    """(principal, parsed body) if ``request`` can take the direct path, else None."""
    meta = request.META
    if (
        request.method != "POST"
        or meta.get("QUERY_STRING")
        or meta.get("CONTENT_TYPE", "").lower() not in _DIRECT_CONTENT_TYPES
        or meta.get("HTTP_ACCEPT", "") not in _DIRECT_ACCEPT
        or not 0 < _content_length(meta) <= _DIRECT_MAX_BODY
    ):
        return None
    try:
        plaintext = bearer_key(meta.get("HTTP_AUTHORIZATION", "").encode("iso-8859-1"))
        principal = None if plaintext is None else cached_principal(plaintext)
        if principal is None:
            return None
        body = drf_json.loads(request.body.decode("utf-8"))  # DRF's strict JSON: no NaN
    except (AuthenticationFailed, UnicodeError, ValueError, RecursionError):
        return None
    return principal, body


def _content_length(meta: dict[str, Any]) -> int:
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _idempotency_key(request: Request | HttpRequest) -> str | None:
    key = request.META.get("HTTP_IDEMPOTENCY_KEY")  # request.headers, without building them all
    if key is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise Problem(
            400,
            "invalid_request",
            f"Idempotency-Key must be 1-{IDEMPOTENCY_KEY_MAX} printable ASCII characters "
            "without spaces.",
        )
    return key


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
            )
        ],
        responses={
            200: ExtractResponseSerializer,
            **_problems(
                r400="Malformed body, unknown field or bad value (`invalid_request`).",
                **_COMMON,
                r403="Count above the client's limit or a disallowed filter (`forbidden`).",
                r409="`idempotency_conflict` or `insufficient_inventory`.",
                r429="A rate limit of the client is used up (`rate_limited`); see Retry-After.",
                r503="`store_unavailable` or `scan_budget_exhausted`; see Retry-After.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        body_out, request_id = self._extract(request, request.user, request.data)
        return Response(body_out, headers={"X-Request-ID": request_id})

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        direct = _direct_inputs(request)
        if direct is None:
            return super().dispatch(request, *args, **kwargs)
        principal, body = direct
        request.user = principal  # type: ignore[assignment]  # as DRF's authentication does
        # The view's permissions hold on this path too (any denial is answered by DRF's).
        if not all(p.has_permission(request, self) for p in self.get_permissions()):  # type: ignore[arg-type]
            return super().dispatch(request, *args, **kwargs)
        self.args, self.kwargs = args, kwargs
        self.headers = self.default_response_headers
        try:
            body_out, request_id = self._extract(request, principal, body)
        except Exception as exc:
            # What DRF's dispatch does with an exception, on its own request wrapper.
            self.request = self.initialize_request(request, *args, **kwargs)
            return self.finalize_response(self.request, self.handle_exception(exc))
        # JSONRenderer's bytes for the one media type this view offers, without negotiating.
        response = HttpResponse(
            _render_json(body_out),
            content_type=JSONRenderer.media_type,
            headers={"X-Request-ID": request_id},
        )
        return self.finalize_response(request, response)  # type: ignore[arg-type]

    def _extract(
        self, request: Request | HttpRequest, principal: Principal, body: Any
    ) -> tuple[dict[str, Any], str]:
        request_id = uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[union-attr]
        key = _idempotency_key(request)
        result = perform_extract(principal, body, key, request_id)
        body_out = {
            "proxies": [proxy_body(p) for p in result.proxies],
            "requested": result.requested,
            "returned": result.returned,
            "replayed": result.replayed,
        }
        return body_out, request_id


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
            "see it (API client: may see inventory); others get a 403 `forbidden`."
        ),
        responses={
            200: InventoryResponseSerializer,
            **_problems(
                **_COMMON,
                r403="This client may not see the inventory (`forbidden`).",
                r503="`store_unavailable` (Redis or PostgreSQL); see Retry-After.",
            ),
        },
    )
    def get(self, request: Request) -> Response:
        principal: Principal = request.user
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
