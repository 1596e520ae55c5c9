"""The Celery app: configured from Django settings (``CELERY_*``), broker on Redis."""

import logging
import os
import resource
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")

app = Celery("pool_admin")
# Lazy: settings are read on first use, not at import (the test harness sets env first).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)

#: Sockets a worker may hold beside its checks' (Redis, PostgreSQL, vendors, the broker).
SPARE_FILES = 1_000


def room_for_connections(wanted: int) -> int:
    """Raise this process's open-file limit to what ``wanted`` sockets need (its hard limit at
    most), and return the limit now. A worker's threads each check up to ``CHECK_CONCURRENCY``
    proxies at once (32 x 200 in the fetch worker): at a common soft limit of 1,024, checks
    would fail with EMFILE and healthy proxies be marked failing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft != resource.RLIM_INFINITY and soft < wanted:
        logger.warning(
            "open files limited to %d, %d wanted: raise the hard limit (ulimit -Hn), "
            "or run fewer threads",
            soft,
            wanted,
        )
    return soft


@worker_init.connect
def _worker_room(**_: Any) -> None:
    from django.conf import settings

    from pool_admin.fetch_tasks import CHECK_CONCURRENCY

    threads = max(settings.FETCH_WORKER_THREADS, settings.CHECK_WORKER_THREADS)
    room_for_connections(threads * CHECK_CONCURRENCY + SPARE_FILES)
