"""The console's overview (pool_admin/console/): what the pool, the scheduler and the aggregates
hold, per upstream and in total, for staff only; its live part re-read on its own."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from pool_admin.bootstrap import get_pool
from tests.harness.console_world import PROXY_PASSWORD, console_user

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

OVERVIEW = "/admin/console/"


def figure(html: str, name: str, upstream: str | None = None) -> str:
    """The text of the element marked ``data-figure=name`` (in the upstream's row if given)."""
    if upstream is not None:
        html = html[html.index(f'data-upstream="{upstream}"') :].split("</tr>")[0]
    match = re.search(rf'data-figure="{name}"[^>]*>(.*?)</', html, re.S)
    assert match, (name, upstream)
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_the_overview_shows_what_the_pool_holds(client, staff, world):
    html = client.get(OVERVIEW).content.decode()
    pool = get_pool()
    for name in ("acme-us", "acme-eu"):
        slots = pool.upstream_inventory(name)
        assert figure(html, "unextracted", name) == f"{pool.inventory(name):,}"
        assert figure(html, "managed", name) == f"{slots.managed:,}"
        assert figure(html, "slots", name) == f"{slots.available_slots:,}"
    # The seeded counts themselves: 14 fetched, 2 extracted, 1 removed (terminal: neither
    # counts); of the 11 left, UNHEALTHY is not managed.
    assert (figure(html, "unextracted", "acme-us"), figure(html, "managed", "acme-us")) == (
        "11", "10")  # fmt: skip
    assert figure(html, "total-unextracted") == "14"
    assert figure(html, "lease", "acme-us").startswith("running, lease ends in")
    assert figure(html, "next-due", "acme-eu").startswith("in ")
    assert figure(html, "calls", "acme-us") == "1 / 60"  # the claim's call, of the minute's 60
    assert figure(html, "pass", "acme-us").startswith("80%")
    assert figure(html, "waste", "acme-us") == "75%"
    assert figure(html, "alerts", "acme-us") == "1" and figure(html, "alerts", "acme-eu") == "0"
    assert figure(html, "last-fetch", "acme-us").endswith("ago")
    assert figure(html, "total-fetched") == "20" and figure(html, "total-extracted") == "8"
    assert PROXY_PASSWORD not in html and "10.7." not in html  # no secret, no address


def test_the_overview_shows_what_the_gateway_holds_of_each_upstream(
    client, staff, world, monkeypatch
):
    """Per upstream, the gateway's held proxies and their connections beside the slots, from the
    one ``upstream_inventory`` read the slots come from, and its configured share."""
    pool = get_pool()
    reads: list[str] = []
    real = pool.upstream_inventory
    monkeypatch.setattr(pool, "upstream_inventory", lambda u: reads.append(u) or real(u))
    html = client.get(OVERVIEW).content.decode()
    assert sorted(reads) == ["acme-eu", "acme-us"]  # no read more than the slots already made
    for name in ("acme-us", "acme-eu"):
        inventory = real(name)
        assert figure(html, "gateway-held", name) == f"{inventory.gateway_held:,}"
        assert figure(html, "gateway-capacity", name) == f"{inventory.gateway_capacity:,}"
    # edge-1 holds two of acme-us (5 connections each); the draining one is not counted.
    assert (figure(html, "gateway-held", "acme-us"),
            figure(html, "gateway-capacity", "acme-us")) == ("1", "5")  # fmt: skip
    assert figure(html, "gateway-held", "acme-eu") == "0"
    assert figure(html, "gateway-share", "acme-us") == "30%"
    assert figure(html, "gateway-share", "acme-eu") == "50%"  # the default
    assert figure(html, "total-gateway-held") == "1"
    assert figure(html, "total-gateway-capacity") == "5"


def test_the_live_part_alone_is_rendered_for_the_refresh(client, staff, world):
    part = client.get(OVERVIEW + "?part=live")
    assert part.status_code == 200 and "no-store" in part["Cache-Control"]
    body = part.content.decode()
    assert 'data-upstream="acme-us"' in body and "<html" not in body


def test_staff_without_the_view_permission_are_refused_every_page(client, world):
    """console.view_console is checked where the console is served: without it, a staff user
    gets 403 from every page, live part and action, and no "Console" on the admin index."""
    client.force_login(console_user("desk", "operate_pool"))  # acting alone is not viewing
    target = world.owned[0]
    pages = [
        OVERVIEW,
        OVERVIEW + "?part=live",
        "/admin/console/proxies/",
        f"/admin/console/proxy/?id={target}",
        "/admin/console/ownership/",
        "/admin/console/history/",
        f"/admin/console/act/drain_proxy/?target={target}",
    ]
    for url in pages:
        assert client.get(url).status_code == 403, url
    drain = client.post("/admin/console/act/drain_proxy/", {"target": target})
    assert drain.status_code == 403
    assert get_pool().get(target).draining is False
    index = client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:console_console_changelist") not in index
    assert client.get(reverse("admin:console_console_changelist"), follow=True).status_code == 403
    # The audit of operator actions stays readable by every staff user.
    assert client.get(reverse("admin:console_operatoraction_changelist")).status_code == 200


def test_the_console_is_on_the_admin_index_and_for_staff_only(client, staff, world):
    index = client.get(reverse("admin:index")).content.decode()
    assert "Console" in index
    assert client.get(reverse("admin:console_console_changelist")).url == OVERVIEW
    client.logout()
    assert client.get(OVERVIEW).status_code == 302  # to the login page
    nobody = get_user_model().objects.create_user("visitor", password="a-Long-pass-123")
    client.force_login(nobody)
    refused = client.get(OVERVIEW)
    assert refused.status_code == 302 and "/login/" in refused.url
    assert client.get(OVERVIEW + "?part=live").status_code == 302


def test_an_upstream_the_pool_cannot_read_says_so_and_the_page_stands(
    client, staff, world, private_redis
):
    from pool_admin import bootstrap

    server = private_redis()
    bootstrap.point_at(server.url, "gone")  # the pool and the scheduler
    server.stop()
    response = client.get(OVERVIEW)
    assert response.status_code == 200
    html = response.content.decode()
    assert figure(html, "unavailable", "acme-us").startswith("unavailable: ")
    assert "could not be read now" in html
    assert figure(html, "gateway-share", "acme-us") == "30%"  # configured: still known
