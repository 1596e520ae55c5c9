"""Celery's broker through Sentinel (``CELERY_BROKER_URL=redis+sentinel://...``, which the
settings turn into kombu's form): a real worker takes a task, the primary is killed, and the
worker takes the next task from the new master by itself."""

from __future__ import annotations

import time

import pytest

from activity.redis_url import kombu_sentinel
from pool_admin.celery import app
from tests.harness.celery_worker import celery_worker
from tests.harness.sentinel import SentinelDeployment

pytestmark = [pytest.mark.fault, pytest.mark.slow]

#: From the primary's death to the worker running a task sent through the new master.
FOLLOW_WITHIN_S = 30.0


def _send_heartbeat(url: str, queue: str, within: float) -> None:
    """Send ``pool_admin.heartbeat`` to ``queue``, retrying while the broker is failing over."""
    from pool_admin.tasks import heartbeat_task

    broker, options = kombu_sentinel(url)
    deadline = time.monotonic() + within
    while True:
        try:
            with app.connection_for_write(broker, transport_options=options) as connection:
                heartbeat_task.apply_async(queue=queue, connection=connection, retry=False)
            return
        except Exception:  # kombu's and redis-py's connection errors, while it fails over
            assert time.monotonic() < deadline, "no broker to send to"
            time.sleep(0.2)


def _heartbeats(log) -> int:
    return log.read_text(errors="replace").count("heartbeat 20")


def test_a_celery_worker_follows_its_broker_through_a_failover(tmp_path, unique_prefix):
    with SentinelDeployment(tmp_path / "redis") as deployment:
        url = deployment.url
        with celery_worker(tmp_path, url, unique_prefix) as (worker, queue):
            log = tmp_path / "worker.log"
            _send_heartbeat(url, queue, 10)
            deadline = time.monotonic() + 30
            while _heartbeats(log) < 1:
                assert worker.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
            old = deployment.master_port()
            deployment.synced()
            deployment.primary.kill()
            killed = time.monotonic()
            deployment.wait_for_new_master(old)
            _send_heartbeat(url, queue, FOLLOW_WITHIN_S)
            while _heartbeats(log) < 2:
                assert worker.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() - killed < FOLLOW_WITHIN_S, log.read_text()[-3000:]
                time.sleep(0.1)
