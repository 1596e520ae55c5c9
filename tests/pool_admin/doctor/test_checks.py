"""The doctor's checks one at a time, in this process, against real stores in the states an
operator meets: a Redis that evicts or persists, libraries of another version, a clock off,
a stream nobody reads, a worker without a session, an open alert."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.core.management import call_command

from activity.lua_functions import library
from activity.types import SnapshotRef
from pool_admin import bootstrap
from pool_admin.beat import write_heartbeat
from pool_admin.config.models import (
    Alert,
    GatewayWorker,
    Heartbeat,
    ProviderAccount,
    Upstream,
    WorkerGroup,
)
from pool_admin.doctor import processes, stores
from pool_admin.doctor.findings import Status
from pool_admin.doctor.stores import LIBRARIES

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def judged(check):
    return [(f.name, f.status) for f in check()]


@pytest.fixture
def own_redis(private_redis):
    server = private_redis()
    client = redis.Redis.from_url(server.url)
    yield server.url, client
    client.close()


# ---------------------------------------------------------------------------- Redis roles
def test_a_pool_redis_that_may_evict_fails(own_redis):
    url, client = own_redis
    assert judged(stores.check_redis("pool", url)) == [("redis:pool", Status.OK)]
    client.config_set("maxmemory-policy", "allkeys-lru")
    (finding,) = stores.check_redis("pool", url)()
    assert finding.status is Status.FAIL
    assert "maxmemory-policy is allkeys-lru" in finding.summary
    assert "noeviction" in finding.fix


def test_a_pool_redis_that_persists_is_warned_of(own_redis):
    url, client = own_redis
    client.config_set("save", "3600 1")
    (finding,) = stores.check_redis("pool", url)()
    assert finding.status is Status.WARN
    assert "snapshots (save 3600 1)" in finding.summary
    client.config_set("save", "")
    client.config_set("appendonly", "yes")
    assert "persistence on (AOF)" in stores.check_redis("pool", url)()[0].summary


def test_the_metrics_redis_is_advised_aof(own_redis, settings):
    url, client = own_redis
    (finding,) = stores.check_redis("metrics", url)()
    assert finding.status is Status.WARN
    assert "no AOF" in finding.summary
    assert "(the pool's Redis)" not in finding.summary  # REDIS_URL is another server here
    client.config_set("appendonly", "yes")
    assert judged(stores.check_redis("metrics", url)) == [("redis:metrics", Status.OK)]


def test_a_redis_url_password_is_never_printed(own_redis):
    url, client = own_redis
    client.config_set("requirepass", "s3cret-pw")
    with_password = url.replace("redis://", "redis://:s3cret-pw@")
    (finding,) = stores.check_redis("broker", with_password)()
    assert finding.status is Status.OK
    assert "s3cret-pw" not in finding.summary
    assert "***" in finding.summary


# ---------------------------------------------------------------------------- libraries
def test_libraries_not_loaded_then_loaded_then_another_version_beside(own_redis):
    url, client = own_redis
    (finding,) = stores.check_libraries("pool", url)()
    assert finding.status is Status.WARN
    assert finding.summary == "not loaded yet: pp_activity, pp_sched, pp_lease"
    for spec in LIBRARIES["pool"]:
        client.function_load(library(spec)[0])
    (finding,) = stores.check_libraries("pool", url)()
    assert finding.status is Status.OK
    names = [f"{spec.prefix}_{library(spec)[1]}" for spec in LIBRARIES["pool"]]
    assert finding.summary == f"loaded: {', '.join(names)}"
    client.function_load(
        "#!lua name=pp_activity_000000000000\n"
        "redis.register_function('pp_old_ping', function() return 1 end)"
    )
    (finding,) = stores.check_libraries("pool", url)()
    assert finding.status is Status.WARN
    assert "other versions loaded too: pp_activity_000000000000" in finding.summary


# ---------------------------------------------------------------------------- the clock
@pytest.mark.parametrize(
    ("offset", "status"), [(0.0, Status.OK), (2.5, Status.WARN), (-9.0, Status.FAIL)]
)
def test_the_clock_against_redis(redis_url, offset, status):
    (finding,) = stores.check_clock(redis_url, now=lambda: time.time() + offset)
    assert finding.status is status
    if offset:
        side = "ahead of" if offset > 0 else "behind"
        assert f"s {side} Redis" in finding.summary


# ---------------------------------------------------------------------------- PostgreSQL
@pytest.mark.django_db(transaction=True)
def test_postgres_migrated_then_a_migration_missing():
    assert judged(stores.check_postgres) == [("postgres", Status.OK)]
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    graph = MigrationLoader(connection).graph
    (last,) = graph.leaf_nodes("config")
    (before,) = graph.node_map[last].parents  # the config app's migrations are a line
    call_command("migrate", "config", before.key[1], verbosity=0)
    try:
        (finding,) = stores.check_postgres()
        assert finding.status is Status.FAIL
        assert finding.summary.endswith(": 1 migration(s) not applied")
        assert finding.fix == "run manage.py migrate"
    finally:
        call_command("migrate", "config", verbosity=0)


# ---------------------------------------------------------------------------- beat
@pytest.mark.django_db
def test_beat_never_seen_then_fresh_then_stale(settings):
    (finding,) = processes.check_beat()
    assert (finding.status, finding.summary) == (
        Status.FAIL,
        "beat has never written a heartbeat",
    )
    write_heartbeat()
    assert judged(processes.check_beat) == [("beat", Status.OK)]
    later = datetime.now(UTC) + timedelta(seconds=settings.BEAT_HEARTBEAT_MAX_AGE_S + 5)
    (finding,) = processes.check_beat(now=later)
    assert finding.status is Status.FAIL
    assert f"limit {settings.BEAT_HEARTBEAT_MAX_AGE_S} s" in finding.summary
    assert Heartbeat.objects.count() == 1  # one row, written over


@pytest.mark.django_db
def test_two_beats_at_once_fail_and_a_place_long_silent_is_forgotten():
    now = datetime.now(UTC)
    write_heartbeat(now, where="host-a:101")
    write_heartbeat(now, where="host-b:202")
    (finding,) = processes.check_beat(now=now + timedelta(seconds=1))
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("2 beats running (host-a:101, host-b:202)")
    assert finding.fix == "stop all but one beat in the deployment"
    # host-b stopped: its row stops being fresh, and a day on, a write of host-a deletes it.
    later = now + timedelta(seconds=60)
    write_heartbeat(later, where="host-a:101")
    assert processes.check_beat(now=later)[0].status is Status.OK
    write_heartbeat(now + timedelta(days=2), where="host-a:101")
    assert list(Heartbeat.objects.values_list("where", flat=True)) == ["host-a:101"]


# ---------------------------------------------------------------------------- the consumer
def test_the_consumer_group_missing_reading_idle_and_dead_letters(own_redis, settings, monkeypatch):
    url, client = own_redis
    settings.METRICS_REDIS_URL = url
    (finding,) = processes.check_consumer()
    assert finding.status is Status.FAIL
    assert finding.summary == "the usage stream has no consumer group yet"

    stream = settings.METRICS_STREAM
    client.xgroup_create(stream, settings.METRICS_GROUP, id="0", mkstream=True)
    client.xadd(stream, {"k": "v"})
    (finding,) = processes.check_consumer()
    assert (finding.status, finding.summary.split(" (")[0]) == (
        Status.FAIL,
        "no consumer has read since never",
    )

    client.xreadgroup(settings.METRICS_GROUP, "consumer-1", {stream: ">"}, count=10)
    (finding,) = processes.check_consumer()
    assert finding.status is Status.OK
    assert "lag 0, pending 1, dead letters 0" in finding.summary

    client.xadd(settings.METRICS_DEAD_LETTER, {"reason": "bad"})
    assert processes.check_consumer()[0].status is Status.WARN

    monkeypatch.setattr(processes, "CONSUMER_MAX_IDLE_S", 0)
    time.sleep(0.01)
    assert processes.check_consumer()[0].summary.startswith("no consumer has read since 0 s")


# ---------------------------------------------------------------------------- gateway
@pytest.fixture
def gateway_pool(redis_url, unique_prefix):
    bootstrap.point_at(redis_url, unique_prefix)
    yield bootstrap.get_pool()
    bootstrap.reset()


@pytest.mark.django_db
def test_gateway_workers_without_a_session_then_failing_closed_then_stale(gateway_pool):
    assert [(f.status, f.summary) for f in processes.check_gateway()] == [
        (Status.OK, "no gateway worker enabled")
    ]
    group = WorkerGroup.objects.create(name="edge", target_capacity=10)
    GatewayWorker.objects.create(name="edge-1", group=group)
    GatewayWorker.objects.create(name="edge-2", group=group, enabled=False)
    (finding,) = processes.check_gateway()
    assert finding.status is Status.FAIL
    assert finding.summary == "1 enabled worker(s) without a live session: edge-1"

    gateway_pool.open_session("edge-1", "s-1", timedelta(seconds=30))
    (finding,) = processes.check_gateway()
    assert (finding.name, finding.status) == ("gateway:snapshots", Status.FAIL)
    assert finding.summary.endswith(": edge-1")

    gateway_pool.issue_snapshot("edge-1", "s-1", SnapshotRef(1, 0, "c" * 64), [])
    gateway_pool.acknowledge_snapshot("edge-1", "s-1", 1)
    (finding,) = processes.check_gateway()
    assert (finding.name, finding.status) == ("gateway:reports", Status.WARN)


# ---------------------------------------------------------------------------- alerts
@pytest.mark.django_db
def test_open_alerts_are_warned_of_by_kind_and_upstream():
    assert judged(processes.check_alerts) == [("alerts", Status.OK)]
    account = ProviderAccount.objects.create(name="acme")
    upstream = Upstream.objects.create(
        name="acme-us", account=account, kind="preset", preset="webshare_list",
        endpoint_url="https://api.acme.example/p",
    )  # fmt: skip
    now = datetime.now(UTC)
    Alert.objects.create(
        upstream=upstream,
        kind=Alert.Kind.FETCH_FAILING,
        failures=3,
        first_failed_at=now,
        last_failed_at=now,
        opened_at=now,
    )
    (finding,) = processes.check_alerts()
    assert finding.status is Status.WARN
    assert finding.summary == "open: 1 fetch_failing (upstreams acme-us)"


# ---------------------------------------------------------------------------- Celery
def test_celery_queues_without_workers_fail_each(own_redis):
    from celery import Celery

    url, _ = own_redis
    # An app of its own on a broker no worker of the machine listens on: the project's app
    # keeps its connection pool, which must not outlive this test's Redis.
    app = Celery("doctor-test", broker=url, set_as_current=False)
    try:
        findings = processes.check_celery(app)
    finally:
        app.close()
    assert [(f.name, f.status) for f in findings] == [
        ("celery:fetches", Status.FAIL),
        ("celery:checks", Status.FAIL),
        ("celery:celery", Status.FAIL),
    ]
    assert "start a Celery worker with -Q fetches" in findings[0].fix
