"""Pieces of the client API's OpenAPI schema that every operation shares (``extend_schema``).

Error answers and the headers declared here are the ones ``problems.exception_handler`` always
gives: every 429 and 503 carries ``Retry-After``, so schemathesis's header check can hold the
API to it. A 405 (an undeclared method) belongs to no operation, so none lists it; it is
problem+json with ``Allow`` all the same (tests/pool_admin/api/test_schema.py). So is a 404 of a
path the API does not have, and a 400 of a Host outside ALLOWED_HOSTS (error_views.py).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from pool_admin.api.problems import PROBLEM_JSON, ProblemSerializer

#: ``Retry-After`` on every 429 and 503 answer: whole seconds, at least 1 (problems.py).
#: ``response`` must be a list: drf-spectacular puts a header given any other sequence on
#: every response.
RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    {"type": "integer", "minimum": 1},
    OpenApiParameter.HEADER,
    required=True,
    response=[429, 503],
    description="Seconds to wait before retrying.",
)
#: ``X-Request-ID`` on every 200 of an operation that names its call (extract, outcome): the
#: ``request_id`` of its usage event. Error answers carry it in the body's ``request_id``.
REQUEST_ID = OpenApiParameter(
    "X-Request-ID",
    {"type": "string", "pattern": "^[0-9a-f]{32}$"},
    OpenApiParameter.HEADER,
    required=True,
    response=[200],
    description="This call's ID, as in its usage event.",
)
#: ``Cache-Control: no-store`` on every extract answer: a 200 holds proxy passwords.
NO_STORE = OpenApiParameter(
    "Cache-Control",
    {"type": "string", "enum": ["no-store"]},
    OpenApiParameter.HEADER,
    required=True,
    response=[200],
    description="The answer holds proxy passwords: no cache may keep it.",
)

#: Answers DRF gives before or around any view code, as problem+json like every other error.
NOT_ACCEPTABLE = (
    "`Accept` admits no `application/json` answer (`not_acceptable`); checked before the API key."
)
UNSUPPORTED_MEDIA_TYPE = "The body is not `application/json` (`unsupported_media_type`)."
BODY_TIMED_OUT = (
    "The body did not arrive within WEB_BODY_TIMEOUT_S (5 s) of the headers "
    "(`request_timeout`); answered by the web server, the connection closed after it."
)
LENGTH_REQUIRED = (
    "A transfer coding other than `chunked` alone (`length_required`): send a Content-Length."
)
PAYLOAD_TOO_LARGE = (
    "The body is larger than the API reads (2.5 MiB, settings.DATA_UPLOAD_MAX_MEMORY_SIZE; "
    "`payload_too_large`). The call takes its request unit all the same."
)
UNAUTHENTICATED = "Missing, invalid or revoked API key (`unauthenticated`)."


def problem(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ProblemSerializer, description=description)


def problems(**by_status: str) -> dict[Any, Any]:
    """``extend_schema`` responses: ``r409="..."`` is a problem+json 409 with that text."""
    return {(int(s[1:]), PROBLEM_JSON): problem(text) for s, text in by_status.items()}
