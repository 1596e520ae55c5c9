"""No secret leaks: not in the admin's HTML, Redis key names, log records or error bodies.

One scenario end to end: a provider credential and a proxy credential go into the encrypted
credentials store, an API client gets a key and a gateway worker a token, proxies carrying the
proxy credential (by ``SecretRef``) are stocked through the real ``RedisPool`` with the store as
its resolver, and a client extracts them over HTTP, then provokes every error it can; the
worker's token is checked by the control API's authentication, right and wrong. Only the 200
extract bodies may carry the proxy password (that is what an extract is for). The HTTP part runs
through Django's handler alone and through fast_extract.py first, as the web server runs it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
import redis
from cryptography.fernet import Fernet
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from activity import FetchedBatch, FetchedProxy, HealthUpdate, PoolOptions, ProxyState
from activity.redis import RedisPool
from gateway_runtime.wire import SnapshotAck
from pool_admin import bootstrap
from pool_admin.api.call_log import call_lines, flush_call_log
from pool_admin.config.credential_store import CredentialStore
from pool_admin.config.models import (
    Alert,
    ApiClient,
    ApiKey,
    ClientDraws,
    ClientUsage,
    Credential,
    GatewayActivity,
    GatewayTicks,
    GatewayTraffic,
    GatewayWorker,
    ProviderAccount,
    Upstream,
    UpstreamChecks,
    UpstreamDrops,
    UpstreamQuality,
    WorkerGroup,
    WorkerToken,
)
from pool_admin.gateway_tasks import run_ownership_tick
from pool_admin.localservices import free_port
from pool_admin.metrics.aggregates import apply_events
from pool_admin.metrics.events import Event
from tests.pool_admin.api.conftest import FastFirstHandler
from tests.pool_admin.api.simulated_worker import BASE, SimulatedWorker
from tests.pool_admin.api.test_gateway_auth import call as call_as_worker

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PROVIDER_SECRET = "provider-tok-Hq4!vZ9#leak-me-not"
PROXY_PASSWORD = "proxy-pw-Kd72$wX0!never-log"
EXTRACT = "/api/v1/extract"


@pytest.fixture(params=["django", "fast"])
def new_api_client(request):
    """Makes API clients of one path: Django's handler alone, or fast_extract.py first (the ``api``
    fixture of tests/pool_admin/api/conftest.py)."""

    def make(authorization: str | None = None) -> APIClient:
        client = APIClient()
        if request.param == "fast":
            client.handler = FastFirstHandler(enforce_csrf_checks=False)
        if authorization is not None:
            client.credentials(HTTP_AUTHORIZATION=authorization)
        return client

    make.path = request.param
    return make


@pytest.fixture
def world(settings, redis_url, unique_prefix):
    settings.POOL_SECRET_KEYS = (Fernet.generate_key().decode(),)
    bootstrap.point_at(redis_url, unique_prefix)
    flush_call_log()  # no event of an earlier test in this one's log

    store = CredentialStore()
    provider = store.put("acme-api", PROVIDER_SECRET, username="acct-42")
    proxy_cred = store.put(
        "acme-proxy-auth",
        PROXY_PASSWORD,
        username="proxy-user",
        purpose=Credential.Purpose.PROXY_AUTH,
    )
    account = ProviderAccount.objects.create(
        name="acme", credential=Credential.objects.get(name="acme-api")
    )
    upstream = Upstream.objects.create(
        name="acme-us",
        account=account,
        endpoint_url="https://api.acme.example/v1/proxies",
        default_region="us",
    )
    failed_at = datetime.now(UTC)
    alert = Alert.objects.create(
        upstream=upstream, kind=Alert.Kind.FETCH_FAILING, failures=3, first_failed_at=failed_at,
        last_failed_at=failed_at, opened_at=failed_at,
        detail="fetch_failed: the vendor could not be reached (ConnectError)",
    )  # fmt: skip
    client_row = ApiClient.objects.create(
        name="crawler-1", max_count_per_request=5, may_view_inventory=True
    )
    client_row.allowed_upstreams.add(upstream)
    key, plaintext = ApiKey.objects.issue(client_row, name="prod")
    group = WorkerGroup.objects.create(name="edge-us", target_capacity=10)
    group.allowed_upstreams.add(upstream)
    worker = GatewayWorker.objects.create(name="edge-1", group=group)
    token, token_text = WorkerToken.objects.issue(worker, name="host-a")

    conn = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
    pool = RedisPool(conn, PoolOptions(prefix=unique_prefix), credentials=store)
    now = datetime.now(UTC)
    proxies = [
        FetchedProxy(
            proxy_id=f"acme-us-p{i}",
            unique_key=f"10.9.0.{i + 1}:8080",
            host=f"10.9.0.{i + 1}",
            port=8080,
            protocol="http",
            expires_at=now + timedelta(minutes=10),
            region="us",
            carrier="att",
            secret_ref=proxy_cred.ref,
        )
        for i in range(4)
    ]
    pool.upsert_fetched(FetchedBatch("acme-us", proxies, 1000, timedelta(seconds=5), now))
    pool.apply_health(
        [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now, latency_ms=40) for p in proxies]
    )
    pool.close()  # its own connections; `conn` stays open for the Redis key checks below

    # A row in every usage aggregate, as the usage stream's consumer writes them.
    ms = int(now.timestamp() * 1000)
    apply_events([
        Event("outcome", ms, {"upstream": "acme-us", "outcome": "ok"}),
        Event("extract", ms, {"client": client_row.name, "outcome": "ok", "returned": 1,
                              "duration_ms": 2, "draws": [["acme-us", "us", 1, 10]]}),
        Event("fetch", ms, {"upstream": "acme-us", "received": 4, "inserted": 4,
                            "refreshed": 0, "available": 4, "dropped": {"bad_port": 1}}),
        Event("check", ms, {"upstream": "acme-us", "source": "intake",
                            "states": {"available": 4}, "latency_ms": 160, "timed": 4}),
        Event("gateway_tick", ms, {"duration_ms": 30, "expired": 1, "cut_short": False}),
        Event("gateway_ownership", ms, {"group": group.name, "assigned": 1, "renewed": 0,
                                        "drains_begun": 0, "released": 0, "refused": 0}),
        Event("gateway_traffic", ms, {"group": group.name, "client": client_row.name,
                                      "upstream": "acme-us", "requests": 3, "tunnels": 1,
                                      "bytes_up": 300, "bytes_down": 3_000,
                                      "failed_connect": 0, "failed_timeout": 0,
                                      "failed_upstream": 1, "failed_closed": 0}),
        Event("gateway_snapshots_refused", ms, {"group": group.name, "refused": 1}),
    ])  # fmt: skip
    usage = [m.objects.get() for m in (UpstreamQuality, UpstreamDrops, UpstreamChecks,
                                       ClientUsage, ClientDraws, GatewayTicks,
                                       GatewayActivity, GatewayTraffic)]  # fmt: skip

    prefix = f"{ApiKey.SCHEME}_{key.prefix}_"
    assert plaintext.startswith(prefix)
    token_prefix = f"{WorkerToken.SCHEME}_{token.prefix}_"
    assert token_text.startswith(token_prefix)
    secrets = {
        "worker token": token_text,
        "worker token secret part": token_text[len(token_prefix) :],
        "proxy password": PROXY_PASSWORD,
        "provider credential": PROVIDER_SECRET,
        "API key": plaintext,
        "API key secret part": plaintext[len(prefix) :],
        "provider SecretRef": provider.ref.ref,
        "proxy SecretRef": proxy_cred.ref.ref,
    }
    yield {
        "secrets": secrets,
        "plaintext": plaintext,
        "token": token_text,
        "redis": conn,
        "prefixes": [unique_prefix],  # the pool's keys, the clients' rate limits among them
        "objects": [
            account,
            alert,
            upstream,
            client_row,
            key,
            group,
            worker,
            token,
            *Credential.objects.all(),
            *usage,
        ],
    }
    flush_call_log()
    conn.close()
    bootstrap.reset()


def assert_no_secret(text: str, where: str, secrets: dict[str, str]) -> None:
    for what, value in secrets.items():
        assert value not in text, f"{what} appears in {where}"


def test_no_secret_in_admin_redis_keys_logs_or_errors(
    world, client, caplog, redis_url, new_api_client
):
    caplog.set_level(logging.DEBUG)
    secrets = world["secrets"]
    answered_fast = FastFirstHandler.answered
    api = new_api_client(f"Bearer {world['plaintext']}")

    # The one place a proxy password belongs: a 200 extract body (and its replay).
    ok = api.post(EXTRACT, {"count": 2, "mode": "partial"}, format="json",
                  headers={"Idempotency-Key": "k-1"})  # fmt: skip
    assert ok.status_code == 200, ok.content
    assert ok.json()["proxies"][0]["password"] == PROXY_PASSWORD  # resolved through the store
    replay = api.post(EXTRACT, {"count": 2, "mode": "partial"}, format="json",
                      headers={"Idempotency-Key": "k-1"})  # fmt: skip
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    outcome = f"/api/v1/proxies/{ok.json()['proxies'][0]['id']}/outcome"
    banned = api.post(outcome, {"outcome": "banned", "target_host": "shop.example"}, format="json")
    assert banned.status_code == 200, banned.content
    assert_no_secret(banned.content.decode(), "an outcome body", secrets)

    anonymous = new_api_client()
    wrong_key = new_api_client(f"Bearer {world['plaintext']}x")
    malformed_key = new_api_client(f"Basic {world['plaintext']}")
    body = {"count": 1, "mode": "partial"}
    errors = [
        api.post(EXTRACT, {**body, "password": PROXY_PASSWORD}, format="json"),  # 400 unknown
        api.post(EXTRACT, "{not json", content_type="application/json"),  # 400 parse error
        api.post(EXTRACT, body, format="json", headers={"Idempotency-Key": "a b"}),  # 400
        api.post(EXTRACT, {"count": 99, "mode": "partial"}, format="json"),  # 403 above limit
        api.post(EXTRACT, {**body, "filters": {"upstream": "other"}}, format="json"),  # 403
        api.post(EXTRACT, {"count": 5, "mode": "all_or_nothing"}, format="json"),  # 409
        api.post(
            EXTRACT,
            {"count": 3, "mode": "partial"},
            format="json",
            headers={"Idempotency-Key": "k-1"},
        ),  # 409 idempotency conflict
        api.get(EXTRACT),  # 405
        api.get("/api/v1/nowhere"),  # 404
        anonymous.post(EXTRACT, body, format="json"),  # 401
        wrong_key.post(EXTRACT, body, format="json"),  # 401
        malformed_key.get("/api/v1/inventory"),  # 401
        new_api_client(f"Bearer {world['token']}").post(EXTRACT, body, format="json"),  # 401
        api.post(outcome, {"outcome": "ok"}, format="json"),  # 409 another outcome
        api.post(outcome, {"outcome": "ok", "password": PROXY_PASSWORD}, format="json"),  # 400
        api.post("/api/v1/proxies/nope/outcome", {"outcome": "ok"}, format="json"),  # 404
    ]
    # Redis stopped (nothing listens there): 503, and the log says so without secrets.
    bootstrap.point_at(f"redis://:{PROXY_PASSWORD}@127.0.0.1:{free_port()}/0", "t-down")
    errors.append(api.post(EXTRACT, body, format="json"))
    bootstrap.point_at(redis_url, world["prefixes"][0])
    statuses = sorted(r.status_code for r in errors)
    assert statuses == [400, 400, 400, 400, 401, 401, 401, 401, 403, 403, 404, 404, 405, 409,
                        409, 409, 503], statuses  # fmt: skip
    for response in errors:
        assert_no_secret(response.content.decode(), f"a {response.status_code} body", secrets)
        assert_no_secret(str(dict(response.items())), "error headers", secrets)
    # The worker control API's authentication (its views are another change's): the worker's
    # own token, a wrong one, an API key, a malformed header, none.
    token = world["token"]
    worker_answers = [call_as_worker(f"Bearer {token}"), call_as_worker(f"Bearer {token}x"),
                      call_as_worker(f"Bearer {world['plaintext']}"),
                      call_as_worker(f"Basic {token}"), call_as_worker()]  # fmt: skip
    assert [r.status_code for r in worker_answers] == [200, 401, 401, 401, 401]
    for response in worker_answers:
        where = f"a worker's {response.status_code} answer"
        assert_no_secret(response.content.decode(), where, secrets)
        assert_no_secret(str(dict(response.items())), where, secrets)
    inventory = api.get("/api/v1/inventory")
    assert inventory.status_code == 200
    assert_no_secret(inventory.content.decode(), "the inventory body", secrets)
    if new_api_client.path == "fast":  # the replay at least was fast_extract.py's own answer
        assert FastFirstHandler.answered > answered_fast
    else:
        assert FastFirstHandler.answered == answered_fast

    # The admin: every configuration model's changelist and change page, as a superuser.
    boss = get_user_model().objects.create_superuser("boss", password="a-Long-pass-123")
    client.force_login(boss)
    config_models = [m for m in admin.site._registry if m._meta.app_label == "config"]
    assert {Credential, Upstream, ApiClient, ApiKey, WorkerGroup, GatewayWorker,
            WorkerToken} <= set(config_models)  # fmt: skip
    pages = 0
    for obj in world["objects"]:
        obj.refresh_from_db()
    by_model = {type(obj): [] for obj in world["objects"]}
    for obj in world["objects"]:
        by_model[type(obj)].append(obj)
    for model in config_models:
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        urls = [reverse(f"{name}_changelist")]
        urls += [reverse(f"{name}_change", args=[obj.pk]) for obj in by_model.get(model, [])]
        urls += [reverse(f"{name}_history", args=[obj.pk]) for obj in by_model.get(model, [])]
        for url in urls:
            page = client.get(url)
            assert page.status_code == 200, url
            assert_no_secret(page.content.decode(), url, secrets)
            pages += 1
    assert pages >= 3 * len(config_models) - 1

    # The live console: every page whole and its live part, each proxy's own page, and the
    # confirmations of the actions on them (a refused one answers with a redirect).
    console = ["/admin/console/", "/admin/console/proxies/", "/admin/console/ownership/",
               "/admin/console/history/", "/admin/console/proxies/?state=extracted"]  # fmt: skip
    console += [f"{url}{'&' if '?' in url else '?'}part=live" for url in console]
    for i in range(4):
        console += [f"/admin/console/proxy/?id=acme-us-p{i}",
                    f"/admin/console/act/remove_proxy/?target=acme-us-p{i}",
                    f"/admin/console/act/drain_proxy/?target=acme-us-p{i}"]  # fmt: skip
    shown = 0
    for url in console:
        page = client.get(url, follow=True)
        assert page.status_code == 200, url
        assert_no_secret(page.content.decode(), url, secrets)
        shown += "acme-us-p" in page.content.decode()
    assert shown >= 10  # the proxies were there to be shown

    # Redis key names under the test's prefixes (the pool's and the rate limiter's).
    names = []
    for prefix in world["prefixes"]:
        names += [k.decode() for k in world["redis"].scan_iter(match=f"{prefix}*", count=1000)]
    assert any(n.startswith(world["prefixes"][0]) for n in names)
    assert_no_secret("\n".join(names), "a Redis key name", secrets)

    # Every log record of the whole scenario, message and arguments formatted; call log lines
    # are written in batches, so the last ones are written now.
    flush_call_log()
    assert caplog.records
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    events = [json.loads(line.removeprefix("call ")) for line in logged]
    seen = {(e["event"], e.get("outcome") or e.get("result")) for e in events}
    assert {("extract", "ok"), ("extract", "insufficient_inventory"),
            ("extract", "idempotency_conflict"), ("outcome", "ok"),
            ("outcome", "conflict"), ("outcome", "not_found")} <= seen, logged  # fmt: skip
    for record in caplog.records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        assert_no_secret(text, f"a log record of {record.name}", secrets)


def test_no_secret_over_the_gateway_control_api(world, caplog, redis_url):
    """A worker's whole control traffic, right and wrong: the proxy password only in its 200
    snapshot bodies; never the API key, its stored hash or a SecretRef, even there."""
    caplog.set_level(logging.DEBUG)
    secrets = world["secrets"]
    ApiClient.objects.filter(name="crawler-1").update(gateway_enabled=True)
    Upstream.objects.filter(name="acme-us").update(gateway_share_percent=100)
    key_hash = ApiKey.objects.get(name="prod").key_hash
    in_snapshots = {k: v for k, v in secrets.items() if k != "proxy password"}
    in_snapshots["API key hash"] = key_hash
    worker = SimulatedWorker(world["token"])
    opened = worker.open()
    assert opened.status_code == 200
    assert run_ownership_tick() is not None
    fetched = worker.fetch()
    assert fetched.status_code == 200, fetched.content
    assert PROXY_PASSWORD in fetched.content.decode()  # the one place it belongs
    assert_no_secret(fetched.content.decode(), "a snapshot", in_snapshots)
    assert [c.name for c in worker.snapshot.clients] == ["crawler-1"]

    wrong = SimulatedWorker(f"{world['token']}x")
    answers = [opened, worker.fetch(), worker.ack(), worker.report(),
               worker.ack(SnapshotAck(worker.snapshot.version, worker.snapshot.epoch, "0" * 64)),
               worker.report(worker.report_body(sequence=5)),
               worker.client.post(f"{BASE}/reports",
                                  json.dumps({"wire": 1, "password": PROXY_PASSWORD}),
                                  content_type="application/json",
                                  HTTP_GATEWAY_SESSION=worker.session_id),
               wrong.open(), SimulatedWorker(world["plaintext"]).open()]  # fmt: skip
    SimulatedWorker(world["token"]).open()  # a new session fences the first
    answers += [worker.report(), worker.fetch(conditional=False)]
    bootstrap.point_at(f"redis://:{PROXY_PASSWORD}@127.0.0.1:{free_port()}/0", "t-down")
    answers.append(worker.open())
    bootstrap.point_at(redis_url, world["prefixes"][0])
    statuses = [r.status_code for r in answers]
    assert statuses == [200, 304, 200, 200, 409, 409, 400, 401, 401, 409, 409, 503], statuses
    for response in answers:
        where = f"a worker's {response.status_code} answer"
        assert_no_secret(response.content.decode(), where, {**secrets, "API key hash": key_hash})
        assert_no_secret(str(dict(response.items())), where, secrets)
    for record in caplog.records:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        assert_no_secret(text, f"a log record of {record.name}", secrets)
