"""The fetch task through a real Celery worker: the beat's dispatch claims, the task is sent
over the Redis broker, a worker process (``celery -A pool_admin worker``) runs it, and the pool
fills; a worker killed mid-fetch loses its lease and the fetch runs again. Its own queue, so no
other worker on the machine takes it (tests/harness/celery_worker.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta

import pytest

from pool_admin import fetch_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import ProviderAccount, Upstream
from pool_admin.forward_proxies import Tinyproxy
from tests.harness.celery_worker import celery_worker
from tests.harness.check_target import check_target
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
]


def test_a_real_worker_runs_the_fetch_task_and_the_pool_fills(
    filling_pool, redis_url, unique_prefix, tmp_path
):
    with (
        Tinyproxy(tmp_path, "demo1", "pw1") as proxy,
        check_target() as target,
        vendor(webshare((proxy.port, "demo1", "pw1"))) as url,
    ):
        account = ProviderAccount.objects.create(name="acme")
        Upstream.objects.create(
            name="acme-http", account=account, kind="preset", preset="webshare_list",
            endpoint_url=url, count_param="page_size", allow_local_hosts=True,
            check_url=target.url(),
        )  # fmt: skip
        with celery_worker(tmp_path, redis_url, unique_prefix) as (worker, queue):
            from pool_admin.tasks import fetch_upstream_task

            claims: list[dict] = []
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
            fetch_upstream_task.apply_async((claims[0],), queue=queue)
            deadline = time.monotonic() + 30
            while get_pool().upstream_inventory("acme-http").managed == 0:
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
                time.sleep(0.2)
    assert get_pool().inventory("acme-http") == 1
    assert "fetch acme-http: asked" in (tmp_path / "worker.log").read_text()


def test_a_worker_killed_mid_fetch_loses_its_lease_and_the_fetch_runs_again(
    filling_pool, redis_url, unique_prefix, tmp_path, settings
):
    """The worker is SIGKILLed while the vendor holds its request: its claim holds the
    upstream until the lease ends (3 s here), then the next dispatch claims it again and
    the fetch completes."""
    settings.FETCH_LEASE = timedelta(seconds=3)
    answer = threading.Event()
    with (
        Tinyproxy(tmp_path, "demo1", "pw1") as proxy,
        vendor(webshare((proxy.port, "demo1", "pw1")), hold=answer) as url,
    ):
        account = ProviderAccount.objects.create(name="acme")
        Upstream.objects.create(
            name="acme-http", account=account, kind="preset", preset="webshare_list",
            endpoint_url=url, count_param="page_size", allow_local_hosts=True,
            trust_provider=True, max_size=10,  # the dead worker's 10 of the budget stay spent
        )  # fmt: skip
        with celery_worker(tmp_path, redis_url, unique_prefix, FETCH_LEASE_S="3") as (
            worker,
            queue,
        ):
            from pool_admin.tasks import fetch_upstream_task

            claims: list[dict] = []
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
            claimed_at = time.monotonic()
            fetch_upstream_task.apply_async((claims[0],), queue=queue)
            deadline = time.monotonic() + 30
            while not url.asked:  # the worker is mid-fetch: the vendor holds its request
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
                time.sleep(0.05)
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        answer.set()  # the vendor answers from now on
        again: list[dict] = []
        while not fetch_tasks.dispatch(fetch_tasks.now(), again.append):
            assert time.monotonic() < claimed_at + 10
            time.sleep(0.1)
        assert time.monotonic() - claimed_at >= 2.5  # not before the dead worker's lease ended
        report = fetch_tasks.run_fetch(again[0])
    assert report is not None and report.reconcile.inserted == 1
    assert len(url.asked) == 2
    assert get_pool().inventory("acme-http") == 1
    assert fetch_tasks.run_fetch(claims[0]) is None  # the dead worker's claim is spent
