"""A real Celery worker for the tests (``celery -A pool_admin worker``: solo pool, or the
threads pool ``make run``'s workers use), on a queue of its own so no other worker on the
machine takes its tasks, pointed at the test's database, Redis and pool prefix."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from activity.redis_url import is_sentinel_url, kombu_sentinel
from pool_admin.celery import app
from pool_admin.launcher import Child, stop_children, worker_options
from tests.harness.commands import REPO, database_url_of_test_db


@contextlib.contextmanager
def celery_worker(
    folder: Path, redis_url: str, prefix: str, *, threads: int | None = None, **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The worker process and its queue; this process sends over the same broker meanwhile.
    Its output is in ``folder / "worker.log"``; ``env`` adds to its environment. ``threads``:
    run as ``make run`` runs its workers (``launcher.worker_options``) with that many threads;
    None: the solo pool."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    if threads is None:
        options = ["-Q", queue, "--pool", "solo", "--without-gossip", "--without-mingle"]
    else:
        options = worker_options(queue, threads)
    environment = {
        **os.environ, "DATABASE_URL": database_url_of_test_db(), "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url, "POOL_PREFIX": prefix, "POOL_DEV": "1",
        "DJANGO_SETTINGS_MODULE": "pool_admin.settings", **env,
    }  # fmt: skip
    with (folder / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "pool_admin", "worker", *options,
             "--loglevel", "INFO"],
            cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        broker, options = app.conf.broker_url, app.conf.broker_transport_options
        try:
            if is_sentinel_url(redis_url):  # as the settings make it (kombu's own form)
                app.conf.broker_url, app.conf.broker_transport_options = kombu_sentinel(redis_url)
            else:
                app.conf.broker_url = redis_url
            yield worker, queue
        finally:
            app.conf.broker_url, app.conf.broker_transport_options = broker, options
            stop_children([Child("celery worker", worker)], timeout=15)
