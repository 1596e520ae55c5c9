"""The console's ownership page: live worker sessions with their snapshots, report age and
freshness; one worker's assignments and drain tickets with their bound snapshot and age."""

from __future__ import annotations

import re

import pytest

from pool_admin.bootstrap import get_pool
from tests.harness.console_world import PROXY_PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PAGE = "/admin/console/ownership/"


def cell(html: str, key: str, value: str, name: str) -> str:
    row = html[html.index(f'{key}="{value}"') :].split("</tr>")[0]
    match = re.search(rf'data-figure="{name}"[^>]*>(.*?)</td>', row, re.S)
    assert match, (value, name)
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_sessions_with_their_snapshots_and_freshness(client, staff, world):
    html = client.get(PAGE).content.decode()
    assert re.findall(r'<tr data-worker="([^"]+)"', html) == ["edge-3", "edge-2", "edge-1"]
    assert cell(html, "data-worker", "edge-1", "freshness") == "fresh"
    assert cell(html, "data-worker", "edge-2", "freshness") == "failing closed"
    assert cell(html, "data-worker", "edge-3", "freshness") == "stale"
    epoch = get_pool().worker_assignments("edge-1", 10).epoch
    assert cell(html, "data-worker", "edge-1", "acked") == f"v1 e{epoch} c0ffee01"
    assert cell(html, "data-worker", "edge-1", "report").startswith("seq 1, ")
    assert (cell(html, "data-worker", "edge-1", "held"),
            cell(html, "data-worker", "edge-1", "draining")) == ("1", "1")  # fmt: skip
    assert cell(html, "data-worker", "edge-2", "acked") == "-"


def test_one_worker_with_its_assignments_and_tickets(client, staff, world):
    html = client.get(PAGE, {"worker": "edge-1"}).content.decode()
    held = get_pool().worker_assignments("edge-1", 10)
    shown = re.findall(r'<tr data-proxy="([^"]+)"', html)
    # The held one; the draining one is listed as a ticket (no snapshot includes it any more).
    assert shown == [a.proxy_id for a in held.assignments] == [world.owned[0]]
    draining = world.owned[1]
    assert cell(html, "data-ticket", draining, "bound") == f"v1 e{held.epoch} c0ffee01"
    assert cell(html, "data-ticket", draining, "age").endswith("s")
    assert PROXY_PASSWORD not in html
    assert client.get(PAGE, {"worker": "has space"}).status_code == 400
    nobody = client.get(PAGE, {"worker": "edge-9"}).content.decode()
    assert "The worker holds no proxy." in nobody and "No drain ticket is pending." in nobody
