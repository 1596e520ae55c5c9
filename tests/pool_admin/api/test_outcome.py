"""POST /api/v1/proxies/{id}/outcome over HTTP against real PostgreSQL and Redis."""

from __future__ import annotations

import logging
import time
from dataclasses import astuple
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.db import connection

from pool_admin import bootstrap
from pool_admin.api.call_log import call_lines, flush_call_log
from pool_admin.config.models import UpstreamQuality
from pool_admin.localservices import free_port
from pool_admin.metrics import stream
from pool_admin.metrics.retention import minute_of
from pool_admin.metrics.stream import dropped_key, flush_events
from tests.harness.metrics import drain_metrics
from tests.pool_admin.api.conftest import PROXY_PASSWORD, make_seeder
from tests.pool_admin.api.test_extract import assert_problem

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def take(client, n=1) -> list[str]:
    response = client.post("/api/v1/extract", {"count": n, "mode": "partial"}, format="json")
    assert response.status_code == 200, response.content
    return [p["id"] for p in response.json()["proxies"]]


def report(client, proxy_id, body=None):
    body = {"outcome": "ok"} if body is None else body
    return client.post(f"/api/v1/proxies/{proxy_id}/outcome", body, format="json")


def quality(upstream="acme-us") -> tuple[int, int, int, int]:
    """The upstream's aggregates once the usage stream's consumer has applied every event."""
    drain_metrics()
    rows = UpstreamQuality.objects.filter(upstream=upstream)
    return tuple(sum(getattr(r, name) for r in rows)  # type: ignore[return-value]
                 for name in ("ok", "banned", "timeout", "auth_failed"))  # fmt: skip


def test_a_ban_quarantines_the_exit_and_is_counted(api, make_client, seed):
    seed(n=2)
    client = api(make_client().plaintext)
    [pid] = take(client)
    before = datetime.now(UTC)
    response = report(client, pid, {"outcome": "banned", "target_host": "Shop.Example"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"proxy_id", "upstream", "outcome", "target_host", "replayed",
                         "quarantined_until"}  # fmt: skip
    assert (body["proxy_id"], body["upstream"], body["outcome"]) == (pid, "acme-us", "banned")
    assert (body["target_host"], body["replayed"]) == ("shop.example", False)
    until = datetime.fromisoformat(body["quarantined_until"])
    assert body["quarantined_until"].endswith("Z")
    assert before + timedelta(seconds=1799) <= until <= before + timedelta(seconds=1801)
    assert seed.pool.quarantine_of([pid], datetime.now(UTC)) == {pid: frozenset({"shop.example"})}
    assert quality() == (0, 1, 0, 0)
    row = UpstreamQuality.objects.get()
    assert row.period_start == minute_of(before) or row.period_start == minute_of(datetime.now(UTC))


def test_each_outcome_is_counted_once_and_a_replay_not_again(api, make_client, seed):
    seed(n=4)
    client = api(make_client().plaintext)
    ids = take(client, 4)
    for pid, outcome in zip(ids, ["ok", "timeout", "auth_failed", "ok"], strict=True):
        assert report(client, pid, {"outcome": outcome}).json()["replayed"] is False
    again = report(client, ids[0], {"outcome": "ok"})
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["quarantined_until"] is None
    assert quality() == (2, 0, 1, 1)


def test_another_outcome_for_the_same_proxy_is_409(api, make_client, seed):
    seed(n=1)
    client = api(make_client().plaintext)
    [pid] = take(client)
    assert report(client, pid, {"outcome": "ok"}).status_code == 200
    assert_problem(report(client, pid, {"outcome": "banned"}), 409, "outcome_conflict")
    problem = report(client, pid, {"outcome": "ok", "target_host": "a.example"})
    assert_problem(problem, 409, "outcome_conflict")
    assert quality() == (1, 0, 0, 0)


def test_only_the_extracting_client_may_report(api, make_client, seed):
    seeded = seed(n=2)
    owner = api(make_client().plaintext)
    other = api(make_client("crawler-2").plaintext)
    [pid] = take(owner)
    [unextracted] = set(seeded) - {pid}
    for client, proxy_id in ((other, pid), (owner, unextracted), (owner, "no-such-proxy")):
        problem = assert_problem(report(client, proxy_id), 404, "not_found")
        assert proxy_id not in problem["detail"]
    assert report(owner, pid).status_code == 200
    assert_problem(report(other, pid), 404, "not_found")  # not even "conflict" for others


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"outcome": "great"},
        {"outcome": None},
        {"outcome": "ok", "target_host": "https://shop.example"},
        {"outcome": "ok", "target_host": "shop.example:443"},
        {"outcome": "ok", "target_host": " shop.example"},
        {"outcome": "ok", "target_host": "*"},
        {"outcome": "ok", "target_host": "a" * 254},
        {"outcome": "ok", "colour": "red"},
        ["ok"],
    ],
)
def test_bad_body_is_400_and_changes_nothing(api, make_client, seed, body):
    seed(n=1)
    client = api(make_client().plaintext)
    [pid] = take(client)
    assert_problem(report(client, pid, body), 400, "invalid_request")
    assert report(client, pid, {"outcome": "banned"}).json()["replayed"] is False


def test_malformed_json_and_a_malformed_proxy_id_are_400(api, make_client):
    client = api(make_client().plaintext)
    response = client.post("/api/v1/proxies/p1/outcome", "{x", content_type="application/json")
    assert_problem(response, 400, "invalid_request")
    deep = "[" * 100_000 + "]" * 100_000  # too deep for Python's parser: still a 400
    response = client.post("/api/v1/proxies/p1/outcome", deep, content_type="application/json")
    assert_problem(response, 400, "invalid_request")
    assert_problem(report(client, "p%201"), 400, "invalid_request")  # a space: never an ID


def test_no_or_a_bad_key_is_401(api, make_client):
    assert_problem(report(api(), "p1"), 401, "unauthenticated")
    assert_problem(report(api(make_client().plaintext + "x"), "p1"), 401, "unauthenticated")


def test_a_report_takes_one_unit_of_the_requests_per_second_limit(api, make_client, seed):
    seed(n=1)
    client = api(make_client(requests_per_second=2).plaintext)
    [pid] = take(client)
    responses = [report(client, pid) for _ in range(3)]
    limited = [r for r in responses if r.status_code == 429]
    assert limited, [r.status_code for r in responses]
    assert_problem(limited[0], 429, "rate_limited")
    assert int(limited[0]["Retry-After"]) >= 1


def test_a_zero_quarantine_setting_records_the_ban_only(api, make_client, seed, settings):
    settings.POOL_BAN_QUARANTINE_S = 0
    bootstrap.point_at(*astuple(bootstrap.target()))  # pools are built with the setting
    seed(n=1)
    client = api(make_client().plaintext)
    [pid] = take(client)
    body = report(client, pid, {"outcome": "banned"}).json()
    assert body["quarantined_until"] is None
    assert seed.pool.quarantine_of([pid], datetime.now(UTC)) == {}
    assert quality() == (0, 1, 0, 0)


def test_one_call_log_line_per_report_and_no_secret_in_logs(api, make_client, seed, caplog):
    seed(n=1)
    c = make_client()
    client = api(c.plaintext)
    [pid] = take(client)
    caplog.set_level(logging.DEBUG)
    report(client, pid, {"outcome": "banned", "target_host": "shop.example"})
    report(client, "no-such-proxy")
    flush_call_log()  # lines are written in batches
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    logged = [text for text in logged if '"event":"outcome"' in text]
    assert len(logged) == 2
    assert '"event":"outcome"' in logged[0] and '"reported":"banned"' in logged[0]
    assert '"result":"ok"' in logged[0] and '"upstream":"acme-us"' in logged[0]
    assert '"result":"not_found"' in logged[1]
    for record in caplog.records:
        text = record.getMessage() + str(record.args)
        assert PROXY_PASSWORD not in text and c.plaintext not in text


@pytest.mark.django_db(transaction=True)
def test_postgres_down_neither_fails_the_report_nor_loses_its_count(api, make_client, seed, caplog):
    """The report is in Redis and its event on the usage stream: PostgreSQL down changes
    neither the answer nor, once it is back and the consumer runs, the aggregates."""
    seed(n=1)
    client = api(make_client().plaintext)  # its key is cached by the extract below
    [pid] = take(client)
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()), PASSWORD="pg-pw-x")
    caplog.set_level(logging.WARNING)
    try:
        response = report(client, pid, {"outcome": "banned"})
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert response.status_code == 200, response.content
    assert response.json()["quarantined_until"] is not None
    assert seed.pool.quarantine_of([pid], datetime.now(UTC)) == {pid: frozenset({"*"})}
    assert all("pg-pw-x" not in r.getMessage() + str(r.args) for r in caplog.records)
    assert quality() == (0, 1, 0, 0)  # PostgreSQL is back: the consumer adds what waited
    assert report(client, pid, {"outcome": "banned"}).json()["replayed"] is True
    assert quality() == (0, 1, 0, 0)  # a replay is not counted again


@pytest.mark.fault
def test_the_streams_redis_stopped_costs_the_event_not_the_answer(
    api, make_client, seed, private_redis, settings, caplog
):
    """The usage stream on a Redis of its own, stopped: an extract and an outcome report answer
    200 without waiting on it; the events that could not be sent are counted and a warning
    says so; once it is back, events flow again."""
    server = private_redis()
    settings.METRICS_REDIS_URL = server.url
    seed(n=3)
    client = api(make_client().plaintext)
    first, second = take(client, 2)
    flush_events()
    server.stop()
    caplog.set_level(logging.WARNING, logger="pool_admin.metrics.stream")
    before = stream.dropped_events()
    started = time.monotonic()
    assert len(take(client, 1)) == 1
    assert report(client, first, {"outcome": "timeout"}).status_code == 200
    assert time.monotonic() - started < 1  # the answers never waited on the stream's Redis
    bootstrap.event_stream()._warned_at = 0.0  # say it now, not up to 10 s later
    flush_events()
    assert stream.dropped_events() == before + 2  # the extract's event and the report's
    assert any("2 events dropped" in r.getMessage() for r in caplog.records)
    server.start()
    assert report(client, second, {"outcome": "ok"}).status_code == 200
    flush_events()
    back = redis.Redis.from_url(server.url)
    assert back.xlen(settings.METRICS_STREAM) == 1  # a new server (no persistence): one entry
    assert int(back.get(dropped_key()) or 0) >= 2  # the drops, told to the deployment's count


@pytest.mark.fault
def test_redis_stopped_is_503_with_retry_after(api, make_client, private_redis, unique_prefix):
    server = private_redis()
    bootstrap.point_at(server.url, unique_prefix)
    seeder = make_seeder(server.url, unique_prefix)
    try:
        seeder(n=1)
        client = api(make_client().plaintext)
        [pid] = take(client)
        snapshot = redis.Redis.from_url(server.url)
        snapshot.save()
        snapshot.close()
        server.stop()
        response = report(client, pid, {"outcome": "banned"})
        assert_problem(response, 503, "store_unavailable")
        assert int(response["Retry-After"]) >= 1
        server.start()
        bootstrap.point_at(server.url, unique_prefix)
        after = report(client, pid, {"outcome": "banned"})
        assert after.status_code == 200 and after.json()["replayed"] is False
    finally:
        seeder.close()
