"""The admin's view of outcome quality: last hour per upstream, and the read-only rows."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from pool_admin.config.models import ProviderAccount, Upstream, UpstreamQuality
from pool_admin.metrics.retention import minute_of

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

UPSTREAMS = reverse("admin:config_upstream_changelist")
QUALITY = reverse("admin:config_upstreamquality_changelist")


@pytest.fixture
def boss(client):
    user = get_user_model().objects.create_superuser("boss", password="a-Long-pass-123")
    client.force_login(user)
    return user


def upstream(name: str) -> Upstream:
    account, _ = ProviderAccount.objects.get_or_create(name="acme")
    return Upstream.objects.create(
        name=name, account=account, endpoint_url="https://acme.example/p"
    )


def test_the_upstream_list_shows_the_last_hours_quality(client, boss):
    upstream("acme-us")
    upstream("acme-eu")
    now = minute_of(timezone.now())
    UpstreamQuality.objects.create(upstream="acme-us", period_start=now, ok=6, banned=2,
                                   fetched=40, expired_used=3, expired_unused=1)  # fmt: skip
    five_ago = now - timedelta(minutes=5)
    UpstreamQuality.objects.create(upstream="acme-us", period_start=five_ago, ok=1, timeout=1)
    UpstreamQuality.objects.create(upstream="acme-us", period_start=now - timedelta(hours=2), ok=50)
    html = client.get(UPSTREAMS).content.decode()
    for header in ("Reports (1 h)", "OK (1 h)", "Banned (1 h)", "Fetched (1 h)", "Wasted (1 h)"):
        assert header in html
    row = html[html.index(">acme-us<") :].split("</tr>")[0]
    assert ">10<" in row and ">70%<" in row and ">2<" in row  # 10 reports, 7 ok, 2 banned
    assert ">40<" in row and ">25% of 4<" in row  # of 4 that expired, 1 was never used
    quiet = html[html.index(">acme-eu<") :].split("</tr>")[0]
    assert ">0<" in quiet and ">-<" in quiet
    assert client.get(UPSTREAMS + "?o=10").status_code == 200  # sortable by reports


def test_the_upstream_list_costs_the_same_queries_for_any_number_of_rows(client, boss):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(UPSTREAMS).status_code == 200
        return len(ctx.captured_queries)

    upstream("u0")
    UpstreamQuality.objects.create(upstream="u0", period_start=minute_of(timezone.now()), ok=1)
    one = queries()
    for i in range(1, 8):
        upstream(f"u{i}")
        UpstreamQuality.objects.create(
            upstream=f"u{i}", period_start=minute_of(timezone.now()), ok=i
        )
    assert queries() == one  # no query per row


def test_quality_rows_are_read_only_and_filterable(client, boss):
    row = UpstreamQuality.objects.create(
        upstream="acme-us", period_start=minute_of(timezone.now()), ok=3, auth_failed=1
    )
    html = client.get(QUALITY).content.decode()
    assert "acme-us" in html and ">4<" in html
    assert client.get(QUALITY + "?upstream=acme-us").status_code == 200
    assert "By period start" in html and "By upstream" in html
    assert client.get(reverse("admin:config_upstreamquality_add")).status_code == 403
    change = client.post(reverse("admin:config_upstreamquality_change", args=[row.pk]), {"ok": 9})
    assert change.status_code == 403
    row.refresh_from_db()
    assert row.ok == 3
    delete = reverse("admin:config_upstreamquality_delete", args=[row.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert UpstreamQuality.objects.filter(pk=row.pk).exists()
