"""The fetch task through a real Celery worker: the beat's dispatch claims, the task is sent
over the Redis broker, a worker process (``celery -A pool_admin worker``) runs it, and the pool
fills. Its own queue, so no other worker on the machine takes it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from pool_admin import filling
from pool_admin.celery import app
from pool_admin.config.models import ProviderAccount, Upstream
from pool_admin.forward_proxies import Tinyproxy
from pool_admin.launcher import Child, stop_children
from pool_admin.pool import get_pool
from tests.harness.check_target import check_target
from tests.harness.commands import REPO, database_url_of_test_db
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
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ, "DATABASE_URL": database_url_of_test_db(), "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url, "POOL_PREFIX": unique_prefix, "POOL_DEV": "1",
        "DJANGO_SETTINGS_MODULE": "pool_admin.settings",
    }  # fmt: skip
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
        log = (tmp_path / "worker.log").open("wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "pool_admin", "worker", "--pool", "solo",
             "-Q", queue, "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        broker = app.conf.broker_url
        try:
            app.conf.broker_url = redis_url
            from pool_admin.tasks import fetch_upstream_task

            claims: list[dict] = []
            assert filling.dispatch(filling.now(), claims.append) == 1
            fetch_upstream_task.apply_async((claims[0],), queue=queue)
            deadline = time.monotonic() + 30
            while get_pool().upstream_inventory("acme-http").managed == 0:
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
                time.sleep(0.2)
        finally:
            app.conf.broker_url = broker
            stop_children([Child("celery worker", worker)], timeout=15)
            log.close()
    assert get_pool().inventory("acme-http") == 1
    assert "fetch acme-http: asked" in (tmp_path / "worker.log").read_text()
