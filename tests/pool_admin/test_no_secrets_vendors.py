"""No vendor text carries a secret (issue 22, section 4): a vendor of every preset's shape that
quotes the credential it was sent in its error (as is, upper-cased and URL-encoded) leaves it in
no log line, alert detail, notification, admin page or console page; and the console shows
alert details only to those who may view alerts.

Before: ``{"code": -1, "msg": "invalid secret_id <secret>"}`` put the secret in every fetch's
log line, the alert's detail, the Alerts admin list, the console overview and the email."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import mail

from activity.providers.presets import PRESETS
from pool_admin import alerts, fetch_tasks
from pool_admin.config.models import Alert, Credential, ProviderAccount, Upstream
from tests.harness.console_world import console_user
from tests.harness.webshare_vendor import vendor

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

SECRET = "sk-Hq4!vZ9#Leak/me+not-77"


def said(key: str) -> str:
    """How a vendor quotes the key it got: as sent, upper-cased, URL-encoded."""
    return f"invalid secret_id {key} ({key.upper()}, {quote(key, safe='')})"


#: Each preset's error answer, quoting the key the request carried.
ECHOES = {
    "kuaidaili_getdps_json": lambda q: {"code": -1, "msg": said(q["key"])},
    "kuaidaili_getdps_text": lambda q: f"ERROR(-1): {said(q['key'])}".encode(),
    "juliang_postpay_text": lambda q: f"ERROR(-1): {said(q['key'])}".encode(),
    "zhima_getip_json": lambda q: {"code": 113, "msg": said(q["key"]), "data": []},
    "xiequ_json": lambda q: {"code": 1, "success": "false", "msg": said(q["key"])},
    "webshare_list": lambda q: {"detail": said(q["key"])},
    "proxy_seller_list": lambda q: {
        "status": "error", "errors": [{"code": 503, "message": said(q["key"])}],
    },
    "thordata_isp": lambda q: {"code": 117, "msg": said(q["key"]), "data": []},
}  # fmt: skip


def test_every_preset_has_an_echoing_vendor():
    assert set(ECHOES) == set(PRESETS)


def leaks(text: str) -> list[str]:
    forms = (SECRET, SECRET.upper(), quote(SECRET, safe=""), "Leak/me", "LEAK/ME")
    return [form for form in forms if form.lower() in text.lower()]


@pytest.fixture
def boss(django_user_model):
    return django_user_model.objects.create_superuser("boss", "boss@example.com", "pw-boss-1")


@pytest.mark.parametrize("preset", sorted(ECHOES))
def test_a_vendor_quoting_the_credential_leaves_it_nowhere(
    preset, filling_pool, settings, caplog, client, boss, monkeypatch
):
    caplog.set_level(logging.DEBUG)
    settings.POOL_SECRET_KEYS = (Fernet.generate_key().decode(),)
    settings.ALERT_NOTIFIER, settings.ALERT_EMAIL_TO = "email", ["ops@example.com"]
    monkeypatch.setitem(alerts.THRESHOLDS, Alert.Kind.FETCH_FAILING, 1)  # open at once
    credential = Credential(name="acme-api")
    credential.set_secret(SECRET)
    credential.save()
    with vendor(ECHOES[preset]) as url:
        account = ProviderAccount.objects.create(name="acme", credential=credential)
        Upstream.objects.create(
            name="acme-up", account=account, kind="preset", preset=preset, endpoint_url=url,
            credential_param="key", allow_local_hosts=True, trust_provider=True,
        )  # fmt: skip
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert fetch_tasks.run_fetch(claims[0]) is None  # the vendor failed
        assert (url.asked and SECRET in str(url.asked)) or quote(SECRET, safe="") in url.asked[0]
    alert = Alert.objects.get()
    assert alert.opened_at is not None
    if preset != "webshare_list":  # Webshare's errors are its HTTP status; its body is no error
        assert "[redacted]" in alert.detail, alert.detail
    places = {
        "the alert's detail": alert.detail,
        "the log": "\n".join(r.getMessage() for r in caplog.records),
        "the email": "\n".join(f"{m.subject}\n{m.body}" for m in mail.outbox),
    }
    assert mail.outbox, "the alert was not notified"
    client.force_login(boss)
    for page in ("/admin/config/alert/", f"/admin/config/alert/{alert.pk}/change/",
                 "/admin/console/", "/admin/console/?part=live"):  # fmt: skip
        response = client.get(page)
        assert response.status_code == 200, page
        places[page] = response.content.decode()
    for where, text in places.items():
        assert not leaks(text), f"the credential is in {where}"


def test_the_console_shows_alert_details_only_to_those_who_may_view_alerts(client):
    account = ProviderAccount.objects.create(name="acme")
    upstream = Upstream.objects.create(
        name="acme-up", account=account, kind="preset", preset="webshare_list",
        endpoint_url="http://x.test/",
    )  # fmt: skip
    now = fetch_tasks.now()
    alert = Alert.objects.create(upstream=upstream, kind=Alert.Kind.FETCH_FAILING, failures=3,
                         first_failed_at=now, last_failed_at=now, opened_at=now,
                         detail="vendor error 113: the caller is not whitelisted")  # fmt: skip
    staff = console_user("desk", "view_console", password="pw-desk-1")
    client.force_login(staff)
    for page in ("/admin/console/", "/admin/console/?part=live"):
        text = client.get(page).content.decode()
        assert f'data-alert="{alert.pk}"' in text, page  # the alert is listed, its detail not
        assert "not whitelisted" not in text, page
    staff.user_permissions.add(Permission.objects.get(codename="view_alert"))
    staff = get_user_model().objects.get(pk=staff.pk)  # permissions are cached per object
    client.force_login(staff)
    assert "not whitelisted" in client.get("/admin/console/").content.decode()
