"""PostgreSQL stopped under a running usage-stream consumer: it waits, then catches up with
nothing lost and nothing counted twice (the stream's Redis stopped under the API: in
tests/pool_admin/api/test_outcome.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psycopg
import pytest
import redis

from tests.harness.commands import REPO, manage
from tests.harness.metrics import entry

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.fault]

AT_MS = 29_666_666 * 60_000


def total(database_url: str) -> int:
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        row = conn.execute("SELECT coalesce(sum(ok + timeout), 0) FROM config_upstreamquality")
        return int(row.fetchone()[0])  # type: ignore[index]


def test_postgres_stopped_under_the_consumer_loses_nothing(
    private_postgres, redis_url, unique_prefix, tmp_path
):
    cluster = private_postgres()
    database_url = cluster.url("metrics")
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE metrics")
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "METRICS_REDIS_URL": redis_url,
           "POOL_PREFIX": unique_prefix, "POOL_DEV": "1"}  # fmt: skip
    migrated = manage("migrate", "--noinput", "-v", "0", **env)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    client = redis.Redis.from_url(redis_url)
    events = f"{unique_prefix}:{{metrics}}:events"

    def produce(n: int) -> None:
        for i in range(n):
            one = entry(("outcome", AT_MS + i, {"upstream": "u1", "outcome": "ok"}))
            client.xadd(events, one)  # type: ignore[arg-type]

    log = (tmp_path / "consumer.log").open("wb")
    consumer = subprocess.Popen(
        [sys.executable, "manage.py", "consume_metrics", "--name", "c1"],
        cwd=REPO, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        produce(100)
        deadline = time.monotonic() + 30
        while total(database_url) < 100:
            assert time.monotonic() < deadline, (tmp_path / "consumer.log").read_text()[-2000:]
            time.sleep(0.1)
        cluster.stop()
        produce(250)  # while PostgreSQL is down
        time.sleep(8)  # the consumer meets the failure and backs off: 0.5, 1, 2, 4 s
        assert consumer.poll() is None, (tmp_path / "consumer.log").read_text()[-2000:]
        # Several retries, and no entry read again meanwhile: each read is a delivery, and a
        # long outage must not bring good entries to the dead-letter limit.
        pending = client.xpending_range(events, "aggregates", "-", "+", 1_000)
        assert pending and {int(p["times_delivered"]) for p in pending} == {1}
        assert (tmp_path / "consumer.log").read_text().count("retrying in") >= 3
        cluster.start()
        deadline = time.monotonic() + 60  # the backoff is at most 30 s
        while (done := total(database_url)) < 350:
            assert time.monotonic() < deadline, (done, (tmp_path / "consumer.log").read_text())
            time.sleep(0.2)
        assert done == 350
        group = client.xinfo_groups(events)[0]
        assert (group["pending"], group["lag"]) == (0, 0)
    finally:
        consumer.terminate()
        consumer.wait(30)
        log.close()
        client.close()
    text = (tmp_path / "consumer.log").read_text()
    assert "retrying in" in text  # it said it was waiting
    assert "applied 350, redelivered 0, dead-lettered 0" in text  # each once, none lost
