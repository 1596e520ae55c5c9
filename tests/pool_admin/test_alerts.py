"""Failure alerts (pool_admin/alerts.py): opened after consecutive failures, closed by a
success, one unclosed per upstream and kind, a failing notifier only logged; and the fetch
task's own: a vendor that keeps failing opens one, its recovery closes it."""

from __future__ import annotations

import logging
import socket
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from pool_admin import alerts, fetch_tasks
from pool_admin.bootstrap import get_scheduler
from pool_admin.config.models import Alert, ProviderAccount, Upstream
from pool_admin.forward_proxies import Tinyproxy
from tests.harness.check_target import check_target
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]
FAILING = Alert.Kind.FETCH_FAILING


@pytest.fixture
def upstream():
    account = ProviderAccount.objects.create(name="acme")
    return Upstream.objects.create(
        name="acme-http", account=account, kind="preset", preset="webshare_list",
        endpoint_url="https://api.acme.example/p", allow_local_hosts=True,
    )  # fmt: skip


def test_an_alert_opens_at_its_threshold_and_closes_at_the_first_success(upstream, caplog):
    caplog.set_level(logging.WARNING, logger="pool_admin.alerts")
    for _ in range(alerts.THRESHOLDS[FAILING] - 1):
        pending = alerts.record(upstream, FAILING, failed=True, detail="fetch_failed: x")
        assert pending is not None and pending.opened_at is None
    assert not [r for r in caplog.records if "alert opened" in r.getMessage()]
    opened = alerts.record(upstream, FAILING, failed=True, detail="fetch_failed: y")
    assert opened is not None and opened.opened_at is not None and opened.failures == 3
    assert [r for r in caplog.records if "alert opened: upstream acme-http" in r.getMessage()]
    with pytest.raises(IntegrityError), transaction.atomic():  # one unclosed per kind
        Alert.objects.create(upstream=upstream, kind=FAILING, first_failed_at=timezone.now(),
                             last_failed_at=timezone.now())  # fmt: skip
    closed = alerts.record(upstream, FAILING, failed=False)
    assert closed is not None and closed.closed_at is not None
    assert alerts.record(upstream, FAILING, failed=False) is None
    assert Alert.objects.get().closed_at is not None  # kept, closed, for the record


def test_failures_that_never_reach_the_threshold_are_forgotten_at_a_success(upstream):
    alerts.record(upstream, FAILING, failed=True)
    alerts.record(upstream, FAILING, failed=False)
    assert not Alert.objects.exists()


def test_a_vendor_refusal_opens_at_once(upstream):
    alert = alerts.record(upstream, Alert.Kind.VENDOR_REFUSES, failed=True, detail="no balance")
    assert alert is not None and alert.opened_at is not None


def test_a_failing_notifier_is_logged_and_never_raised(upstream, settings, caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        settings.ALERT_NOTIFIER = "webhook"
        settings.ALERT_WEBHOOK_URL = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
        alert = alerts.record(upstream, Alert.Kind.VENDOR_REFUSES, failed=True)
    assert alert is not None and alert.opened_at is not None
    assert [r for r in caplog.records if "alert notifier webhook failed" in r.getMessage()]


@pytest.mark.redis
@pytest.mark.slow
def test_a_vendor_that_keeps_failing_opens_an_alert_and_its_recovery_closes_it(
    filling_pool, tmp_path
):
    account = ProviderAccount.objects.create(name="acme")
    with (
        Tinyproxy(tmp_path, "demo1", "pw1") as proxy,
        check_target() as target,
        vendor({"detail": "Invalid token."}) as broken,
        vendor(webshare((proxy.port, "demo1", "pw1"))) as working,
    ):
        upstream = Upstream.objects.create(
            name="acme-http", account=account, kind="preset", preset="webshare_list",
            endpoint_url=broken, allow_local_hosts=True, check_url=target.url(),
        )  # fmt: skip

        def fetch_now() -> None:
            get_scheduler().request(fetch_tasks.now(), "acme", "acme-http", timedelta(0))
            claims: list[dict] = []
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
            fetch_tasks.run_fetch(claims[0])

        for _ in range(alerts.THRESHOLDS[FAILING]):
            fetch_now()
        alert = Alert.objects.get(kind=FAILING)
        assert alert.opened_at is not None and "malformed_response" in alert.detail
        upstream.endpoint_url = working
        upstream.save()
        fetch_now()
    alert.refresh_from_db()
    assert alert.closed_at is not None


def fetch_now(account: str, upstream: str) -> None:
    """A fetch of ``upstream`` now, as beat's dispatch and the fetch task run it."""
    get_scheduler().request(fetch_tasks.now(), account, upstream, timedelta(0))
    claims: list[dict] = []
    assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
    fetch_tasks.run_fetch(claims[0])


@pytest.mark.parametrize(
    ("preset", "answer", "detail"),
    [
        # A text vendor answering 200 with nothing, again and again.
        ("kuaidaili_getdps_text", b"", "received 0, taken 0"),
        # Entries the parser cannot take: every one dropped, by its reason.
        ("webshare_list", webshare((0, "a", "b"), (70_000, "c", "d")),
         "received 0, taken 0: bad_port 2"),
    ],
)  # fmt: skip
def test_fetches_answered_with_nothing_the_pool_takes_open_an_alert(
    filling_pool, preset, answer, detail
):
    """Before: such an upstream stayed at 0 proxies with every indicator green."""
    account = ProviderAccount.objects.create(name="acme")
    with vendor(answer) as url:
        Upstream.objects.create(
            name="acme-up", account=account, kind="preset", preset=preset, endpoint_url=url,
            allow_local_hosts=True, trust_provider=True,
        )  # fmt: skip
        for _ in range(alerts.THRESHOLDS[Alert.Kind.NOTHING_TAKEN]):
            fetch_now("acme", "acme-up")
    alert = Alert.objects.get(kind=Alert.Kind.NOTHING_TAKEN)
    assert alert.opened_at is not None and alert.detail == detail
    assert not Alert.objects.filter(kind=FAILING).exists()  # the vendor answered


def test_a_fetch_the_pool_takes_from_closes_the_nothing_taken_alert(filling_pool):
    account = ProviderAccount.objects.create(name="acme")
    with vendor(webshare((0, "a", "b"))) as empty, vendor(webshare((20_001, "a", "b"))) as listing:
        upstream = Upstream.objects.create(
            name="acme-up", account=account, kind="preset", preset="webshare_list",
            endpoint_url=empty, allow_local_hosts=True, trust_provider=True,
        )  # fmt: skip
        for _ in range(alerts.THRESHOLDS[Alert.Kind.NOTHING_TAKEN]):
            fetch_now("acme", "acme-up")
        upstream.endpoint_url = listing
        upstream.save()
        fetch_now("acme", "acme-up")
    alert = Alert.objects.get(kind=Alert.Kind.NOTHING_TAKEN)
    assert alert.opened_at is not None and alert.closed_at is not None


def test_inventory_under_the_low_water_mark_after_each_fetch_opens_an_alert(filling_pool):
    """The unextracted figure is what the fetch read and added: 2 proxies, a mark of 5."""
    account = ProviderAccount.objects.create(name="acme")
    with vendor(webshare((20_001, "a", "b"), (20_002, "c", "d"))) as url:
        Upstream.objects.create(
            name="acme-up", account=account, kind="preset", preset="webshare_list",
            endpoint_url=url, allow_local_hosts=True, trust_provider=True, max_size=10,
            low_water_mark=5,
        )  # fmt: skip
        for _ in range(alerts.THRESHOLDS[Alert.Kind.LOW_INVENTORY]):
            fetch_now("acme", "acme-up")
    alert = Alert.objects.get(kind=Alert.Kind.LOW_INVENTORY)
    assert alert.opened_at is not None and alert.detail == "2 unextracted, low-water mark 5"
