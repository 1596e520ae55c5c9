"""This process's liveness (/healthz, no I/O) and readiness (/readyz: PostgreSQL and Redis answer
quickly). Not a proxy's health: that is the pool's (activity.ports.HealthStore).

Responses name a failing dependency and the exception class only: never a URL or password.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from activity import redis_url

REDIS_TIMEOUT_S = 1.0
POSTGRES_TIMEOUT_S = 2  # libpq's minimum connect_timeout


def postgres_target() -> dict[str, Any]:
    """Connection parameters of the default database, as psycopg keywords."""
    db = settings.DATABASES["default"]
    params = {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "dbname": db.get("NAME"),
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
    }
    return {key: value for key, value in params.items() if value is not None}


def check_postgres() -> None:
    """Open a fresh connection and run SELECT 1; raises on any failure."""
    options = f"-c statement_timeout={POSTGRES_TIMEOUT_S * 1000}"
    with psycopg.connect(
        **postgres_target(), connect_timeout=POSTGRES_TIMEOUT_S, options=options
    ) as conn:
        conn.execute("SELECT 1")


def check_redis() -> None:
    """PING the activity-pool Redis; raises on any failure."""
    client = redis_url.connect(
        settings.REDIS_URL,
        socket_timeout=REDIS_TIMEOUT_S,
        socket_connect_timeout=REDIS_TIMEOUT_S,
    )
    try:
        client.ping()
    finally:
        client.close()


CHECKS = {"postgres": check_postgres, "redis": check_redis}


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    errors: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:  # any failure means "not ready"; report its class only
            checks[name] = "unavailable"
            errors[name] = type(exc).__name__
        else:
            checks[name] = "ok"
    if errors:
        return JsonResponse(
            {"status": "unavailable", "checks": checks, "errors": errors}, status=503
        )
    return JsonResponse({"status": "ready", "checks": checks})
