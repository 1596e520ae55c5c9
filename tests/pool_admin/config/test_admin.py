"""The admin: every page renders, secrets are write-only, API keys are shown exactly once."""

import re

import pytest
from django.urls import reverse

from pool_admin.config.models import (
    ApiClient,
    ApiKey,
    Credential,
    GatewayWorker,
    ProviderAccount,
    Upstream,
    WorkerGroup,
    WorkerToken,
)

from .conftest import SECRET, url

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

KEY_RE = re.compile(r"pp_[0-9a-f]{12}_[A-Za-z0-9_-]{40,}")


@pytest.fixture
def everything(credential, upstream, api_client, worker_group):
    key, plaintext = ApiKey.objects.issue(api_client, name="prod")
    worker = GatewayWorker.objects.create(name="edge-1", group=worker_group)
    token, token_text = WorkerToken.objects.issue(worker, name="host-a")
    return {
        Credential: credential,
        Upstream: upstream,
        ApiClient: api_client,
        WorkerGroup: worker_group,
        ApiKey: key,
        GatewayWorker: worker,
        WorkerToken: token,
        "plaintext": plaintext,
        "token plaintext": token_text,
    }


def pages(everything):
    """Every admin page of every configuration model, for one row each."""
    for model in (Credential, Upstream, ApiClient, WorkerGroup, ApiKey, GatewayWorker, WorkerToken):
        obj = everything[model]
        yield url(model, "changelist")
        yield url(model, "changelist") + "?q=a"
        yield url(model, "change", obj.pk)
        yield url(model, "history", obj.pk)
        for record in obj.history.all():
            yield url(model, "simple_history", obj.pk, record.history_id)
        if model not in (ApiKey, WorkerToken):
            yield url(model, "add")


def test_every_page_renders_and_never_shows_a_secret(client, boss, everything):
    credential = everything[Credential]
    ciphertext = bytes(Credential.objects.get(pk=credential.pk).ciphertext).decode()
    forbidden = [SECRET, ciphertext, everything["plaintext"], everything[ApiKey].key_hash,
                 everything["token plaintext"], everything[WorkerToken].key_hash]  # fmt: skip
    seen = 0
    for page in pages(everything):
        response = client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        for value in forbidden:
            assert value not in html, page
        seen += 1
    assert seen >= 35
    index = client.get(reverse("admin:index")).content.decode()
    for label in ("Upstreams", "API clients", "API keys", "Worker groups", "Credentials",
                  "Gateway workers", "Worker tokens"):  # fmt: skip
        assert label in index


def test_credential_change_form_shows_only_when_the_secret_was_set(client, boss, credential):
    html = client.get(url(Credential, "change", credential.pk)).content.decode()
    assert f"set on {credential.secret_set_at:%Y-%m-%d}" in html
    assert 'type="password"' in html
    assert 'name="secret" ' in html and 'value="' + SECRET not in html
    listing = client.get(url(Credential, "changelist")).content.decode()
    assert "set on " in listing


def test_credential_secret_is_write_only(client, boss, keys):
    response = client.post(
        url(Credential, "add"),
        {"name": "acme-api", "purpose": "provider_api", "username": "u1", "secret": SECRET},
    )
    assert response.status_code == 302
    row = Credential.objects.get(name="acme-api")
    assert row.reveal() == SECRET and row.version == 1
    assert row.history.first().history_user.username == "boss"

    # Saving without a secret keeps it; a new one makes version 2.
    change = url(Credential, "change", row.pk)
    data = {"name": "acme-api", "purpose": "provider_api", "username": "u2", "secret": ""}
    assert client.post(change, data).status_code == 302
    row.refresh_from_db()
    assert (row.reveal(), row.version, row.username) == (SECRET, 1, "u2")
    assert client.post(change, {**data, "secret": "new-token-value"}).status_code == 302
    row.refresh_from_db()
    assert (row.reveal(), row.version) == ("new-token-value", 2)


def test_credential_form_errors_never_echo_the_secret(client, boss, keys):
    response = client.post(
        url(Credential, "add"), {"name": "bad name", "purpose": "provider_api", "secret": SECRET}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Enter a valid label" in html
    assert SECRET not in html
    missing = client.post(url(Credential, "add"), {"name": "acme", "purpose": "provider_api"})
    assert "Enter the secret." in missing.content.decode()
    assert not Credential.objects.exists()


def test_history_cannot_be_reverted_for_secrets_and_keys(client, boss, everything):
    for model in (Credential, ApiKey, WorkerToken):
        obj = everything[model]
        record = obj.history.first()
        response = client.post(url(model, "simple_history", obj.pk, record.history_id), {})
        assert response.status_code == 403


def upstream_form(**overrides):
    data = {
        "name": "acme-eu",
        "enabled": "on",
        "kind": "json_list",
        "endpoint_url": "https://api.acme.example/v1/proxies",
        "request_params": "{}",
        "account": str(ProviderAccount.objects.get_or_create(name="acme")[0].pk),
        "preset": "",
        "expiry_zone": "",
        "default_protocol": "http",
        "default_region": "",
        "default_carrier": "",
        "default_ttl_s": "300",
        "safety_margin_s": "5",
        "max_size": "1000",
        "fetch_interval_s": "30",
        "fetch_timeout_s": "20",
        "low_water_mark": "0",
        "refill_cooldown_s": "10",
        "check_url": "https://check.example/204",
        "check_timeout_ms": "5000",
        "check_interval_s": "30",
        "gateway_share_percent": "50",
    }
    return {**data, **overrides}


def test_upstream_validation_errors_are_form_errors(client, boss):
    response = client.post(
        url(Upstream, "add"),
        upstream_form(default_region="eu west", max_size="0", safety_margin_s="400"),
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Enter a valid label" in html
    assert "greater than or equal to 1" in html
    assert "Must be shorter than the default proxy TTL." in html
    assert not Upstream.objects.exists()
    assert client.post(url(Upstream, "add"), upstream_form()).status_code == 302
    assert Upstream.objects.get().history.first().history_user.username == "boss"


def client_form(**overrides):
    data = {
        "name": "crawler-9",
        "enabled": "on",
        "requests_per_second": "50",
        "proxies_per_minute": "1000",
        "max_count_per_request": "100",
        "gateway_reserve": "0",
        "idempotency_ttl_s": "600",
        "gateway_max_connections": "100",
        "gateway_requests_per_second": "100",
        "allowed_regions": "us, de",
        "allowed_protocols": ["http", "socks5"],
        "keys-TOTAL_FORMS": "0",
        "keys-INITIAL_FORMS": "0",
        "keys-MIN_NUM_FORMS": "0",
        "keys-MAX_NUM_FORMS": "1000",
    }
    return {**data, **overrides}


def test_api_key_plaintext_is_shown_exactly_once(client, boss):
    response = client.post(url(ApiClient, "add"), client_form(issue_key="on"), follow=True)
    assert response.status_code == 200
    found = KEY_RE.findall(response.content.decode())
    assert len(found) == 1
    plaintext = found[0]
    api_client = ApiClient.objects.get(name="crawler-9")
    assert api_client.allowed_regions == ["us", "de"]
    assert api_client.allowed_protocols == ["http", "socks5"]
    key = ApiKey.objects.verify(plaintext)
    assert key is not None and key.client == api_client

    later = [
        url(ApiClient, "changelist"),
        url(ApiClient, "change", api_client.pk),
        url(ApiClient, "history", api_client.pk),
        url(ApiKey, "changelist"),
        url(ApiKey, "change", key.pk),
        url(ApiKey, "history", key.pk),
    ]
    for page in later:
        html = client.get(page).content.decode()
        assert plaintext not in html, page
        assert not KEY_RE.search(html), page
    assert key.prefix in client.get(url(ApiClient, "change", api_client.pk)).content.decode()


def test_saving_without_the_checkbox_issues_no_key(client, boss, api_client):
    key, plaintext = ApiKey.objects.issue(api_client)
    data = client_form(name=api_client.name, allowed_protocols=[])
    # The read-only key inline posts back as the browser sends it.
    data.update({"keys-TOTAL_FORMS": "1", "keys-INITIAL_FORMS": "1", "keys-0-id": str(key.pk)})
    data["keys-0-client"] = str(api_client.pk)
    response = client.post(url(ApiClient, "change", api_client.pk), data, follow=True)
    assert response.status_code == 200
    assert not KEY_RE.search(response.content.decode())
    assert list(ApiKey.objects.all()) == [key]
    assert ApiKey.objects.verify(plaintext) == key
    api_client.refresh_from_db()
    assert api_client.allowed_protocols == [] and api_client.allowed_regions == ["us", "de"]


def test_api_client_form_errors(client, boss):
    response = client.post(
        url(ApiClient, "add"),
        client_form(
            allowed_regions="us, eu\x07west", allowed_protocols=["ftp"], gateway_reserve="-1"
        ),
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Not a region label" in html
    assert "Select a valid choice" in html
    assert "greater than or equal to 0" in html
    assert not ApiClient.objects.exists() and not ApiKey.objects.exists()


def test_revoke_action(client, boss, api_client):
    keep, keep_text = ApiKey.objects.issue(api_client, name="keep")
    drop, drop_text = ApiKey.objects.issue(api_client, name="drop")
    response = client.post(
        url(ApiKey, "changelist"),
        {"action": "revoke", "_selected_action": [drop.pk]},
        follow=True,
    )
    assert "Revoked 1 API key(s)." in response.content.decode()
    assert ApiKey.objects.verify(drop_text) is None
    assert ApiKey.objects.verify(keep_text) == keep
    drop.refresh_from_db()
    assert drop.history.first().history_user.username == "boss"
    revoked = client.get(url(ApiKey, "changelist") + "?status=revoked").content.decode()
    assert drop.prefix in revoked and keep.prefix not in revoked


def test_a_key_is_revoked_from_its_own_page(client, boss, api_client):
    key, plaintext = ApiKey.objects.issue(api_client, name="old")
    page = client.get(url(ApiKey, "change", key.pk)).content.decode()
    assert 'name="_revoke"' in page
    response = client.post(
        url(ApiKey, "change", key.pk), {"name": "old", "_revoke": "1"}, follow=True
    )
    html = response.content.decode()
    assert f"Revoked API key {key}." in html
    assert 'name="_revoke"' not in html  # a revoked key offers no second revocation
    assert ApiKey.objects.verify(plaintext) is None
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert key.history.first().history_user.username == "boss"


def test_api_keys_cannot_be_added_directly(client, boss):
    assert client.get(url(ApiKey, "add")).status_code == 403


def test_an_accounts_page_lists_its_upstreams_and_an_upstream_takes_a_preset(client, boss):
    assert (
        client.post(url(Upstream, "add"), upstream_form(kind="preset", preset="")).status_code
        == 200
    )
    created = client.post(
        url(Upstream, "add"),
        upstream_form(kind="preset", preset="kuaidaili_getdps_json", expiry_zone="Asia/Shanghai"),
    )
    assert created.status_code == 302
    upstream = Upstream.objects.get()
    assert (upstream.preset, upstream.account.name) == ("kuaidaili_getdps_json", "acme")
    page = client.get(url(ProviderAccount, "change", upstream.account.pk)).content.decode()
    assert "acme-eu" in page and "Limits (over all of its upstreams)" in page
    listing = client.get(url(ProviderAccount, "changelist")).content.decode()
    assert "acme" in listing
