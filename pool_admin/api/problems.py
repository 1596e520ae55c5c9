"""RFC 9457 problem details: every error of the client API, with a stable ``code``.

One DRF exception handler maps DRF's own errors and the activity pool's typed errors, so views
raise and never build error responses. Details never carry an API key, a proxy password or a
Redis/PostgreSQL URL: they come from fixed texts or from activity errors, whose messages are
secret-free by contract (activity/errors.py).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import set_rollback

from activity.errors import (
    ActivityError,
    IdempotencyConflict,
    InsufficientInventory,
    InvalidRequest,
    ScanBudgetExhausted,
    StoreUnavailable,
)

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
#: Seconds a client should wait after a 503 before retrying.
RETRY_AFTER_S = 1

_TITLES = {
    "invalid_request": "Invalid request",
    "unauthenticated": "Authentication required",
    "forbidden": "Forbidden",
    "not_found": "Not found",
    "method_not_allowed": "Method not allowed",
    "not_acceptable": "Not acceptable",
    "unsupported_media_type": "Unsupported media type",
    "idempotency_conflict": "Idempotency key reused with a different request",
    "insufficient_inventory": "Not enough matching proxies",
    "rate_limited": "Too many requests",
    "store_unavailable": "Store unavailable",
    "scan_budget_exhausted": "Temporarily unable to answer",
    "internal_error": "Internal error",
}


class Problem(exceptions.APIException):
    """An error with an explicit status, stable code and optional extension members."""

    #: Response headers (e.g. ``Retry-After``), set by subclasses that need them.
    headers: dict[str, str] | None = None

    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail, code)
        self.status_code = status
        self.code = code
        self.extra = extra


class Forbidden(Problem):
    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(403, "forbidden", detail, **extra)


class RateLimited(Problem):
    """429 ``rate_limited``: a client limit is used up; ``Retry-After`` says when to retry."""

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(429, "rate_limited", detail)
        self.headers = {"Retry-After": str(retry_after)}


class ProblemSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Schema of a problem+json body (RFC 9457) as this API sends it."""

    type = serializers.CharField(help_text="urn:proxy-pool:problem:<code>")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable machine-readable error code.")
    instance = serializers.CharField(required=False, help_text="The request path.")
    request_id = serializers.CharField(required=False)
    errors = serializers.DictField(required=False, help_text="Field errors (invalid_request).")
    requested = serializers.IntegerField(required=False)
    available = serializers.IntegerField(required=False)


def problem_response(
    request: Any,
    status: int,
    code: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    body: dict[str, Any] = {
        "type": f"urn:proxy-pool:problem:{code}",
        "title": _TITLES.get(code, code.replace("_", " ").capitalize()),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if request is not None:
        body["instance"] = request.path
        request_id = getattr(request, "request_id", None)
        if request_id:
            body["request_id"] = request_id
    body.update(extra)
    response = Response(body, status=status, headers=headers, content_type=PROBLEM_JSON)
    return response


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list | tuple) and detail:
        return str(detail[0])
    return str(detail)


#: The code of each kind of error the handler answers by kind (Problem and the activity errors
#: that carry their own code aside).
_CODES: tuple[tuple[type | Any, str], ...] = (
    (exceptions.ValidationError | exceptions.ParseError, "invalid_request"),
    (exceptions.NotAuthenticated | exceptions.AuthenticationFailed, "unauthenticated"),
    (exceptions.PermissionDenied | DjangoPermissionDenied, "forbidden"),
    (exceptions.NotFound | Http404, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "rate_limited"),
    (StoreUnavailable | redis.RedisError, "store_unavailable"),
    (InvalidRequest, "invalid_request"),
)


def problem_code(exc: BaseException) -> str:
    """The ``code`` the API answers ``exc`` with (:func:`exception_handler`; usage events)."""
    if isinstance(exc, Problem | IdempotencyConflict | InsufficientInventory | ScanBudgetExhausted):
        return exc.code
    for kinds, code in _CODES:
        if isinstance(exc, kinds):
            return code
    if isinstance(exc, exceptions.APIException):  # e.g. ConfigUnavailable (503)
        return exc.default_code if isinstance(exc.default_code, str) else "error"
    return "internal_error"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    request = context.get("request")
    set_rollback()
    retry = {"Retry-After": str(RETRY_AFTER_S)}
    code = problem_code(exc)
    if isinstance(exc, Problem):
        return problem_response(
            request, exc.status_code, code, str(exc.detail), exc.headers, **exc.extra
        )
    if isinstance(exc, exceptions.ValidationError | exceptions.ParseError):
        errors = exc.detail if isinstance(exc.detail, dict) else None
        detail = "The request body is not valid." if errors else _detail_text(exc.detail)
        extra = {"errors": errors} if errors else {}
        return problem_response(request, 400, code, detail, **extra)
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        headers = {"WWW-Authenticate": 'Bearer realm="api"'}
        detail = str(exc.detail)
        if isinstance(exc, exceptions.NotAuthenticated):
            detail = "Send an API key: 'Authorization: Bearer <api key>'."
        return problem_response(request, 401, code, detail, headers)
    if isinstance(exc, exceptions.PermissionDenied | DjangoPermissionDenied):
        return problem_response(request, 403, code, "You may not do this.")
    if isinstance(exc, exceptions.NotFound | Http404):
        return problem_response(request, 404, code, "Not found.")
    if isinstance(exc, exceptions.MethodNotAllowed):
        return problem_response(request, 405, code, str(exc.detail))
    if isinstance(exc, exceptions.NotAcceptable):
        return problem_response(request, 406, code, str(exc.detail))
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return problem_response(request, 415, code, str(exc.detail))
    if isinstance(exc, exceptions.Throttled):
        wait = max(1, int(exc.wait or 1))
        return problem_response(
            request, 429, code, "Too many requests.", {"Retry-After": str(wait)}
        )
    if isinstance(exc, IdempotencyConflict):
        return problem_response(
            request, 409, code, "This Idempotency-Key was used with a different request."
        )
    if isinstance(exc, InsufficientInventory):
        return problem_response(
            request,
            409,
            code,
            "Fewer matching proxies than requested; nothing was extracted.",
            requested=exc.requested,
            available=exc.available,
        )
    if isinstance(exc, StoreUnavailable | redis.RedisError):
        logger.warning("activity pool unavailable: %s", type(exc).__name__)
        return problem_response(request, 503, code, "The proxy store is unavailable.", retry)
    if isinstance(exc, ScanBudgetExhausted):
        return problem_response(
            request, 503, code, "The pool could not answer in its scan budget.", retry
        )
    if isinstance(exc, InvalidRequest):
        return problem_response(request, 400, code, str(exc))
    if isinstance(exc, exceptions.APIException):  # e.g. ConfigUnavailable (503)
        headers = retry if exc.status_code == 503 else None
        return problem_response(request, exc.status_code, code, str(exc.detail), headers)
    if isinstance(exc, ActivityError):
        logger.error("unexpected activity error: %r", exc)
    else:
        logger.error("unhandled error in the API: %s", type(exc).__name__, exc_info=exc)
    return problem_response(request, 500, code, "Internal error.")
