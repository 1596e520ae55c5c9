"""Operator actions from the console: each confirmed (GET) then done (POST), through the pool's
ports, with an audit entry (who, when, what, what the pool answered); refused with a reason and
no change (and no entry) when it cannot be done; only for operators with the permission."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.errors import OwnershipConflict
from activity.inspection import BrowseQuery
from activity.types import ProxyState
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.models import Alert
from pool_admin.console.models import OperatorAction

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def act(client, kind: str, target: str, confirm: bool = True):
    url = f"/admin/console/act/{kind}/"
    page = client.get(url, {"target": target})
    if not confirm or page.status_code != 200:
        return page
    return client.post(url, {"target": target})


def audit() -> list[tuple[str, str, str]]:
    return [(a.username, a.kind, a.target) for a in OperatorAction.objects.order_by("at")]


def test_begin_drain_of_a_proxy_confirmed_then_done_and_audited(operator_client, world):
    pid = world.owned[0]
    confirm = operator_client.get("/admin/console/act/drain_proxy/", {"target": pid})
    assert confirm.status_code == 200 and "worker edge-1 stops taking" in confirm.content.decode()
    assert get_pool().get(pid).draining is False  # a look changes nothing
    done = operator_client.post("/admin/console/act/drain_proxy/", {"target": pid})
    assert done.status_code == 302 and done.url.endswith(f"?id={pid}")
    assert get_pool().get(pid).draining is True
    assert audit() == [("boss", "drain_proxy", pid)]
    assert OperatorAction.objects.get().outcome.startswith("draining on worker edge-1")


def test_remove_a_proxy_and_drain_a_worker(operator_client, world):
    act(operator_client, "remove_proxy", "acme-us-p6")
    detail = get_pool().proxy_detail("acme-us-p6")
    assert detail.summary.state is ProxyState.REMOVED and detail.failure_reason == "operator"
    act(operator_client, "drain_worker", "edge-1")
    assert get_pool().worker_assignments("edge-1", 10).assignments == ()  # all draining
    assert [kind for _, kind, _ in audit()] == ["remove_proxy", "drain_worker"]


def test_fetch_now_and_close_an_alert(operator_client, world):
    act(operator_client, "fetch_now", "acme-eu")
    assert get_scheduler().status(world.now, "acme", "acme-eu").requested_at is not None
    alert = Alert.objects.get(closed_at__isnull=True)
    act(operator_client, "close_alert", str(alert.pk))
    alert.refresh_from_db()
    assert alert.closed_at is not None
    assert [kind for _, kind, _ in audit()] == ["fetch_now", "close_alert"]


def test_an_alert_closed_meanwhile_is_closed_once(operator_client, world, monkeypatch):
    """Two operators confirm the same close; the second POST, after the first, is refused and
    records nothing, even when it read the alert open just before."""
    from pool_admin.console import actions

    alert = Alert.objects.get(closed_at__isnull=True)
    stale = Alert.objects.select_related("upstream").get(pk=alert.pk)  # read while open
    act(operator_client, "close_alert", str(alert.pk))
    monkeypatch.setattr(actions, "_open_alert", lambda _: stale)
    again = operator_client.post("/admin/console/act/close_alert/", {"target": str(alert.pk)},
                                 follow=True)  # fmt: skip
    assert any("closed already" in str(m) for m in again.context["messages"])
    assert [kind for _, kind, _ in audit()] == ["close_alert"]


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("drain_proxy", "acme-us-p4"),  # not assigned to a worker
        ("drain_proxy", "has space"),
        ("remove_proxy", "acme-us-p99"),
        ("drain_worker", "edge-9"),
        ("fetch_now", "nope"),
        ("close_alert", "12345"),
        ("close_alert", "x"),
        ("remove_proxy", "a&b#c\nd"),  # sent back to its page with the target quoted
    ],
)
def test_what_cannot_be_done_is_refused_with_a_reason_and_changes_nothing(
    operator_client, world, kind, target
):
    before = get_pool().browse(BrowseQuery(limit=200)).proxies
    refused = operator_client.get(f"/admin/console/act/{kind}/", {"target": target}, follow=True)
    assert refused.redirect_chain  # back to the page it came from, with the reason said
    said = [str(m) for m in refused.context["messages"]]
    assert len(said) == 1 and said[0].count(":") >= 1
    again = operator_client.post(f"/admin/console/act/{kind}/", {"target": target}, follow=True)
    assert [str(m) for m in again.context["messages"]] == said
    assert OperatorAction.objects.count() == 0
    assert get_pool().browse(BrowseQuery(limit=200)).proxies == before


def test_acting_needs_the_permission_and_a_post(client, staff, world):
    assert act(client, "drain_proxy", world.owned[0], confirm=False).status_code == 403
    assert (
        client.post("/admin/console/act/drain_proxy/", {"target": world.owned[0]}).status_code
        == 403
    )
    assert get_pool().get(world.owned[0]).draining is False
    assert client.get("/admin/console/act/nothing/").status_code == 404
    assert OperatorAction.objects.count() == 0


def test_a_worker_drain_that_fails_midway_records_what_it_did(operator_client, world, monkeypatch):
    pool = get_pool()
    calls = []
    real = pool.begin_drain

    def second_fails(pid, worker, epoch):
        calls.append(pid)
        if len(calls) == 2:
            raise OwnershipConflict("changed meanwhile", reason="wrong_epoch")
        return real(pid, worker, epoch)

    pool.assign(world.now, "acme-us-p5", "edge-1", timedelta(minutes=5))
    monkeypatch.setattr(pool, "begin_drain", second_fails)
    act(operator_client, "drain_worker", "edge-1")
    [entry] = OperatorAction.objects.all()
    assert entry.outcome.startswith("1 proxies draining; 1 could not be")
