"""POST /api/v1/extract with PostgreSQL or Redis unreachable or stopped under the API."""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager

import pytest
import redis
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from pool_admin import bootstrap
from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.localservices import free_port, postgres_answers
from tests.pool_admin.api.conftest import make_seeder
from tests.pool_admin.api.test_extract import assert_problem, extract

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


@pytest.mark.django_db(transaction=True)
def test_postgres_unreachable_still_serves_a_recently_seen_key(api, make_client, seed):
    seed(n=3)
    seen, unseen = make_client(), make_client("crawler-2")
    assert extract(api(seen.plaintext), {"count": 1, "mode": "partial"}).status_code == 200

    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()), PASSWORD="pg-pw-x")
    try:
        served = extract(api(seen.plaintext), {"count": 1, "mode": "partial"})
        refused = extract(api(unseen.plaintext), {"count": 1, "mode": "partial"})
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)

    assert served.status_code == 200 and served.json()["returned"] == 1
    problem = assert_problem(refused, 503, "store_unavailable")
    assert refused["Retry-After"]
    assert "pg-pw-x" not in refused.content.decode() and unseen.plaintext not in str(problem)


@contextmanager
def default_database_on(cluster):
    """Django's ``default`` connection on ``cluster``'s ``postgres`` database, migrated there,
    for the block; the test database's settings and a fresh connection to it afterwards."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(
        HOST="127.0.0.1", PORT=str(cluster.port), NAME="postgres", USER="postgres", PASSWORD=""
    )
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
        ContentType.objects.clear_cache()  # it holds the private database's IDs


def stop_immediately(cluster) -> None:
    """``pg_ctl stop -m immediate``: SIGQUIT to the postmaster, which ends every backend at once
    (no checkpoint, open connections dropped), as a crashed or killed server would."""
    pid = cluster.pid
    assert pid is not None
    os.kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + 10
    while cluster.pid is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cluster.pid is None, "the postmaster did not quit"


@pytest.mark.fault
@pytest.mark.django_db(transaction=True)
def test_postgres_stopped_under_the_api_still_serves_a_recently_seen_key(
    api, private_postgres, seed
):
    """A real PostgreSQL stops under the API (immediate shutdown, with the API's connection to
    it open): a key verified a moment ago is still served from the key cache, while a key that
    would need PostgreSQL is a clear 503, never a 500."""
    seed(n=4)
    cluster = private_postgres()
    with default_database_on(cluster):
        row = ApiClient.objects.create(name="crawler-1")
        _, seen = ApiKey.objects.issue(row)
        _, unseen = ApiKey.objects.issue(row)  # valid, but never verified: not in the cache
        first = extract(api(seen), {"count": 1, "mode": "partial"})
        assert first.status_code == 200, first.content
        assert connection.connection is not None  # the connection the API used stays open

        stop_immediately(cluster)
        assert not postgres_answers(cluster.url())
        served = extract(api(seen), {"count": 1, "mode": "partial"})
        refused = extract(api(unseen), {"count": 1, "mode": "partial"})
        again = extract(api(seen), {"count": 1, "mode": "partial"})
        # Once more on the connection now known to be broken: still a 503, not a 500.
        refused_again = extract(api(unseen), {"count": 1, "mode": "partial"})

    assert served.status_code == 200, served.content
    assert served.json()["returned"] == 1 and served.json()["proxies"]
    problem = assert_problem(refused, 503, "store_unavailable")
    assert int(refused["Retry-After"]) >= 1
    assert unseen not in refused.content.decode() and str(cluster.port) not in str(problem)
    assert again.status_code == 200 and again.json()["returned"] == 1  # the failure broke nothing
    assert_problem(refused_again, 503, "store_unavailable")
    taken = [p["id"] for r in (first, served, again) for p in r.json()["proxies"]]
    assert len(set(taken)) == 3


@pytest.mark.fault
def test_redis_stopped_is_503_with_retry_after_and_changes_nothing(
    api, make_client, private_redis, unique_prefix
):
    server = private_redis()
    bootstrap.point_at(server.url, unique_prefix)
    seeder = make_seeder(server.url, unique_prefix)
    try:
        ids = seeder(n=3)
        client = api(make_client().plaintext)
        assert extract(client, {"count": 1, "mode": "partial"}).status_code == 200
        snapshot = redis.Redis.from_url(server.url)
        snapshot.save()  # the server has no persistence of its own; this lets a restart reload
        snapshot.close()
        server.stop()

        response = extract(client, {"count": 2, "mode": "partial"}, **{"Idempotency-Key": "k"})
        assert_problem(response, 503, "store_unavailable")
        assert int(response["Retry-After"]) >= 1
        assert str(server.port) not in response.content.decode()

        server.start()
        bootstrap.point_at(server.url, unique_prefix)
        after = extract(client, {"count": 5, "mode": "partial"}, **{"Idempotency-Key": "k"})
        assert after.status_code == 200
        assert after.json()["replayed"] is False  # the failed call stored nothing
        assert after.json()["returned"] == 2  # and took nothing: 3 seeded, 1 extracted
        assert {p["id"] for p in after.json()["proxies"]} < set(ids)
    finally:
        seeder.close()
