"""The console's proxy pages: bounded pages of the pool with filters and a cursor, one proxy
whole; bad input answered on the page with a 400; no password in any of it."""

from __future__ import annotations

import re

import pytest

from activity.inspection import BrowseQuery
from activity.types import ProxyState
from pool_admin.bootstrap import get_pool
from pool_admin.console import proxies
from tests.harness.console_world import PROXY_PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PAGE = "/admin/console/proxies/"
ONE = "/admin/console/proxy/"


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-proxy="([^"]+)"', html)


def test_the_pool_page_by_page_with_its_filters(client, staff, world):
    html = client.get(PAGE).content.decode()
    every = [p.proxy_id for p in get_pool().browse(BrowseQuery(limit=200)).proxies]
    assert rows(html) == every and len(every) == 17  # 14 + 3, in expiry order
    assert PROXY_PASSWORD not in html and "co***" in html  # the login's hint only
    us = rows(client.get(PAGE + "?upstream=acme-eu").content.decode())
    assert us == ["acme-eu-p0", "acme-eu-p1", "acme-eu-p2"]
    extracted = client.get(PAGE + "?state=extracted").content.decode()
    assert sorted(rows(extracted)) == sorted(world.extracted)
    assert "client crawler-1" in extracted
    draining = client.get(PAGE + "?state=draining").content.decode()
    assert rows(draining) == [world.owned[1]] and "worker edge-1" in draining
    assert rows(client.get(PAGE + "?region=de").content.decode()) == us
    assert rows(client.get(PAGE + "?region=DE").content.decode()) == us  # in any case
    # Every state the pool counts, each filter showing exactly what the pool holds in it.
    for state in ProxyState:
        if state is ProxyState.EXPIRED:  # never held: gone at its expiry
            continue
        shown = rows(client.get(PAGE, {"state": state.value}).content.decode())
        held = get_pool().browse(BrowseQuery(state=state, limit=200)).proxies
        assert shown == [p.proxy_id for p in held] and shown, state


def test_paging_with_the_cursor_and_a_partial_page(client, staff, world, monkeypatch):
    monkeypatch.setattr(proxies, "PAGE_SIZE", 4)
    first = client.get(PAGE).content.decode()
    assert len(rows(first)) == 4
    nxt = re.search(r'href="([^"]+)" data-figure="next"', first).group(1).replace("&amp;", "&")
    second = client.get(PAGE + nxt).content.decode()
    assert len(rows(second)) == 4 and not set(rows(first)) & set(rows(second))
    monkeypatch.setattr(proxies, "BROWSE_BUDGET", 3)
    # The one FETCHED proxy sorts after the first three entries read (acme-eu-p0..2).
    sparse = client.get(PAGE + "?state=fetched").content.decode()
    assert rows(sparse) == [] and 'data-figure="partial"' in sparse


@pytest.mark.parametrize(
    "query", ["?upstream=nope", "?state=gone", "?region=bell%07", "?after=not-a-cursor"]
)
def test_bad_filters_are_said_on_the_page_with_a_400(client, staff, world, query):
    response = client.get(PAGE + query)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-figure="filter-errors"' in html and rows(html) == []


def test_one_proxy_whole_and_no_password(client, staff, world):
    owned = world.owned[1]
    html = client.get(ONE, {"id": owned}).content.decode()
    assert "draining" in html and "worker edge-1, epoch" in html
    assert PROXY_PASSWORD not in html
    assert client.get(ONE, {"id": "acme-us-p99"}).status_code == 404
    assert client.get(ONE, {"id": "has space"}).status_code == 400
