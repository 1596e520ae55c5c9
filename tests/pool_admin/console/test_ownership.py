"""The console's ownership page: live worker sessions with their snapshots, report age and
freshness (explained); one worker's assignments and drain tickets with their bound snapshot and
age; the configured worker groups and workers beside the sessions, in a fixed few queries."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from pool_admin.bootstrap import get_pool
from pool_admin.config.models import GatewayWorker, WorkerGroup, WorkerToken
from pool_admin.console import groups, ownership
from pool_admin.console.groups import fleet
from pool_admin.console.ownership import FRESHNESS
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


def group_cell(html: str, group: str, name: str) -> str:
    return cell(html, "data-group", group, name)


def test_each_session_with_its_group_and_the_configured_workers_without_one(client, staff, world):
    """Beside the pool's sessions, PostgreSQL's configuration: a live session's group (or that
    no worker of its name is configured), and the enabled workers with no session."""
    _, token = WorkerToken.objects.issue(GatewayWorker.objects.get(name="edge-1"))
    html = client.get(PAGE).content.decode()
    assert cell(html, "data-worker", "edge-1", "group") == "edge"
    assert cell(html, "data-worker", "edge-2", "group") == "edge"
    assert cell(html, "data-worker", "edge-3", "group") == "not configured"
    # edge-4 is enabled and has no session; edge-5 is disabled (expected to have none).
    assert re.findall(r'<tr data-idle-worker="([^"]+)"', html) == ["edge-4"]
    assert cell(html, "data-idle-worker", "edge-4", "session") == "no session"
    assert token not in html and PROXY_PASSWORD not in html


def test_the_worker_groups_with_what_their_live_workers_hold(client, staff, world):
    html = client.get(PAGE).content.decode()
    assert re.findall(r'<tr data-group="([^"]+)"', html) == ["edge", "spare"]
    assert group_cell(html, "edge", "target") == "40"
    assert group_cell(html, "edge", "configured") == "4 (1 disabled)"
    assert group_cell(html, "edge", "members") == (
        "edge-1, edge-2, edge-4 (no session), edge-5 (disabled)"
    )
    # edge-1 and edge-2 are live (edge-3's session is no configured worker's); edge-1 holds
    # one proxy and drains the other.
    assert (group_cell(html, "edge", "live"), group_cell(html, "edge", "held"),
            group_cell(html, "edge", "draining")) == ("2", "1", "1")  # fmt: skip
    assert (group_cell(html, "spare", "target"), group_cell(html, "spare", "configured"),
            group_cell(html, "spare", "live"), group_cell(html, "spare", "members")) == (
        "0", "0", "0", "-")  # fmt: skip
    assert not re.search(r'data-figure="[a-z-]*(partial|uncertain)"', html)  # all shown
    live = client.get(PAGE, {"part": "live"}).content.decode()  # the refresh brings them too
    assert 'data-group="edge"' in live and 'data-idle-worker="edge-4"' in live


def test_the_freshness_states_are_explained(client, staff, world):
    html = client.get(PAGE).content.decode()
    legend = html[html.index('id="console-freshness-legend"') :].split("</dl>")[0]
    for state, meaning in FRESHNESS.items():
        assert f">{state}</span></dt><dd>{escape(meaning)}</dd>" in legend
    row = html[html.index('data-worker="edge-2"') :].split("</tr>")[0]
    assert f'title="{escape(FRESHNESS["failing closed"])}"' in row
    assert "fails closed" in FRESHNESS["stale"] and "report TTL (30 s)" in FRESHNESS["fresh"]


def test_the_configuration_is_read_in_a_fixed_number_of_queries(
    client, staff, world, django_assert_num_queries
):
    """Four queries for the groups and workers whatever their number: the page's queries do
    not grow with the fleet."""
    with CaptureQueriesContext(connection) as small:
        client.get(PAGE)
    for g in range(20):
        group = WorkerGroup.objects.create(name=f"g{g}", target_capacity=g)
        for w in range(5):
            GatewayWorker.objects.create(name=f"g{g}-w{w}", group=group, enabled=w != 0)
    with CaptureQueriesContext(connection) as large:
        html = client.get(PAGE).content.decode()
    assert len(large.captured_queries) == len(small.captured_queries)
    assert group_cell(html, "g3", "configured") == "5 (1 disabled)"
    live = get_pool().worker_sessions(10)
    with django_assert_num_queries(4):
        fleet(live)
    with django_assert_num_queries(2):  # the pool could not be read: the configuration alone
        fleet(None)


def test_every_list_is_bounded_and_says_so(client, staff, world, monkeypatch):
    monkeypatch.setattr(groups, "MAX_GROUPS", 1)
    monkeypatch.setattr(groups, "MAX_WORKERS", 2)
    monkeypatch.setattr(groups, "MAX_IDLE", 1)
    monkeypatch.setattr(ownership, "MAX_WORKERS", 2)  # the pool's sessions: edge-3, edge-2
    edge = WorkerGroup.objects.get(name="edge")
    GatewayWorker.objects.create(name="edge-6", group=edge)
    html = client.get(PAGE).content.decode()
    assert re.findall(r'<tr data-group="([^"]+)"', html) == ["edge"]
    assert 'data-figure="groups-partial"' in html
    assert group_cell(html, "edge", "members") == "edge-1 (no session), edge-2"  # 2 listed
    assert group_cell(html, "edge", "configured") == "5 (1 disabled)"  # the count is whole
    assert 'data-figure="workers-partial"' in html
    # edge-1's session is past the page: it is listed without one, and the page says it may
    # have one; the idle list stops at one of edge-1, edge-4, edge-6.
    assert re.findall(r'<tr data-idle-worker="([^"]+)"', html) == ["edge-1"]
    assert 'data-figure="idle-partial"' in html and 'data-figure="idle-uncertain"' in html
    assert group_cell(html, "edge", "live") == "1"  # edge-2 alone among the sessions listed


def test_the_configuration_stands_when_the_pool_cannot_be_read(client, staff, world, private_redis):
    from pool_admin import bootstrap

    server = private_redis()
    bootstrap.point_at(server.url, "gone")
    server.stop()
    response = client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-figure="unavailable"' in html
    assert group_cell(html, "edge", "target") == "40"
    assert group_cell(html, "edge", "live") == "-"  # unknown, not 0
    assert group_cell(html, "edge", "members") == "edge-1, edge-2, edge-4, edge-5 (disabled)"
    assert "data-idle-worker" not in html  # no one can say who has no session
