"""The demo provider (pool_admin/demo.py, ensure_demo, demo_proxies): the vendor emulator,
its configuration, and the whole fetch through it to real local proxies, on PostgreSQL and
Redis: what ``make run`` shows a newcomer."""

from __future__ import annotations

import json

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from activity.ownership_manager import ManagerPolicy
from activity.types import ExtractFilters, ExtractRequest
from pool_admin import demo, fetch_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import ApiClient, ApiKey, Credential, ProviderAccount, Upstream
from pool_admin.demo_proxies import HTTP_USERS, LISTING, SOCKS_SERVERS, DemoProxies

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]
KEY = "pp_0123456789ab_" + "k_-" * 14  # a URL-safe secret may hold "_" and "-"


@pytest.fixture(autouse=True)
def demo_on(settings, tmp_path, filling_pool):
    settings.DEMO = True
    settings.RUN_DIR = tmp_path


def ensure(base: str = "http://127.0.0.1:8000", **env: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("ensure_demo", "--base-url", base, stdout=out)
    return out.getvalue()


def test_ensure_demo_configures_once_and_prints_a_generated_key_once(monkeypatch):
    monkeypatch.delenv("DEMO_API_KEY", raising=False)
    first = ensure()
    assert "shown only this once" in first
    printed = next(line.strip() for line in first.splitlines() if line.strip().startswith("pp_"))
    assert ApiKey.objects.verify(printed).client.name == "demo"
    again = ensure("http://127.0.0.1:9000")
    assert "pp_" not in again and "has a key already" in again
    assert set(Upstream.objects.values_list("name", flat=True)) == set(demo.UPSTREAMS)
    assert Upstream.objects.get(name="demo").endpoint_url.startswith("http://127.0.0.1:9000/")
    assert ProviderAccount.objects.get().credential.reveal().startswith("Token ")
    demo_client = ApiClient.objects.get(name="demo")
    assert demo_client.may_view_inventory and demo_client.gateway_enabled
    # Its proxies live long enough to be assigned: twice the manager's drain lead and more.
    lead = ManagerPolicy().drain_lead.total_seconds()
    assert {u.default_ttl_s for u in Upstream.objects.all()} == {180} and 2 * lead < 180


def test_demo_api_key_is_the_clients_key_and_a_malformed_one_changes_nothing(monkeypatch):
    for bad in ("not-a-key", "pp_0123456789ab_short", "pp_0123456789ZZ_" + "k" * 40):
        monkeypatch.setenv("DEMO_API_KEY", bad)
        with pytest.raises(CommandError, match="DEMO_API_KEY refused"):
            ensure()
    assert not Upstream.objects.exists() and not Credential.objects.exists()
    monkeypatch.setenv("DEMO_API_KEY", KEY)
    assert "its key is DEMO_API_KEY" in ensure()
    assert "its key is DEMO_API_KEY" in ensure()  # the same key again: nothing new
    assert ApiKey.objects.verify(KEY).client.name == "demo"
    assert ApiKey.objects.count() == 1


@pytest.mark.parametrize("base", ["ftp://x", "http://127.0.0.1:8000/sub", "127.0.0.1:8000"])
def test_a_base_url_that_is_not_a_web_servers_is_refused_and_changes_nothing(base):
    with pytest.raises(CommandError, match="--base-url must be"):
        ensure(base)
    assert not Upstream.objects.exists() and not Credential.objects.exists()


def test_the_vendor_emulator_asks_for_its_token_and_answers_in_webshares_shape(
    client, settings, tmp_path, monkeypatch
):
    monkeypatch.setenv("DEMO_API_KEY", KEY)
    ensure()
    url = "/" + demo.PATH
    (tmp_path / LISTING).write_text(json.dumps({"proxies": [
        {"protocol": "http", "host": "127.0.0.1", "port": 3128 + n, "username": f"u{n}",
         "password": f"p{n}"} for n in range(5)
    ]}))  # fmt: skip
    assert client.get(url).status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION="Token wrong").status_code == 401
    token = Credential.objects.get(name=demo.CREDENTIAL).reveal()
    answer = client.get(url, {"page_size": "3"}, HTTP_AUTHORIZATION=token).json()
    assert answer["count"] == 3 and {r["valid"] for r in answer["results"]} == {True}
    assert {"username", "password", "proxy_address", "port"} <= set(answer["results"][0])
    assert client.get(url, {"protocol": "socks5"}, HTTP_AUTHORIZATION=token).json()["count"] == 0
    assert client.get(url, {"page_size": "x"}, HTTP_AUTHORIZATION=token).status_code == 400
    settings.DEMO = False
    assert client.get(url, HTTP_AUTHORIZATION=token).status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_demo_fills_the_pool_with_working_local_proxies(live_server, settings, tmp_path,
                                                             monkeypatch):  # fmt: skip
    """The fetch task, called directly as a worker would: the emulator's proxies fetched,
    checked through themselves against the web server's /healthz, AVAILABLE, extracted, and
    a request through one reaching the web server."""
    monkeypatch.setenv("DEMO_API_KEY", KEY)
    proxies = DemoProxies(tmp_path)
    proxies.start()
    try:
        ensure(live_server.url)
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 2
        reports = [fetch_tasks.run_fetch(claim) for claim in claims]
        assert sorted(r.checks.states["available"] for r in reports if r) == [
            SOCKS_SERVERS,
            HTTP_USERS,
        ]
        pool = get_pool()
        assert pool.upstream_inventory("demo").managed == HTTP_USERS
        only_http = ExtractFilters(upstream="demo")
        [proxy] = pool.extract(ExtractRequest(client_id="demo", count=1, filters=only_http)).proxies
        via = f"http://{proxy.username}:{proxy.password}@{proxy.host}:{proxy.port}"
        with httpx.Client(proxy=via) as through:
            assert through.get(f"{live_server.url}/healthz").status_code == 200
    finally:
        proxies.stop()
    assert not (tmp_path / LISTING).exists()
    assert not list((tmp_path / "demo-proxies").glob("*.conf"))  # no password left on disk


@pytest.mark.slow
def test_the_demo_proxies_keep_their_ports_and_logins_from_one_start_to_the_next(tmp_path):
    """The pool outlives a restart of make run: the proxies it holds must stay valid exits."""
    first = DemoProxies(tmp_path)
    entries = first.start()
    first.stop()
    assert not (tmp_path / LISTING).exists()
    again = DemoProxies(tmp_path)
    try:
        assert again.start() == entries
    finally:
        again.stop()
    state = tmp_path / "demo-proxies" / "state.json"
    assert oct(state.stat().st_mode & 0o777) == "0o600"
