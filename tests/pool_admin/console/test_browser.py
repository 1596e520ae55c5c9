"""The console in a real browser (headless Debian chromium, Playwright), against a live server
on real Redis and PostgreSQL: log in, open each page, the figures shown are what the pool
holds, the page refreshes itself without a reload, a non-staff user is refused, no secret in
any page. Screenshots of every page: test-artifacts/console/ (tests/harness/browser.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from activity import ExtractFilters, ExtractMode, ExtractRequest
from activity.inspection import BrowseQuery
from pool_admin.bootstrap import get_pool
from pool_admin.console.models import OperatorAction
from tests.harness.browser import log_in, screenshot
from tests.harness.console_world import PROXY_PASSWORD, console_user, seed_world

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the live server's threads see what is committed
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.browser,
    pytest.mark.slow,
]

PASSWORD = "a-Long-pass-123"


@pytest.fixture
def world(filling_pool, transactional_db):
    return seed_world()


@pytest.fixture
def operator(transactional_db):
    """Staff who may view the console and act on the pool."""
    return console_user("op", "view_console", "operate_pool", password=PASSWORD)


def figure(page, name: str, upstream: str | None = None) -> str:
    scope = f'tr[data-upstream="{upstream}"] ' if upstream else ""
    return page.inner_text(f'{scope}[data-figure="{name}"]').strip()


def test_an_operator_opens_the_overview_and_it_follows_the_pool(page, live_server, world, operator):
    log_in(page, live_server.url, "op", PASSWORD)
    page.click("text=Console")
    page.wait_for_selector("#console-upstreams")
    assert page.url.endswith("/admin/console/")
    pool = get_pool()
    for name in ("acme-us", "acme-eu"):
        assert figure(page, "unextracted", name) == f"{pool.inventory(name):,}"
        inventory = pool.upstream_inventory(name)
        assert figure(page, "managed", name) == f"{inventory.managed:,}"
        assert figure(page, "gateway-capacity", name) == f"{inventory.gateway_capacity:,}"
    assert figure(page, "total-unextracted") == "14"
    assert figure(page, "gateway-share", "acme-us") == "30%"
    screenshot(page, "overview")
    assert PROXY_PASSWORD not in page.content()

    # The page refreshes its live part on its own, without a reload.
    page.evaluate("window.notReloaded = true")
    page.select_option("#console-interval", "2")
    pool.extract(ExtractRequest("crawler-1", 3, ExtractMode.PARTIAL,
                                filters=ExtractFilters(upstream="acme-us")))  # fmt: skip
    # Playwright's expect polls from outside the page: the page's CSP (no eval) stays on.
    cell = page.locator('tr[data-upstream="acme-us"] [data-figure="unextracted"]')
    expect(cell).to_have_text("8", timeout=8_000)
    assert page.evaluate("window.notReloaded") is True
    assert page.console_errors == []  # no script error, nothing the CSP refused, no 404
    assert figure(page, "total-unextracted") == "11"
    # The interval chosen is kept for the next visit.
    page.reload()
    assert page.input_value("#console-interval") == "2"


def test_an_operator_pages_through_the_proxies_and_opens_one(page, live_server, world, operator):
    log_in(page, live_server.url, "op", PASSWORD)
    page.goto(f"{live_server.url}/admin/console/")
    page.click(".console-tabs >> text=Proxies")
    page.wait_for_selector("#console-proxies")
    shown = page.locator("#console-proxies tbody tr[data-proxy]")
    expected = [p.proxy_id for p in get_pool().browse(BrowseQuery(limit=200)).proxies]
    assert [shown.nth(i).get_attribute("data-proxy") for i in range(shown.count())] == expected
    screenshot(page, "proxies")
    assert PROXY_PASSWORD not in page.content()
    page.select_option("#id_state", "draining")
    page.click("#console-filters input[type=submit]")
    page.wait_for_selector("#console-proxies")
    assert shown.count() == 1 and shown.first.get_attribute("data-proxy") == world.owned[1]
    screenshot(page, "proxies-draining")
    shown.first.locator("a").click()
    page.wait_for_selector("#console-proxy")
    assert page.inner_text('[data-figure="state"]') == "draining"
    assert page.inner_text('[data-figure="owner"]').startswith("worker edge-1, epoch")
    assert PROXY_PASSWORD not in page.content()
    screenshot(page, "proxy")


def test_an_operator_sees_the_workers_and_one_worker_s_tickets(page, live_server, world, operator):
    log_in(page, live_server.url, "op", PASSWORD)
    page.goto(f"{live_server.url}/admin/console/")
    page.click(".console-tabs >> text=Ownership")
    page.wait_for_selector("#console-workers")
    fresh = page.locator('tr[data-worker="edge-1"] [data-figure="freshness"]')
    assert fresh.inner_text() == "fresh"
    assert page.inner_text('tr[data-worker="edge-2"] [data-figure="freshness"]') == "failing closed"
    assert fresh.locator("span").get_attribute("title").startswith("Its last runtime report")
    expect(page.locator("#console-freshness-legend")).to_be_visible()
    assert page.inner_text('tr[data-worker="edge-3"] [data-figure="group"]') == "not configured"
    assert page.inner_text('tr[data-idle-worker="edge-4"] [data-figure="session"]') == "no session"
    assert page.inner_text('tr[data-group="edge"] [data-figure="live"]') == "2"
    screenshot(page, "ownership")
    page.click('tr[data-worker="edge-1"] a')
    page.wait_for_selector("#console-tickets")
    bound = page.inner_text(f'tr[data-ticket="{world.owned[1]}"] [data-figure="bound"]')
    assert bound.startswith("v1 e")
    assert PROXY_PASSWORD not in page.content()
    screenshot(page, "ownership-worker")


def test_the_history_charts_render_with_their_data(page, live_server, world, operator):
    log_in(page, live_server.url, "op", PASSWORD)
    page.goto(f"{live_server.url}/admin/console/")
    page.click(".console-tabs >> text=History")
    page.wait_for_selector("#chart-fetched")
    page.select_option("#id_window", "1h")
    page.click("#console-history-filters input[type=submit]")
    page.wait_for_selector("#chart-fetched")
    page.wait_for_load_state("networkidle")
    # The Chart.js chart drawn on the canvas holds the aggregates' figures.
    drawn = page.evaluate(
        "() => Object.fromEntries(['fetched', 'extracts', 'checks', 'expired'].map((id) => "
        "[id, Chart.getChart(document.getElementById('chart-' + id)).data.datasets.map("
        "(d) => d.data.reduce((a, b) => a + (b || 0), 0))]))"
    )
    assert drawn["fetched"] == [20, 16] and drawn["extracts"][0] == 8
    assert sorted(drawn["checks"]) == [2, 8] and drawn["expired"] == [3, 1]
    assert page.locator("#chart-fetched").bounding_box()["height"] > 100
    assert page.console_errors == []
    screenshot(page, "history")


def test_an_action_is_confirmed_done_and_audited(page, live_server, world, operator):
    log_in(page, live_server.url, "op", PASSWORD)
    pid = world.owned[0]
    page.goto(f"{live_server.url}/admin/console/proxy/?id={pid}")
    page.click("#action-drain")
    page.wait_for_selector("#console-confirm")
    assert "worker edge-1 stops taking" in page.inner_text('[data-figure="preview"]')
    screenshot(page, "action-confirm")
    assert get_pool().get(pid).draining is False  # nothing done before the confirmation
    page.click("#console-confirm-yes")
    page.wait_for_selector("#console-proxy")
    assert "Begin drain for a proxy: draining on worker edge-1" in page.inner_text(".messagelist")
    assert page.inner_text('[data-figure="state"]') == "draining"
    assert get_pool().get(pid).draining is True
    [entry] = OperatorAction.objects.all()
    assert (entry.username, entry.kind, entry.target) == ("op", "drain_proxy", pid)
    screenshot(page, "action-done")
    page.goto(f"{live_server.url}/admin/console/operatoraction/")
    assert pid in page.inner_text("#result_list")
    screenshot(page, "audit")


def test_a_user_who_is_not_staff_is_refused(page, live_server, world, transactional_db):
    get_user_model().objects.create_user("visitor", password=PASSWORD)
    log_in(page, live_server.url, "visitor", PASSWORD)
    page.goto(f"{live_server.url}/admin/console/")
    assert "/admin/login/" in page.url
    assert page.query_selector("#console-upstreams") is None
    screenshot(page, "refused")
