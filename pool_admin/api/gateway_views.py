"""The gateway workers' control API, under ``/api/v1/gateway/`` (docs/gateway.md, "The control
API"): open or renew a session, fetch the current snapshot (conditional), acknowledge it, and
report runtime counts.

A worker authenticates with its token (gateway_auth.py). Every call after the session's names it
in the ``Gateway-Session`` header, outside the wire documents, so the snapshot, the ACK and the
report are the wire's own bytes (gateway_runtime/wire/), encoded and decoded by the same code
on both sides. Each refusal is a problem+json with a code the worker acts on (problems.py).
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response

from activity import PoolOptions
from activity.types import RuntimeEntry, RuntimeReport
from gateway_runtime.wire import decode_ack, decode_report
from pool_admin import bootstrap
from pool_admin.api.base import ApiView
from pool_admin.api.gateway_auth import IsWorker, WorkerTokenAuthentication, worker_of
from pool_admin.api.openapi import (
    BODY_TIMED_OUT,
    LENGTH_REQUIRED,
    NO_STORE,
    NOT_ACCEPTABLE,
    PAYLOAD_TOO_LARGE,
    RETRY_AFTER,
    UNSUPPORTED_MEDIA_TYPE,
    problems,
)
from pool_admin.api.problems import Problem
from pool_admin.metrics.gateway_events import record_traffic

SESSION_HEADER = "Gateway-Session"
_SESSION_META = "HTTP_GATEWAY_SESSION"
#: A session ID: a token of the pool's key names.
SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,63}"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
#: A report's entries the pool takes (``PoolOptions.max_report_entries``; the wire allows more).
MAX_REPORT_ENTRIES = PoolOptions().max_report_entries
WIRE_JSON = "application/json"

_PROBLEMS = problems(
    r400="A malformed document or a missing `Gateway-Session` (`invalid_request`; the detail "
    "names the field, never its value).",
    r401="Missing, invalid or revoked worker token (`unauthenticated`).",
    r406=NOT_ACCEPTABLE,
    r409="`session_fenced`, `session_expired` (open a new session); `unknown_snapshot`, "
    "`stale_epoch`, `checksum_mismatch`, `snapshot_conflict` (fetch again); `stale_snapshot`, "
    "`sequence_regression`, `sequence_conflict`, `sequence_gap`, `ownership_mismatch` "
    "(reports). docs/gateway.md says what the worker does for each.",
    r503="`store_unavailable` (Redis, or PostgreSQL for a token not seen recently) or "
    "`snapshot_too_large`; see Retry-After.",
)
#: What a call with a body may also meet.
_BODY_PROBLEMS = problems(
    r408=BODY_TIMED_OUT,
    r411=LENGTH_REQUIRED,
    r413=PAYLOAD_TOO_LARGE,
    r415=UNSUPPORTED_MEDIA_TYPE,
)
_SESSION_PARAMETER = OpenApiParameter(
    SESSION_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    description="The session ID POST /api/v1/gateway/sessions answered.",
)


class _SessionIdField(serializers.RegexField):
    """A session ID as the worker sends it: a JSON string (a number is not one, as the wire's
    documents read it), of the pattern."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value: str = super().to_internal_value(data)
        return value


class SessionRequest(serializers.Serializer):  # type: ignore[type-arg]
    session_id = _SessionIdField(
        # Anchored: the validator searches, and "sé" would pass on its "s" (a session the
        # worker could then never name in its Gateway-Session header).
        rf"\A{SESSION_ID_PATTERN}\Z",
        required=False,
        help_text="The live session's ID renews it (a heartbeat); another ID, or none (a new "
        "one is made), replaces it and fences the old one.",
    )


class SessionAnswer(serializers.Serializer):  # type: ignore[type-arg]
    session_id = serializers.CharField()
    generation = serializers.IntegerField(help_text="Increases with every new session.")
    expires_at = serializers.DateTimeField()
    heartbeat_interval_s = serializers.IntegerField()
    snapshot_interval_s = serializers.IntegerField()
    report_interval_s = serializers.IntegerField()
    max_staleness_s = serializers.IntegerField()


class _GatewayView(ApiView):
    authentication_classes = [WorkerTokenAuthentication]
    permission_classes = [IsWorker]


def _session_of(request: Request) -> str:
    value = request.META.get(_SESSION_META, "")
    if not isinstance(value, str) or not _SESSION_ID.fullmatch(value):
        raise Problem(
            400,
            "invalid_request",
            f"Name the session: '{SESSION_HEADER}: <session_id>' (POST /api/v1/gateway/sessions "
            "opens one).",
        )
    return value


def _wire_body(request: Request) -> bytes:
    """The request's body as the wire document it must be (JSON)."""
    content_type = request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
    if content_type != WIRE_JSON:
        raise UnsupportedMediaType(content_type or "none")
    body: bytes = request.body
    return body


class SessionsView(_GatewayView):
    @extend_schema(
        operation_id="gateway_open_session",
        tags=["gateway"],
        request=SessionRequest,
        parameters=[RETRY_AFTER],
        responses={200: SessionAnswer, **_PROBLEMS, **_BODY_PROBLEMS},
        summary="Open, renew or replace the worker's session",
    )
    def post(self, request: Request) -> Response:
        worker = worker_of(request)
        given = SessionRequest(data=request.data)
        given.is_valid(raise_exception=True)
        session_id = given.validated_data.get("session_id") or uuid.uuid4().hex
        ttl = timedelta(seconds=settings.GATEWAY_SESSION_TTL_S)
        session = bootstrap.get_pool().open_session(worker.worker_id, session_id, ttl)
        answer = {
            "session_id": session.session_id,
            "generation": session.generation,
            "expires_at": session.expires_at,
            "heartbeat_interval_s": settings.GATEWAY_HEARTBEAT_S,
            "snapshot_interval_s": settings.GATEWAY_SNAPSHOT_INTERVAL_S,
            "report_interval_s": settings.GATEWAY_REPORT_INTERVAL_S,
            "max_staleness_s": settings.GATEWAY_MAX_STALENESS_S,
        }
        return Response(SessionAnswer(answer).data)


class SnapshotView(_GatewayView):
    @extend_schema(
        operation_id="gateway_snapshot",
        tags=["gateway"],
        parameters=[_SESSION_PARAMETER, RETRY_AFTER, NO_STORE],
        responses={
            (200, WIRE_JSON): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The snapshot, in the wire's canonical JSON (docs/gateway.md); "
                "its ETag for If-None-Match.",
            ),
            304: OpenApiResponse(description="Unchanged since the ETag given."),
            **_PROBLEMS,
        },
        summary="The worker's current snapshot",
    )
    def get(self, request: Request) -> HttpResponse:
        worker = worker_of(request)
        session_id = _session_of(request)
        clients = bootstrap.gateway_clients().current()
        published = bootstrap.snapshot_publisher().current(
            worker.worker_id, session_id, clients, request.META.get("HTTP_IF_NONE_MATCH")
        )
        if published.sealed is None:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(published.sealed.data, content_type=WIRE_JSON)
        response["ETag"] = published.etag
        # A snapshot holds proxy passwords: no cache between the worker and this server.
        response["Cache-Control"] = "no-store"
        return response


class SnapshotAckView(_GatewayView):
    @extend_schema(
        operation_id="gateway_acknowledge_snapshot",
        tags=["gateway"],
        parameters=[_SESSION_PARAMETER, RETRY_AFTER],
        request={WIRE_JSON: OpenApiTypes.OBJECT},
        responses={200: OpenApiTypes.OBJECT, **_PROBLEMS, **_BODY_PROBLEMS},
        summary="Acknowledge the snapshot the worker verified and serves from",
    )
    def post(self, request: Request) -> Response:
        worker = worker_of(request)
        session_id = _session_of(request)
        ack = decode_ack(_wire_body(request))
        session = bootstrap.snapshot_publisher().acknowledge(worker.worker_id, session_id, ack)
        acked = session.acked
        return Response({"acked_version": acked.version if acked else ack.version})


class ReportsView(_GatewayView):
    @extend_schema(
        operation_id="gateway_report",
        tags=["gateway"],
        parameters=[_SESSION_PARAMETER, RETRY_AFTER],
        request={WIRE_JSON: OpenApiTypes.OBJECT},
        responses={200: OpenApiTypes.OBJECT, **_PROBLEMS, **_BODY_PROBLEMS},
        summary="Report the worker's runtime counts (full, sparse, strictly sequenced)",
    )
    def post(self, request: Request) -> Response:
        worker = worker_of(request)
        session_id = _session_of(request)
        body = decode_report(_wire_body(request))
        if len(body.entries) > MAX_REPORT_ENTRIES:
            raise Problem(
                413, "payload_too_large", f"A report holds at most {MAX_REPORT_ENTRIES} entries."
            )
        # No entry is marked draining: the pool's drain tickets say which are, and a flag read
        # from them here would differ on a replay sent after the first copy released the
        # proxy, turning an honest replay into a sequence_conflict.
        report = RuntimeReport(
            worker_id=worker.worker_id,
            session_id=session_id,
            sequence=body.report_sequence,
            snapshot_version=body.snapshot_version,
            epoch=body.epoch,
            entries=tuple(
                RuntimeEntry(e.proxy_id, e.epoch, e.active, e.reserved) for e in body.entries
            ),
        )
        result = bootstrap.get_pool().write_report(report)
        if not result.replayed:  # a replay's traffic was counted with its first copy
            record_traffic(worker.group, body.traffic, body.refused_snapshots)
        return Response({"replayed": result.replayed, "released": list(result.released)})
