"""``Authorization: Bearer <api key>`` authentication with a short-lived in-process cache.

A verified key's client (with its limits and allowed upstream names) is cached for
``CACHE_TTL`` in a bounded cache keyed by the SHA-256 of the key, never the key itself. So an
extract keeps working for a recently seen key while PostgreSQL is down, and a revoked key, a
disabled client or a changed limit takes effect within ``CACHE_TTL``. Failed verifications are
not cached (a key issued a second ago works at once). The cache and the check serve the
gateway workers' tokens too (gateway_auth.py), each kind in a cache of its own.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar, Generic, TypeVar

from cachetools import TTLCache
from django.db import DatabaseError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from pool_admin import bootstrap
from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.config.models.bearer import BearerSecret

logger = logging.getLogger(__name__)

CACHE_TTL = timedelta(seconds=30)
#: The one realm of the whole API, as problems.py's 401 rows send it (not imported from there:
#: DRF imports this module while rest_framework.views, which problems.py needs, is loading).
CHALLENGE = 'Bearer realm="api"'
CACHE_SIZE = 10_000


@dataclass(frozen=True)
class Principal:
    """What a request may do: a snapshot of the client and its limits (no database access)."""

    client_id: str
    key_prefix: str
    requests_per_second: int
    proxies_per_minute: int
    max_count_per_request: int
    #: Empty: no restriction.
    allowed_upstreams: frozenset[str]
    allowed_regions: frozenset[str]
    allowed_protocols: frozenset[str]
    gateway_reserve: int
    idempotency_ttl: timedelta
    #: May call GET /api/v1/inventory.
    may_view_inventory: bool = False

    @property
    def is_authenticated(self) -> bool:  # DRF's IsAuthenticated asks this of request.user
        return True


def _monotonic() -> float:
    """The key cache's clock, in seconds. Looked up at every cache access, so tests move it
    (monkeypatch ``auth._monotonic``) instead of waiting ``CACHE_TTL``."""
    return time.monotonic()


P = TypeVar("P")


class KeyCache(Generic[P]):
    """Verified secrets' principals for ``CACHE_TTL``, at most ``CACHE_SIZE``, by the secret's
    fingerprint (its SHA-256, never the secret). One per kind (API keys, worker tokens) and
    process, shared by every request thread (built by pool_admin/bootstrap.py)."""

    def __init__(self) -> None:
        self._cache: TTLCache[str, P] = TTLCache(
            maxsize=CACHE_SIZE, ttl=CACHE_TTL.total_seconds(), timer=lambda: _monotonic()
        )
        self._lock = threading.Lock()

    def get(self, fingerprint: str) -> P | None:
        with self._lock:
            return self._cache.get(fingerprint)

    def put(self, fingerprint: str, principal: P) -> None:
        with self._lock:
            self._cache[fingerprint] = principal

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


def _fingerprint(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8", "surrogatepass")).hexdigest()


def _principal(key: ApiKey) -> Principal:
    return principal_for_client(key.client, key.prefix)


def principal_for_client(client: ApiClient, key_prefix: str) -> Principal:
    """A snapshot of ``client`` and its limits (reads its allowed upstreams from PostgreSQL)."""
    return Principal(
        client_id=client.name,
        key_prefix=key_prefix,
        requests_per_second=client.requests_per_second,
        proxies_per_minute=client.proxies_per_minute,
        max_count_per_request=client.max_count_per_request,
        allowed_upstreams=frozenset(client.allowed_upstreams.values_list("name", flat=True)),
        allowed_regions=frozenset(client.allowed_regions),
        allowed_protocols=frozenset(client.allowed_protocols),
        gateway_reserve=client.gateway_reserve,
        idempotency_ttl=timedelta(seconds=client.idempotency_ttl_s),
        may_view_inventory=client.may_view_inventory,
    )


def cached_principal(plaintext: str) -> Principal | None:
    """The principal of a key verified less than ``CACHE_TTL`` ago, else None (no database)."""
    return bootstrap.api_key_cache().get(_fingerprint(plaintext))


def authenticate_key(plaintext: str) -> Principal | None:
    """The principal of a usable key, from the cache or PostgreSQL; None for a bad key."""
    return authenticate_secret(plaintext, bootstrap.api_key_cache(), _verify_key, "API key")


def _verify_key(plaintext: str) -> tuple[ApiKey, Principal] | None:
    key = ApiKey.objects.verify(plaintext)
    return None if key is None else (key, _principal(key))


def authenticate_secret(
    plaintext: str,
    cache: KeyCache[P],
    verify: Callable[[str], tuple[BearerSecret, P] | None],
    kind: str,
) -> P | None:
    """The principal of a usable secret of one kind: from ``cache`` when verified less than
    ``CACHE_TTL`` ago, else ``verify``'s (PostgreSQL), then cached; None for a bad secret.
    PostgreSQL unreachable for a secret not in the cache: :class:`ConfigUnavailable`."""
    fingerprint = _fingerprint(plaintext)
    cached = cache.get(fingerprint)
    if cached is not None:
        return cached
    try:
        verified = verify(plaintext)
    except DatabaseError:
        logger.warning("%s check failed: configuration database unavailable", kind)
        raise ConfigUnavailable() from None
    if verified is None:
        return None
    secret, principal = verified
    try:
        secret.touch()  # last-used time: best effort, at most one UPDATE a minute per secret
    except DatabaseError:
        logger.warning("could not record use of %s %s", kind, secret)
    cache.put(fingerprint, principal)
    return principal


class ConfigUnavailable(exceptions.APIException):
    """A key not in the cache could not be checked: PostgreSQL is unreachable."""

    status_code = 503
    default_detail = "The configuration store is unavailable; retry shortly."
    default_code = "store_unavailable"


def bearer_key(header: bytes, kind: str = "API key") -> str | None:
    """The secret (an API key unless told) of an ``Authorization`` header's value; None when
    there is no header.

    Raises ``AuthenticationFailed`` for anything but ``Bearer <secret>`` with an ASCII secret.
    """
    words = header.split()
    if not words:
        return None
    if words[0].lower() != b"bearer" or len(words) != 2:
        raise exceptions.AuthenticationFailed(f"Use 'Authorization: Bearer <{kind.lower()}>'.")
    try:
        return words[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed(f"Invalid {kind}.") from None


class BearerAuthentication(BaseAuthentication, Generic[P]):
    """``Authorization: Bearer <secret>`` of one kind (``kind``, checked by ``check``): no
    header is no attempt (DRF: the next authenticator, or anonymous); a bad secret a 401."""

    kind: ClassVar[str]

    def check(self, plaintext: str) -> P | None:
        raise NotImplementedError

    def authenticate(self, request: Request) -> tuple[P, None] | None:
        plaintext = bearer_key(get_authorization_header(request), self.kind)
        if plaintext is None:
            return None
        principal = self.check(plaintext)
        if principal is None:
            raise exceptions.AuthenticationFailed(f"Invalid, revoked or disabled {self.kind}.")
        return principal, None

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE


class ApiKeyAuthentication(BearerAuthentication[Principal]):
    kind = ApiKey.KIND

    def check(self, plaintext: str) -> Principal | None:
        return authenticate_key(plaintext)


class IsApiClient(BasePermission):
    def has_permission(self, request: Request, view: object) -> bool:
        return isinstance(request.user, Principal)


def principal_of(request: Request) -> Principal:
    """The API client of a request :class:`IsApiClient` has let through."""
    user = request.user
    if not isinstance(user, Principal):  # only a view without IsApiClient gets here
        raise exceptions.NotAuthenticated()
    return user


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "pool_admin.api.auth.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key issued in the admin (pp_<prefix>_<secret>).",
        }
