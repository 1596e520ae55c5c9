"""The gateway control API (pool_admin/api/gateway_views.py) driven by a simulated worker over
the real API, with the real ownership manager's ticks between its calls: sessions and fencing,
the conditional snapshot, its ACK, reports and every refusal's code, and a drain from its
beginning to the release, in the ADR's order."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from activity import HealthUpdate, ProxyState
from gateway_runtime.wire import ClientTraffic, ReportEntry, SnapshotAck, verify
from gateway_runtime.wire.limits import OTHER
from pool_admin import bootstrap
from pool_admin.config.models import ApiKey, GatewayActivity, GatewayTraffic
from pool_admin.gateway_tasks import run_ownership_tick
from pool_admin.localservices import free_port
from tests.harness.metrics import drain_metrics
from tests.pool_admin.api.conftest import PROXY_PASSWORD
from tests.pool_admin.api.simulated_worker import BASE, SimulatedWorker

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert (body["status"], body["code"]) == (status, code), body
    return body


@pytest.fixture
def gateway(make_worker, make_client, seed, upstreams, pool_clock):
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    w = make_worker()
    shop = make_client("shop", gateway_enabled=True, allowed=("acme-us",))
    ids = seed(n=3)

    def tick():
        report = run_ownership_tick(pool_clock)
        assert report is not None
        return report.groups["edge-us"]

    return SimpleNamespace(
        w=w, shop=shop, ids=sorted(ids), worker=SimulatedWorker(w.plaintext), tick=tick
    )


def test_a_worker_opens_fetches_verifies_acks_and_reports(gateway):
    worker = gateway.worker
    opened = worker.open()
    assert opened.status_code == 200, opened.content
    session = json.loads(opened.content)
    assert session["generation"] >= 1
    assert session["heartbeat_interval_s"] < session["max_staleness_s"]
    assert gateway.tick().assigned == 3

    fetched = worker.fetch()
    assert fetched.status_code == 200, fetched.content
    assert fetched["Content-Type"] == "application/json"
    assert fetched["Cache-Control"] == "no-store"
    snapshot = worker.snapshot
    assert [p.proxy_id for p in snapshot.proxies] == gateway.ids
    assert snapshot.version == 1
    assert all(0 < p.assignment_epoch <= snapshot.epoch for p in snapshot.proxies)
    # One login shared by the three proxies: sent once.
    assert [(c.ref, c.username, c.password) for c in snapshot.credentials] == [
        ("c1", "user-1", PROXY_PASSWORD)
    ]
    assert {p.credential_ref for p in snapshot.proxies} == {"c1"}
    (shop,) = snapshot.clients
    assert (shop.name, shop.allowed_upstreams) == ("shop", frozenset({"acme-us"}))
    assert any(verify(gateway.shop.plaintext, v) for v in shop.verifiers)
    assert gateway.shop.plaintext not in fetched.content.decode()
    assert gateway.shop.key.key_hash not in fetched.content.decode()

    unchanged = worker.fetch()
    assert unchanged.status_code == 304
    assert unchanged["ETag"] == worker.etag and not unchanged.content

    acked = worker.ack()
    assert acked.status_code == 200, acked.content
    assert json.loads(acked.content) == {"acked_version": 1}

    worker.active = {gateway.ids[0]: 2}
    first = worker.report()
    assert first.status_code == 200, first.content
    assert json.loads(first.content) == {"replayed": False, "released": []}
    again = worker.report(worker.report_body(sequence=1))
    assert json.loads(again.content)["replayed"] is True
    runtime = bootstrap.get_pool().read_runtime("edge-1")
    assert runtime is not None and runtime.sequence == 1
    assert {e.proxy_id: e.active for e in runtime.entries}[gateway.ids[0]] == 2


def test_the_traffic_a_report_carries_is_counted_once_per_group_client_and_upstream(gateway):
    worker = gateway.worker
    worker.open()
    gateway.tick()
    worker.sync()
    carried = (
        ClientTraffic("shop", "acme-us", 120, 4, 4_000, 90_000, 1, 0, 2, 0),
        ClientTraffic(OTHER, "acme-us", requests=7),
        ClientTraffic("nobody", "acme-us", requests=9),  # no such API client: left out
    )
    body = worker.report_body(traffic=carried, refused_snapshots=1)
    assert worker.report(body).status_code == 200
    assert json.loads(worker.report(body).content)["replayed"] is True  # not counted again
    next_body = worker.report_body(traffic=carried[:1], refused_snapshots=1)
    assert worker.report(next_body).status_code == 200
    drain_metrics()
    columns = ("requests", "tunnels", "bytes_up", "bytes_down", "failed_connect",
               "failed_upstream", "errors")  # fmt: skip
    rows: dict[tuple[str, str, str], list[int]] = {}
    for r in GatewayTraffic.objects.values("worker_group", "client", "upstream", *columns):
        sums = rows.setdefault((r["worker_group"], r["client"], r["upstream"]), [0] * 7)
        for i, column in enumerate(columns):
            sums[i] += r[column]
    assert rows == {
        ("edge-us", "shop", "acme-us"): [240, 8, 8_000, 180_000, 2, 4, 6],
        ("edge-us", OTHER, "acme-us"): [7, 0, 0, 0, 0, 0, 0],
    }
    refused = GatewayActivity.objects.filter(worker_group="edge-us")
    assert sum(r.snapshots_refused for r in refused) == 2


def test_each_rule_breaking_report_is_refused_with_its_code(gateway):
    worker = gateway.worker
    worker.open()
    gateway.tick()
    worker.sync()
    held = gateway.ids[0]
    epoch = worker.epochs[held]
    assert worker.report().status_code == 200
    assert worker.report().status_code == 200  # sequence 2

    busy = (ReportEntry(held, epoch, 1, 0),)
    problem(worker.report(worker.report_body(sequence=2, entries=busy)), 409, "sequence_conflict")
    problem(worker.report(worker.report_body(sequence=4)), 409, "sequence_gap")
    problem(worker.report(worker.report_body(sequence=1, entries=())), 409, "sequence_regression")
    problem(worker.report(worker.report_body(version=9)), 409, "stale_snapshot")
    problem(
        worker.report(worker.report_body(epoch=worker.snapshot.epoch + 1)), 409, "stale_snapshot"
    )
    mismatch = problem(
        worker.report(worker.report_body(entries=(ReportEntry(held, epoch + 1, 1, 0),))),
        409,
        "ownership_mismatch",
    )
    assert mismatch["proxy_ids"] == [held]
    stranger = ReportEntry("acme-us-unknown", epoch, 1, 0)
    problem(worker.report(worker.report_body(entries=(stranger,))), 409, "ownership_mismatch")

    post = worker.client.post
    headers = {"HTTP_GATEWAY_SESSION": worker.session_id}
    malformed = post(f"{BASE}/reports", b'{"wire":1}', content_type="application/json", **headers)
    assert "is missing" in problem(malformed, 400, "invalid_request")["detail"]
    problem(post(f"{BASE}/reports", b"x", content_type="text/plain", **headers), 415,
            "unsupported_media_type")  # fmt: skip
    problem(post(f"{BASE}/reports", b"{}", content_type="application/json"), 400, "invalid_request")

    # Nothing refused changed anything: the next report in sequence is taken.
    worker.active = {held: 1}
    assert worker.report().status_code == 200
    assert bootstrap.get_pool().read_runtime("edge-1").sequence == 3


def test_an_ack_must_name_the_snapshot_last_issued(gateway):
    worker = gateway.worker
    worker.open()
    gateway.tick()
    assert worker.fetch().status_code == 200
    good = worker.snapshot.ack()
    wrong_version = SnapshotAck(good.version + 1, good.epoch, good.checksum)
    problem(worker.ack(wrong_version), 409, "unknown_snapshot")
    problem(
        worker.ack(SnapshotAck(good.version, good.epoch + 1, good.checksum)), 409, "stale_epoch"
    )
    problem(worker.ack(SnapshotAck(good.version, good.epoch, "0" * 64)), 409, "checksum_mismatch")
    # No ACK taken: a report is refused until the real one is.
    problem(worker.report(), 409, "stale_snapshot")
    assert worker.ack(good).status_code == 200
    assert worker.report().status_code == 200


def test_a_new_session_fences_the_old_one(gateway):
    old = gateway.worker
    old.open()
    gateway.tick()
    old.sync()
    assert old.report().status_code == 200

    new = SimulatedWorker(gateway.w.plaintext)
    first = json.loads(new.open().content)
    assert first["session_id"] != old.session_id
    heartbeat = json.loads(new.open(new.session_id).content)
    assert (heartbeat["session_id"], heartbeat["generation"]) == (
        first["session_id"],
        first["generation"],
    )

    problem(old.report(), 409, "session_fenced")
    problem(old.ack(), 409, "session_fenced")
    problem(old.fetch(conditional=False), 409, "session_fenced")
    problem(old.client.get(f"{BASE}/snapshot"), 400, "invalid_request")  # no session named
    bad_id = old.client.post(f"{BASE}/sessions", {"session_id": "a b"}, format="json")
    problem(bad_id, 400, "invalid_request")

    # The new session starts its own snapshot sequence and reports from 1.
    snapshot = new.sync()
    assert snapshot.version == 1 and len(snapshot.proxies) == 3
    assert new.report().status_code == 200


def test_a_drain_runs_in_the_adr_order_and_never_releases_a_busy_proxy(gateway, seed):
    worker, pool = gateway.worker, bootstrap.get_pool()
    worker.open()
    gateway.tick()
    worker.sync()
    leaving = gateway.ids[0]
    worker.active = {leaving: 1}
    assert worker.report().status_code == 200

    # Its health leaves AVAILABLE: the manager begins the drain; the next snapshot leaves the
    # proxy out, under a new tag.
    # (Checked after the seeding's own check: an older result would be ignored.)
    checked = datetime.now(UTC) + timedelta(seconds=1)
    seed.pool.apply_health([HealthUpdate(leaving, ProxyState.SUSPECT, checked)])
    assert gateway.tick().drains_begun == 1
    before = worker.etag
    assert worker.fetch().status_code == 200
    assert worker.etag != before
    assert leaving not in {p.proxy_id for p in worker.snapshot.proxies}

    # Not yet ACKed: the barrier holds; ACKed but busy: it still holds.
    assert worker.report().status_code == 200
    assert gateway.tick().released == 0
    assert pool.get(leaving).draining
    assert worker.ack().status_code == 200
    busy = worker.report()
    assert json.loads(busy.content)["released"] == []
    assert gateway.tick().released == 0
    assert pool.get(leaving) is not None

    # Idle behind the ACKed excluding snapshot: the report itself releases it.
    worker.active = {leaving: 0}
    idle = worker.report()
    assert json.loads(idle.content)["released"] == [leaving]
    assert pool.get(leaving) is None
    assert worker.fetch().status_code == 304  # releasing a drained proxy changes no snapshot


def test_the_snapshot_follows_the_clients_an_operator_allows(gateway, make_client):
    worker = gateway.worker
    worker.open()
    gateway.tick()
    worker.sync()
    assert [c.name for c in worker.snapshot.clients] == ["shop"]
    make_client("crawler", gateway_enabled=False)
    two = make_client("agency", gateway_enabled=True, allowed_regions=["us"])
    second_key = ApiKey.objects.issue(two.row)[1]
    bootstrap.gateway_clients().clear()  # what CLIENTS_TTL does within 5 s

    assert worker.fetch().status_code == 200  # the clients changed: a new snapshot
    clients = {c.name: c for c in worker.snapshot.clients}
    assert sorted(clients) == ["agency", "shop"]
    assert clients["agency"].allowed_regions == frozenset({"us"})
    assert len(clients["agency"].verifiers) == 2
    assert any(verify(second_key, v) for v in clients["agency"].verifiers)

    two.key.revoke()
    gateway.shop.key.gateway_verifier = ""  # a key issued before the gateway existed
    gateway.shop.key.save()
    bootstrap.gateway_clients().clear()
    assert worker.fetch().status_code == 200
    clients = {c.name: c for c in worker.snapshot.clients}
    assert sorted(clients) == ["agency"]
    assert [verify(second_key, v) for v in clients["agency"].verifiers] == [True]


def test_redis_down_is_a_503_the_worker_retries(gateway, unique_prefix):
    worker = gateway.worker
    bootstrap.point_at(f"redis://127.0.0.1:{free_port()}/0", unique_prefix)
    down = worker.open()
    problem(down, 503, "store_unavailable")
    assert int(down["Retry-After"]) >= 1


def test_hostile_worker_input_is_a_typed_error_that_changes_nothing(gateway):
    """What a broken or hostile worker may send: odd session IDs, documents of the wrong shape,
    one bad entry among good ones, repeats, a report over the pool's bound, a body over the
    web tier's. Each is a 400 or 413 problem; the next good report is still number 2."""
    worker = gateway.worker
    worker.open()
    gateway.tick()
    worker.sync()
    assert worker.report().status_code == 200
    post, sid = worker.client.post, worker.session_id
    for odd in ("sé", "a b", "x" * 65, "", "-lead"):
        problem(worker.client.get(f"{BASE}/snapshot", HTTP_GATEWAY_SESSION=odd), 400,
                "invalid_request")  # fmt: skip
    for body in ({"session_id": "sé"}, {"session_id": 5}, ["s1"]):
        problem(post(f"{BASE}/sessions", body, format="json"), 400, "invalid_request")
    held = gateway.ids[0]
    epoch = worker.epochs[held]

    def raw_report(entries: list, sequence: int = 2) -> object:
        document = {"wire": 1, "report_sequence": sequence, "snapshot_version": 1,
                    "epoch": worker.acked.epoch, "entries": entries, "traffic": [],
                    "refused_snapshots": 0}  # fmt: skip
        return post(f"{BASE}/reports", json.dumps(document).encode(),
                    content_type="application/json", HTTP_GATEWAY_SESSION=sid)  # fmt: skip

    good = {"proxy_id": held, "epoch": epoch, "active": 1, "reserved": 0}
    one_bad = [good, {**good, "proxy_id": gateway.ids[1], "active": -1}]
    assert "entries[1].active" in problem(raw_report(one_bad), 400, "invalid_request")["detail"]
    problem(raw_report([good, good]), 400, "invalid_request")  # a proxy twice
    problem(post(f"{BASE}/reports", b"[1, 2]", content_type="application/json",
                 HTTP_GATEWAY_SESSION=sid), 400, "invalid_request")  # fmt: skip
    over = [{**good, "proxy_id": f"p{i}", "active": 0} for i in range(10_001)]
    assert "10000" in problem(raw_report(over), 413, "payload_too_large")["detail"]
    huge = b'{"wire": 1, "pad": "' + b"x" * 3 * 1024 * 1024 + b'"}'
    problem(post(f"{BASE}/reports", huge, content_type="application/json",
                 HTTP_GATEWAY_SESSION=sid), 413, "payload_too_large")  # fmt: skip
    # A proxy ID of other scripts, idle: read as any other (it counts zero, so it is no claim).
    odd_id = {"proxy_id": "прокси-1", "epoch": epoch, "active": 0, "reserved": 0}
    assert raw_report([good, odd_id]).status_code == 200
    assert bootstrap.get_pool().read_runtime("edge-1").sequence == 2
