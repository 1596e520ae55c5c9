"""Idle proxies are checked again from the configuration (pool_admin/recheck_tasks.py): the dispatch
picks the upstreams whose proxies are probed, the check task takes what is due and probes it;
on real PostgreSQL and Redis, a vendor over HTTP and a real tinyproxy that stops working."""

from __future__ import annotations

import time

import pytest
from django.db.models import Sum

from activity.types import ExtractMode, ExtractRequest
from pool_admin import fetch_tasks, recheck_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import ProviderAccount, Upstream, UpstreamChecks, UpstreamQuality
from pool_admin.forward_proxies import Tinyproxy
from tests.harness.check_target import CheckTargetServer
from tests.harness.metrics import drain_metrics
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _pool(filling_pool, settings):
    # Proxies here live 5 minutes: a thousandth of that is well under the 1 s check interval,
    # so a proxy is due again a second after its check (the defaults: about 30 s).
    settings.RECHECK_LIFETIME_FRACTION = 1_000


def configure(name: str, url: str, target: CheckTargetServer, **fields) -> Upstream:
    fields.setdefault("account", ProviderAccount.objects.get_or_create(name="acme")[0])
    return Upstream.objects.create(
        name=name, kind="preset", preset="webshare_list", endpoint_url=url,
        count_param="page_size", max_size=10, allow_local_hosts=True, check_url=target.url(),
        check_timeout_ms=1000, check_interval_s=1, **fields,
    )  # fmt: skip


def test_the_dispatch_sends_a_check_for_each_upstream_whose_proxies_are_probed(target):
    configure("probed", "http://vendor.invalid/", target)
    configure("trusted", "http://vendor.invalid/", target, trust_provider=True)
    configure("disabled", "http://vendor.invalid/", target, enabled=False)
    off, _ = ProviderAccount.objects.get_or_create(name="off", enabled=False)
    configure("account-off", "http://vendor.invalid/", target, account=off)
    sent: list[str] = []
    assert recheck_tasks.dispatch_checks(sent.append) == 2
    assert sent == ["probed", "trusted"]  # a trusted provider's: unchecked and SUSPECT only
    assert recheck_tasks.policy_of(Upstream.objects.get(name="trusted")).available is False
    assert recheck_tasks.run_checks("disabled") is None
    assert recheck_tasks.run_checks("gone") is None


def test_a_proxy_that_stops_working_is_taken_out_by_its_recheck(tmp_path, target):
    with Tinyproxy(tmp_path, "demo1", "pw1") as proxy:
        port = proxy.port
        with vendor(webshare((port, "demo1", "pw1"))) as url:
            configure("acme-http", url, target)
            claims: list[dict] = []
            fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
            report = fetch_tasks.run_fetch(claims[0])
        assert report is not None and report.checks.states == {"available": 1}
        assert recheck_tasks.run_checks("acme-http").listed == 0  # just checked: not due
        time.sleep(1.1)
        before = target.requests
        passed = recheck_tasks.run_checks("acme-http")
        assert (passed.listed, passed.checks.states) == (1, {"available": 1})
        assert target.requests == before + 1  # probed through the proxy
    # The proxy is gone now (its process stopped): the next recheck finds it refusing.
    time.sleep(1.1)
    failed = recheck_tasks.run_checks("acme-http")
    assert (failed.listed, failed.checks.states) == (1, {"unhealthy": 1})
    taken = get_pool().extract(ExtractRequest("c1", count=5, mode=ExtractMode.PARTIAL))
    assert taken.proxies == ()
    assert get_pool().upstream_inventory("acme-http").managed == 0  # UNHEALTHY is not managed
    # The usage stream heard it all: the fetch, its intake check, the two rechecks.
    drain_metrics()
    # Summed over the per-minute rows: the test may cross a minute.
    checks: dict[tuple[str, str], int] = {}
    for r in UpstreamChecks.objects.all():
        checks[r.source, r.result] = checks.get((r.source, r.result), 0) + r.proxies
    assert checks == {
        ("intake", "available"): 1,
        ("recheck", "available"): 1,
        ("recheck", "unhealthy"): 1,
    }
    # Three checks, two timed: a refused connection measures no latency.
    columns = ("fetches", "received", "fetched", "became_available", "checked", "checks_timed")
    rows = UpstreamQuality.objects.filter(upstream="acme-http")
    assert rows.aggregate(**{c: Sum(c) for c in columns}) == {
        "fetches": 1,
        "received": 1,
        "fetched": 1,
        "became_available": 1,
        "checked": 3,
        "checks_timed": 2,
    }
