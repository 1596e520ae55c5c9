"""``Authorization: Bearer <worker token>``: how a gateway worker authenticates to the control API.

A worker token (``pw_<prefix>_<secret>``, pool_admin/config/models/workers.py) is checked as an
API key is (auth.py): a verified token's worker, with its group's capacity and upstreams, is
cached for ``auth.CACHE_TTL`` in a cache of its own (``bootstrap.worker_token_cache``), keyed by
the token's SHA-256. So a worker keeps its session while PostgreSQL is down, and a revoked token,
a disabled worker or a changed group takes effect within ``CACHE_TTL``. An API key is never a
worker token and a worker token never an API key: their schemes differ, and each kind is looked
up only in its own table and cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from pool_admin import bootstrap
from pool_admin.api.auth import CHALLENGE, BearerAuthentication, authenticate_secret
from pool_admin.api.problems import Problem
from pool_admin.config.models import WorkerToken

KIND = WorkerToken.KIND


@dataclass(frozen=True)
class WorkerPrincipal:
    """The worker a request comes from: a snapshot of it and its group (no database access)."""

    #: The worker's name, as operators see it.
    worker: str
    #: Its ID in the pool (sessions, assignments, reports): the name, which the admin keeps
    #: fixed and the label rule keeps a valid pool token.
    worker_id: str
    token_prefix: str
    group: str
    #: Concurrent connections to keep assigned to the whole group; 0 drains it.
    target_capacity: int
    #: Upstream names the group may be given proxies of; empty: all.
    allowed_upstreams: frozenset[str]

    @property
    def is_authenticated(self) -> bool:  # DRF's IsAuthenticated asks this of request.user
        return True


def _verify_token(plaintext: str) -> tuple[WorkerToken, WorkerPrincipal] | None:
    token = WorkerToken.objects.verify(plaintext)
    if token is None:
        return None
    worker, group = token.worker, token.worker.group
    principal = WorkerPrincipal(
        worker=worker.name,
        worker_id=worker.name,
        token_prefix=token.prefix,
        group=group.name,
        target_capacity=group.target_capacity,
        allowed_upstreams=frozenset(group.allowed_upstreams.values_list("name", flat=True)),
    )
    return token, principal


def authenticate_token(plaintext: str) -> WorkerPrincipal | None:
    """The principal of a usable worker token, from the cache or PostgreSQL; None for a bad
    token (an API key among them). ``auth.ConfigUnavailable`` when PostgreSQL cannot answer
    for a token not in the cache."""
    return authenticate_secret(plaintext, bootstrap.worker_token_cache(), _verify_token, KIND)


class WorkerTokenAuthentication(BearerAuthentication[WorkerPrincipal]):
    kind = KIND

    def check(self, plaintext: str) -> WorkerPrincipal | None:
        return authenticate_token(plaintext)


class IsWorker(BasePermission):
    """Lets through a request :class:`WorkerTokenAuthentication` authenticated; a request with
    no token is a 401 that asks for a worker token (the table's own row asks for an API key)."""

    def has_permission(self, request: Request, view: object) -> bool:
        if isinstance(request.user, WorkerPrincipal):
            return True
        raise Problem(
            401,
            "unauthenticated",
            "Send a worker token: 'Authorization: Bearer <worker token>'.",
            {"WWW-Authenticate": CHALLENGE},
        )


def worker_of(request: Request) -> WorkerPrincipal:
    """The worker of a request :class:`IsWorker` has let through."""
    user = request.user
    if not isinstance(user, WorkerPrincipal):  # only a view without IsWorker gets here
        raise exceptions.NotAuthenticated()
    return user


class WorkerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "pool_admin.api.gateway_auth.WorkerTokenAuthentication"
    name = "WorkerTokenAuth"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A gateway worker's token, issued in the admin or by "
            "`manage.py worker_token` (pw_<prefix>_<secret>).",
        }
