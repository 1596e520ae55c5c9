"""Fixtures for the client API: a pool on a unique prefix, seeded proxies, clients and keys."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import redis
from django.core.handlers.wsgi import WSGIRequest
from django.core.management import ManagementUtility, base
from django.http import HttpResponse
from rest_framework.test import APIClient, ForceAuthClientHandler

from activity import (
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    PoolOptions,
    ProxyState,
    StaticCredentials,
)
from activity.redis import RedisPool
from pool_admin import bootstrap
from pool_admin.api import auth
from pool_admin.api.call_log import flush_call_log
from pool_admin.api.fast_extract import FastExtract
from pool_admin.config.models import (
    ApiClient,
    ApiKey,
    GatewayWorker,
    ProviderAccount,
    Upstream,
    WorkerGroup,
    WorkerToken,
)
from pool_admin.metrics.stream import flush_events
from tests.harness.metrics import isolate_stream

PROXY_PASSWORD = "proxy-pw-Zq81!secret"


@pytest.fixture
def pool_clock() -> ManualClock:
    """The API pool's clock: one instant for the whole test unless the test moves it. It also
    times the clients' rate limits, so a 1-second window never rolls over between the calls
    of a test on a slow machine (which would let a call the test expects refused through)."""
    return ManualClock(datetime.now(UTC))


@pytest.fixture(autouse=True)
def _isolated(redis_url, unique_prefix, pool_clock, settings):
    """The API's pool on this test's prefix and clock, its own usage stream, an empty key
    cache and no usage event of an earlier test still queued, before and after."""
    bootstrap.point_at(redis_url, unique_prefix, pool_clock)  # also empties the key cache
    settings.METRICS_REDIS_URL = redis_url
    isolate_stream(settings, unique_prefix)
    flush_call_log()
    flush_events()
    yield
    flush_call_log()  # nothing left for the exit hook, after pytest has closed its log streams
    flush_events()
    bootstrap.reset()


def make_seeder(url: str, prefix: str) -> Callable[..., list[str]]:
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    credentials = StaticCredentials()
    seed_pool = RedisPool(client, PoolOptions(prefix=prefix), credentials=credentials)
    counter = iter(range(10**6))

    def seed(
        upstream: str = "acme-us",
        n: int = 3,
        region: str = "us",
        protocol: str = "http",
        carrier: str | None = "att",
    ) -> list[str]:
        now = datetime.now(UTC)
        version = credentials.put("user-1", PROXY_PASSWORD)
        proxies = []
        for _ in range(n):
            i = next(counter)
            proxies.append(
                FetchedProxy(
                    proxy_id=f"{upstream}-p{i}",
                    unique_key=f"10.0.{i // 250}.{i % 250 + 1}:8080",
                    host=f"10.0.{i // 250}.{i % 250 + 1}",
                    port=8080,
                    protocol=protocol,
                    expires_at=now + timedelta(minutes=10),
                    region=region,
                    carrier=carrier,
                    secret_ref=version.ref,
                )
            )
        seed_pool.upsert_fetched(FetchedBatch(upstream, proxies, 1000, timedelta(seconds=5), now))
        seed_pool.apply_health(
            [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now, latency_ms=50) for p in proxies]
        )
        return [p.proxy_id for p in proxies]

    seed.pool = seed_pool  # type: ignore[attr-defined]

    def close() -> None:
        seed_pool.close()  # the pool's own connections
        client.close()

    seed.close = close  # type: ignore[attr-defined]
    return seed


@pytest.fixture
def seed(redis_url, unique_prefix):
    seeder = make_seeder(redis_url, unique_prefix)
    yield seeder
    seeder.close()


@pytest.fixture
def upstreams(db):
    account = ProviderAccount.objects.create(name="acme")
    return SimpleNamespace(
        us=Upstream.objects.create(
            name="acme-us", account=account, endpoint_url="https://acme.example/p"
        ),
        eu=Upstream.objects.create(
            name="acme-eu", account=account, endpoint_url="https://acme.example/p"
        ),
    )


@pytest.fixture
def key_cache_clock(monkeypatch):
    """Moves the key caches' clock (``auth._monotonic``) forward by the seconds given."""
    now = [time.monotonic()]
    monkeypatch.setattr(auth, "_monotonic", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


@pytest.fixture
def make_client(upstreams):
    """An API client (unrestricted unless told) and the plaintext of a fresh key."""

    def make(name: str = "crawler-1", allowed=(), **fields):
        row = ApiClient.objects.create(name=name, **fields)
        if allowed:
            row.allowed_upstreams.add(*Upstream.objects.filter(name__in=allowed))
        key, plaintext = ApiKey.objects.issue(row)
        return SimpleNamespace(row=row, key=key, plaintext=plaintext)

    return make


@pytest.fixture
def make_worker(upstreams):
    """A gateway worker in a group (made on first use) and the plaintext of a fresh token."""

    def make(name: str = "edge-1", group: str = "edge-us", **fields):
        row, created = WorkerGroup.objects.get_or_create(
            name=group, defaults={"target_capacity": 40}
        )
        if created:
            row.allowed_upstreams.add(upstreams.us)
        worker = GatewayWorker.objects.create(name=name, group=row, **fields)
        token, plaintext = WorkerToken.objects.issue(worker)
        return SimpleNamespace(row=worker, group=row, token=token, plaintext=plaintext)

    return make


class FastFirstHandler(ForceAuthClientHandler):
    """The test client's handler as the web server's application is composed (pool_admin/wsgi.py):
    fast_extract.py's answer for the ordinary extract, Django's handler for the rest. The fast
    application is built for each request, from the settings of that moment."""

    answered: int = 0  # requests fast_extract.py answered

    def __call__(self, environ):
        answered = FastExtract(None).answer(environ)
        if answered is None:
            return super().__call__(environ)
        FastFirstHandler.answered += 1
        # What the web server sends, as the test client reads a response.
        response = HttpResponse(
            answered.content, status=int(answered.status[:3]), headers=dict(answered.headers)
        )
        assert list(response.items()) == answered.headers
        response.wsgi_request = WSGIRequest(environ)
        return response


@pytest.fixture(params=["django", "fast"])
def api(request):
    """A client of the API: through Django's handler alone, or through fast_extract.py first as
    the web server runs it. Every API test runs on both, so both answer every request alike."""

    def make(plaintext: str | None = None) -> APIClient:
        client = APIClient()
        if request.param == "fast":
            client.handler = FastFirstHandler(enforce_csrf_checks=False)
        if plaintext is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        return client

    return make


@pytest.fixture
def extracts_run_by_fast(monkeypatch):
    """Request IDs of the extracts fast_extract.py ran (whatever their answer)."""
    calls = []
    from pool_admin.api import fast_extract

    original = fast_extract.run_extract

    def spy(principal, body, idempotency_key, request_id):
        calls.append(request_id)
        return original(principal, body, idempotency_key, request_id)

    monkeypatch.setattr(fast_extract, "run_extract", spy)
    return calls


@pytest.fixture
def run(capsys, monkeypatch):
    """Run a project command as from the command line: (exit status, stdout, stderr)."""
    # run_from_argv closes every database connection when it ends, which would close the
    # test's transaction; the command itself runs exactly as from the command line.
    monkeypatch.setattr(base.connections, "close_all", lambda: None)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            ManagementUtility(["manage.py", *argv]).execute()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        flush_call_log()  # what the command's process does on its way out (call_log.py)
        out, err = capsys.readouterr()
        return code, out, err

    return run
