"""``POST /api/v1/proxies/{proxy_id}/outcome``: the extracting client reports how a proxy went.

Order: the client's requests-per-second limit (429, one unit like an extract), the body (400),
then ``RedisPool.report_outcome`` (404 ``not_found`` for a proxy this client did not extract or
that has expired, 409 ``outcome_conflict`` for a second, different outcome). A ``banned``
report quarantines the proxy's exit for ``POOL_BAN_QUARANTINE_S`` in Redis. An accepted,
not replayed report then puts one ``outcome`` event on the usage stream (pool_admin/metrics/),
from which the consumer adds it to the upstream's quality aggregates in PostgreSQL: the answer
never waits on PostgreSQL, and PostgreSQL down loses nothing. Every call that reached the pool
also writes one line of the call log (pool_admin/api/call_log.py).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from activity import Outcome, OutcomeReport, OutcomeResult
from activity.errors import ActivityError, OutcomeRejected
from activity.hosts import MAX_HOST_LENGTH, normalize_host
from pool_admin.api.auth import principal_of
from pool_admin.api.base import ApiView
from pool_admin.api.call_log import log_call
from pool_admin.api.openapi import (
    BODY_TIMED_OUT,
    LENGTH_REQUIRED,
    NOT_ACCEPTABLE,
    PAYLOAD_TOO_LARGE,
    REQUEST_ID,
    RETRY_AFTER,
    UNAUTHENTICATED,
    UNSUPPORTED_MEDIA_TYPE,
    problems,
)
from pool_admin.api.serializers import StrictSerializer, choice_field
from pool_admin.bootstrap import get_pool
from pool_admin.metrics.stream import emit_event

logger = logging.getLogger(__name__)


class OutcomeRequestSerializer(StrictSerializer):
    outcome = choice_field([o.value for o in Outcome])
    target_host = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=MAX_HOST_LENGTH,
        trim_whitespace=False,
        help_text="The host the client was reaching: a DNS name or an IP address, without "
        "scheme, port or path (stored lowercased). A ban without one quarantines the exit for "
        "every host.",
    )

    def validate_target_host(self, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return normalize_host(value)
        except ValueError as exc:
            raise serializers.ValidationError(f"Not a valid target host: it {exc}.") from None


class OutcomeResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    proxy_id = serializers.CharField()
    upstream = serializers.CharField()
    outcome = serializers.ChoiceField(choices=[o.value for o in Outcome])
    target_host = serializers.CharField(allow_null=True)
    replayed = serializers.BooleanField(
        help_text="True when this same report was already recorded: nothing changed."
    )
    quarantined_until = serializers.DateTimeField(
        allow_null=True,
        help_text="For `banned`: until when the proxy's exit is not handed out again "
        "(for `target_host`, or for every host without one).",
    )


def _body(result: OutcomeResult) -> dict[str, Any]:
    until = result.quarantined_until
    return {
        "proxy_id": result.proxy_id,
        "upstream": result.upstream_id,
        "outcome": result.outcome.value,
        "target_host": result.target_host,
        "replayed": result.replayed,
        "quarantined_until": None if until is None else until.isoformat().replace("+00:00", "Z"),
    }


class OutcomeView(ApiView):
    @extend_schema(
        operation_id="report_outcome",
        summary="Report how an extracted proxy went",
        description=(
            "Only the client that extracted the proxy may report, once, while the pool still "
            "holds it (until its expiry). `banned` keeps the proxy's exit out of the pool for "
            "a while (for `target_host`, or for every host without one). The same report again "
            "replays the first answer (`replayed: true`); a different one is a 409 "
            "`outcome_conflict`. A proxy this client did not extract, or that has expired, is "
            "a 404 `not_found`. Each call takes one unit of the client's requests-per-second "
            "limit (429 `rate_limited` with Retry-After)."
        ),
        parameters=[
            OpenApiParameter(
                "proxy_id", str, OpenApiParameter.PATH, description="The extracted proxy's `id`."
            ),
            REQUEST_ID,
            RETRY_AFTER,
        ],
        request=OutcomeRequestSerializer,
        responses={
            200: OutcomeResponseSerializer,
            **problems(
                r400="Malformed body, unknown field, bad outcome, target host or proxy ID "
                "(`invalid_request`).",
                r401=UNAUTHENTICATED,
                r404="This client has no extracted proxy with this ID, or it expired "
                "(`not_found`).",
                r406=NOT_ACCEPTABLE,
                r409="The proxy already has another outcome (`outcome_conflict`).",
                r408=BODY_TIMED_OUT,
                r411=LENGTH_REQUIRED,
                r413=PAYLOAD_TOO_LARGE,
                r415=UNSUPPORTED_MEDIA_TYPE,
                r429="The client's requests-per-second limit (`rate_limited`); see Retry-After.",
                r503="`store_unavailable`; see Retry-After.",
            ),
        },
    )
    def post(self, request: Request, proxy_id: str) -> Response:
        principal = principal_of(request)  # its request unit is taken (base.py)
        request_id: str = request.request_id  # type: ignore[attr-defined]
        body = OutcomeRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        now = datetime.now(UTC)
        report = OutcomeReport(
            client_id=principal.client_id,
            proxy_id=proxy_id,
            outcome=Outcome(data["outcome"]),
            reported_at=now,
            target_host=data.get("target_host"),
        )  # the quarantine: the pool's default_quarantine (POOL_BAN_QUARANTINE_S)
        started = time.monotonic()
        event: dict[str, Any] = {
            "event": "outcome",
            "source": "api",
            "request_id": request_id,
            "client": principal.client_id,
            "key_prefix": principal.key_prefix,
            "proxy_id": proxy_id,
            "reported": report.outcome.value,
            "target_host": report.target_host,
            "result": "error",
        }
        try:
            result = get_pool().report_outcome(report)
        except OutcomeRejected as exc:  # 404 or 409 (problems.py)
            event["result"] = exc.reason
            raise
        except ActivityError as exc:
            event["result"] = exc.code
            raise
        else:
            event.update(result="ok", upstream=result.upstream_id, replayed=result.replayed)
        finally:
            event["duration_ms"] = round((time.monotonic() - started) * 1000, 2)
            log_call(event)
        if not result.replayed:  # a replay was counted the first time
            emit_event("outcome", upstream=result.upstream_id, outcome=result.outcome.value)
        return Response(_body(result), headers={"X-Request-ID": request_id})
