"""RFC 9457 problem details: every error answer of the client API, from one table.

:func:`problem_for` is the one place an exception becomes an answer (status, stable ``code``,
detail, headers, extension members): the exceptions this API raises (:class:`Problem` and its
kinds), the activity pool's typed errors, and the DRF and Django errors a request can meet. It
builds plain data, so each renderer turns it into bytes its own way without deciding anything:
DRF's exception handler (:func:`exception_handler`, every DRF view), the fast extract
application (``fast_extract.py``) and Django's error views for paths under ``/api/``
(``error_views.py``). The usage events' outcome is the same table's code (:func:`problem_code`).

Details never carry an API key, a proxy password or a Redis/PostgreSQL URL: they come from
fixed texts or from activity errors, whose messages are secret-free by contract
(activity/errors.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from django.core.exceptions import (
    BadRequest,
    DisallowedHost,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, UnreadablePostError
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import set_rollback

from activity.errors import (
    ActivityError,
    IdempotencyConflict,
    InsufficientInventory,
    InvalidRequest,
    OutcomeRejected,
    ReportRejected,
    ScanBudgetExhausted,
    SessionExpired,
    SessionFenced,
    SnapshotRejected,
    StoreUnavailable,
)
from activity.snapshot_publisher import AckMismatch, SnapshotTooLarge
from gateway_runtime.wire import WireBoundError, WireError

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
    "request_timeout": "Request body too slow",
    "length_required": "Length required",
    "payload_too_large": "Request body too large",
    "unsupported_media_type": "Unsupported media type",
    "idempotency_conflict": "Idempotency key reused with a different request",
    "outcome_conflict": "Outcome already reported",
    "insufficient_inventory": "Not enough matching proxies",
    "rate_limited": "Too many requests",
    "store_unavailable": "Store unavailable",
    "scan_budget_exhausted": "Temporarily unable to answer",
    "internal_error": "Internal error",
    "session_fenced": "Session replaced",
    "session_expired": "Session expired",
    "unknown_snapshot": "Not the snapshot last issued",
    "snapshot_conflict": "Snapshot issued concurrently",
    "stale_epoch": "Snapshot epoch mismatch",
    "checksum_mismatch": "Snapshot checksum mismatch",
    "stale_snapshot": "Report names another snapshot",
    "sequence_regression": "Report sequence went back",
    "sequence_conflict": "Report sequence reused with another body",
    "sequence_gap": "Report sequence skipped",
    "ownership_mismatch": "Report counts a proxy the worker does not hold",
    "snapshot_too_large": "Snapshot over its bound",
}
_RETRY = {"Retry-After": str(RETRY_AFTER_S)}
_BEARER = {"WWW-Authenticate": 'Bearer realm="api"'}


@dataclass(frozen=True, slots=True)
class ProblemAnswer:
    """What an error answer says, before any renderer turns it into bytes."""

    status: int
    code: str
    detail: str
    #: Never changed once made (rows share them).
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Extension members of the body (``errors``, ``requested``, ``available``).
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self, instance: str | None = None, request_id: str | None = None) -> dict[str, Any]:
        """The problem+json body; ``instance`` is the request path."""
        body: dict[str, Any] = {
            "type": f"urn:proxy-pool:problem:{self.code}",
            "title": _TITLES.get(self.code, self.code.replace("_", " ").capitalize()),
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        if instance is not None:
            body["instance"] = instance
        if request_id:
            body["request_id"] = request_id
        body.update(self.extra)
        return body


class Problem(Exception):
    """An error this API raises with its answer decided where it is raised."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.answer = ProblemAnswer(status, code, detail, dict(headers or {}), extra)

    @property
    def status_code(self) -> int:
        return self.answer.status

    @property
    def code(self) -> str:
        return self.answer.code

    @property
    def detail(self) -> str:
        return self.answer.detail

    @property
    def headers(self) -> Mapping[str, str]:
        return self.answer.headers


class Forbidden(Problem):
    def __init__(self, detail: str) -> None:
        super().__init__(403, "forbidden", detail)


class RateLimited(Problem):
    """429 ``rate_limited``: a client limit is used up (ratelimit.py names the limit)."""

    def __init__(self, reason: str, limit: int, retry_after_s: int, count: int, left: int) -> None:
        if reason == "calls":
            detail = f"More than {limit} requests per second; retry in {retry_after_s} s."
        else:
            detail = (
                f"{count} more proxies would exceed {limit} per minute "
                f"(about {left} left); retry in {retry_after_s} s."
            )
        super().__init__(429, "rate_limited", detail, {"Retry-After": str(retry_after_s)})


class LengthRequired(Problem):
    """411: a body framed in a way the web tier does not read (request_bodies.py)."""

    def __init__(self) -> None:
        super().__init__(
            411,
            "length_required",
            "Send the body with a Content-Length, or with Transfer-Encoding: chunked alone.",
        )


class BodyTimedOut(Problem):
    """408: the body did not arrive within the web tier's deadline (pool_admin/rsgi_bridge.py)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            408,
            "request_timeout",
            f"The request body did not arrive within {seconds:g} seconds of its headers.",
        )


def _invalid(exc: exceptions.ValidationError | exceptions.ParseError) -> ProblemAnswer:
    errors = exc.detail if isinstance(exc.detail, dict) else None
    if errors:
        return ProblemAnswer(
            400, "invalid_request", "The request body is not valid.", extra={"errors": errors}
        )
    detail = exc.detail
    text = str(detail[0]) if isinstance(detail, list | tuple) and detail else str(detail)
    return ProblemAnswer(400, "invalid_request", text)


def _throttled(exc: exceptions.Throttled) -> ProblemAnswer:
    wait = max(1, int(getattr(exc, "wait", None) or 1))  # DRF sets it; its stubs omit it
    return ProblemAnswer(429, "rate_limited", "Too many requests.", {"Retry-After": str(wait)})


def _outcome_rejected(exc: OutcomeRejected) -> ProblemAnswer:
    if exc.reason == "conflict":
        detail = "This proxy already has a different outcome; an outcome cannot be changed."
        return ProblemAnswer(409, "outcome_conflict", detail)
    detail = "This client has no extracted proxy with this ID (any more)."
    return ProblemAnswer(404, "not_found", detail)


#: The gateway worker's refusals (docs/gateway.md, "The control API"): each code says what the
#: worker does next.
_REOPEN = "Open a new session (POST /api/v1/gateway/sessions) and fetch its snapshot."
_SNAPSHOT_CODES = {
    "not_issued": (
        "unknown_snapshot",
        "This is not the snapshot last issued to the session; "
        "fetch the current one and acknowledge that.",
    ),
    "version_order": (
        "snapshot_conflict",
        "Another request of this session issued a snapshot at the same time; fetch again.",
    ),
}
_REPORT_CODES = {
    "snapshot_mismatch": (
        "stale_snapshot",
        "The report must name the snapshot version and epoch the session acknowledged last.",
    ),
    "sequence_regression": (
        "sequence_regression",
        "The report_sequence is lower than the last "
        "accepted one; continue from the last accepted sequence + 1.",
    ),
    "sequence_conflict": (
        "sequence_conflict",
        "The report_sequence was accepted before with another body; send the next sequence.",
    ),
    "sequence_gap": (
        "sequence_gap",
        "The report_sequence must be exactly the last accepted one + 1.",
    ),
    "ownership_mismatch": (
        "ownership_mismatch",
        "The report counts connections on proxies this worker does not hold at the epoch given.",
    ),
}
#: Proxy IDs an ``ownership_mismatch`` answer names at most.
MAX_NAMED_PROXIES = 100


def _session_fenced(exc: SessionFenced) -> ProblemAnswer:
    if isinstance(exc, SessionExpired):
        return ProblemAnswer(409, "session_expired", f"The session expired. {_REOPEN}")
    return ProblemAnswer(
        409, "session_fenced", f"The session was replaced or never opened. {_REOPEN}"
    )


def _snapshot_rejected(exc: SnapshotRejected) -> ProblemAnswer:
    code, detail = _SNAPSHOT_CODES.get(exc.reason or "", ("snapshot_conflict", str(exc)))
    return ProblemAnswer(409, code, detail)


def _report_rejected(exc: ReportRejected) -> ProblemAnswer:
    code, detail = _REPORT_CODES.get(exc.reason or "", ("invalid_request", str(exc)))
    extra: dict[str, Any] = {}
    if exc.proxy_ids:
        extra["proxy_ids"] = list(exc.proxy_ids[:MAX_NAMED_PROXIES])
    return ProblemAnswer(409, code, detail, extra=extra)


def _api_exception(exc: exceptions.APIException) -> ProblemAnswer:
    """A DRF error without a row of its own (e.g. auth.ConfigUnavailable, 503)."""
    code = exc.default_code if isinstance(exc.default_code, str) else "error"
    headers = dict(_RETRY) if exc.status_code == 503 else {}
    return ProblemAnswer(exc.status_code, code, str(exc.detail), headers)


def _internal(exc: BaseException) -> ProblemAnswer:
    return ProblemAnswer(500, "internal_error", "Internal error.")


#: Exception kinds in the order they are matched (a subclass before its base), each with its
#: answer. Anything else is a 500 ``internal_error``. Laid out by hand (``fmt: skip``) as the
#: table it is: one row per kind, its status and code where the eye finds them.
_TABLE: tuple[tuple[Any, Callable[[Any], ProblemAnswer]], ...] = (
    (Problem, lambda e: e.answer),
    (exceptions.ValidationError | exceptions.ParseError, _invalid),
    (exceptions.NotAuthenticated, lambda e: ProblemAnswer(
        401, "unauthenticated", "Send an API key: 'Authorization: Bearer <api key>'.", _BEARER)),
    (exceptions.AuthenticationFailed, lambda e: ProblemAnswer(
        401, "unauthenticated", str(e.detail), _BEARER)),
    (exceptions.PermissionDenied | DjangoPermissionDenied, lambda e: ProblemAnswer(
        403, "forbidden", "You may not do this.")),
    (exceptions.NotFound | Http404, lambda e: ProblemAnswer(404, "not_found", "Not found.")),
    (exceptions.MethodNotAllowed, lambda e: ProblemAnswer(
        405, "method_not_allowed", str(e.detail))),
    (exceptions.NotAcceptable, lambda e: ProblemAnswer(406, "not_acceptable", str(e.detail))),
    (exceptions.UnsupportedMediaType, lambda e: ProblemAnswer(
        415, "unsupported_media_type", str(e.detail))),
    (exceptions.Throttled, _throttled),
    (IdempotencyConflict, lambda e: ProblemAnswer(
        409, "idempotency_conflict", "This Idempotency-Key was used with a different request.")),
    (InsufficientInventory, lambda e: ProblemAnswer(
        409, "insufficient_inventory",
        "Fewer matching proxies than requested; nothing was extracted.",
        extra={"requested": e.requested, "available": e.available})),
    (OutcomeRejected, _outcome_rejected),
    (SessionFenced, _session_fenced),
    (SnapshotRejected, _snapshot_rejected),
    (AckMismatch, lambda e: ProblemAnswer(409, e.code, str(e))),
    (ReportRejected, _report_rejected),
    (SnapshotTooLarge, lambda e: ProblemAnswer(503, "snapshot_too_large", str(e), _RETRY)),
    (WireBoundError, lambda e: ProblemAnswer(413, "payload_too_large", str(e))),
    (WireError, lambda e: ProblemAnswer(400, "invalid_request", str(e))),
    (StoreUnavailable | redis.RedisError, lambda e: ProblemAnswer(
        503, "store_unavailable", "The proxy store is unavailable.", _RETRY)),
    (ScanBudgetExhausted, lambda e: ProblemAnswer(
        503, "scan_budget_exhausted", "The pool could not answer in its scan budget.", _RETRY)),
    (InvalidRequest, lambda e: ProblemAnswer(400, "invalid_request", str(e))),
    (RequestDataTooBig, lambda e: ProblemAnswer(
        413, "payload_too_large", "The request body is larger than this API reads.")),
    (UnreadablePostError, lambda e: ProblemAnswer(
        400, "invalid_request", "The request body could not be read in full.")),
    (DisallowedHost, lambda e: ProblemAnswer(
        400, "invalid_request", "The Host header names no host this server answers for.")),
    (SuspiciousOperation | BadRequest, lambda e: ProblemAnswer(
        400, "invalid_request", "Bad request.")),
    (exceptions.APIException, _api_exception),
)  # fmt: skip


def problem_for(exc: BaseException) -> ProblemAnswer:
    """The answer to ``exc``: its row of the table, else a 500 ``internal_error``."""
    for kinds, answer in _TABLE:
        if isinstance(exc, kinds):
            return answer(exc)
    return _internal(exc)


def problem_code(exc: BaseException) -> str:
    """The ``code`` the API answers ``exc`` with (usage events' outcome)."""
    return problem_for(exc).code


def answer_exception(exc: BaseException) -> ProblemAnswer:
    """:func:`problem_for`, logged as an operator needs it: an unavailable store as a warning,
    an error the table does not know as an error with its traceback (never its message, which
    might hold a secret, for an activity error it does not know)."""
    answer = problem_for(exc)
    if answer.code == "store_unavailable" and isinstance(exc, StoreUnavailable | redis.RedisError):
        logger.warning("activity pool unavailable: %s", type(exc).__name__)
    elif answer.status == 500:
        if isinstance(exc, ActivityError):
            logger.error("unexpected activity error: %r", exc)
        else:
            logger.error("unhandled error in the API: %s", type(exc).__name__, exc_info=exc)
    return answer


_render_json = JSONRenderer().render


def render_problem(answer: ProblemAnswer, instance: str | None, request_id: str | None) -> bytes:
    """The body's bytes as DRF's JSONRenderer makes them for :func:`exception_handler`."""
    body: bytes = _render_json(answer.body(instance, request_id))
    return body


class ProblemSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Schema of a problem+json body (RFC 9457) as this API sends it."""

    type = serializers.CharField(help_text="urn:proxy-pool:problem:<code>")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable machine-readable error code.")
    instance = serializers.CharField(required=False, help_text="The request path.")
    request_id = serializers.CharField(required=False)
    # Shadows Serializer.errors, harmless on a serializer that only describes the schema.
    errors = serializers.DictField(  # type: ignore[assignment]
        required=False, help_text="Field errors (invalid_request)."
    )
    requested = serializers.IntegerField(required=False)
    available = serializers.IntegerField(required=False)
    proxy_ids = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text=f"ownership_mismatch: the proxies at fault (at most {MAX_NAMED_PROXIES}).",
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's exception handler (settings.REST_FRAMEWORK): every DRF view's error answer."""
    request = context.get("request")
    set_rollback()
    answer = answer_exception(exc)
    instance = request_id = None
    if request is not None:
        instance = request.path
        request_id = getattr(request, "request_id", None)
    return Response(
        answer.body(instance, request_id),
        status=answer.status,
        headers=answer.headers,
        content_type=PROBLEM_JSON,
    )
