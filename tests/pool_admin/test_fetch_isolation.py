"""A slow or hanging vendor delays only its own account (issue 22, section 2): four upstreams
of one account whose vendor trickles or never answers, for 90 s, through a real Celery worker
run as ``make run`` runs its fetch worker (``launcher.worker_options``: a thread per fetch),
while a healthy account's short-lived proxies must keep coming on its cadence.

Before: one worker process ran every fetch, so a vendor that trickled held it ~36 s and every
other account waited (the demo account went 91 s without a fetch, its pool empty twice)."""

from __future__ import annotations

import itertools
import time

import pytest
from django.conf import settings

from pool_admin import fetch_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import ProviderAccount, Upstream
from tests.harness.celery_worker import celery_worker
from tests.harness.check_target import closed_port
from tests.harness.vendor_server import vendor_server
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
]

HOSTILE_FOR_S = 90
HEALTHY_INTERVAL_S = 3
#: The healthy vendor's proxies live 12 s: two fetches missed and the pool is empty.
HEALTHY_TTL_S = 12


def test_a_trickling_or_hanging_vendor_delays_only_its_own_account(
    filling_pool, redis_url, unique_prefix, tmp_path
):
    listed = webshare(*((closed_port(), f"u{n}", "pw") for n in range(3)))
    with vendor_server() as hostile_base, vendor(listed) as healthy_url:
        hostile = ProviderAccount.objects.create(name="hostile", fetch_concurrency=4,
                                                 proxies_per_minute=1_000)  # fmt: skip
        for n, path in enumerate(("/trickle", "/hang", "/trickle", "/hang")):
            Upstream.objects.create(
                name=f"hostile-{n}", account=hostile, kind="preset", preset="webshare_list",
                endpoint_url=f"{hostile_base}{path}", allow_local_hosts=True,
                trust_provider=True, fetch_interval_s=1, max_size=10,
            )  # fmt: skip
        Upstream.objects.create(
            name="healthy-up", account=ProviderAccount.objects.create(name="healthy"),
            kind="preset", preset="webshare_list", endpoint_url=healthy_url,
            count_param="page_size", allow_local_hosts=True, trust_provider=True,
            fetch_interval_s=HEALTHY_INTERVAL_S, default_ttl_s=HEALTHY_TTL_S,
            safety_margin_s=2, fetch_timeout_s=5, max_size=10,
        )  # fmt: skip
        threads = settings.FETCH_WORKER_THREADS
        with celery_worker(tmp_path, redis_url, unique_prefix, threads=threads) as (worker, queue):
            from pool_admin.tasks import fetch_upstream_task

            def enqueue(payload: dict) -> None:
                fetch_upstream_task.apply_async((payload,), queue=queue)

            log = tmp_path / "worker.log"
            started = time.monotonic()
            available: list[tuple[float, int]] = []
            next_dispatch = started
            while time.monotonic() - started < HOSTILE_FOR_S:
                assert worker.poll() is None, log.read_text()[-3000:]
                if time.monotonic() >= next_dispatch:  # beat's dispatch, every second here
                    fetch_tasks.dispatch(fetch_tasks.now(), enqueue)
                    next_dispatch += 1
                slots = get_pool().upstream_inventory("healthy-up").available_slots
                available.append((time.monotonic() - started, slots))
                time.sleep(0.25)
    filled = [at for at, slots in available if slots]
    assert filled and filled[0] < 5, log.read_text()[-3000:]
    empty = [at for at, slots in available if at > filled[0] and not slots]
    assert not empty, f"the healthy pool was empty at {empty[:10]} s"
    asked = [at - started for at in healthy_url.asked_at]
    gaps = [later - earlier for earlier, later in itertools.pairwise(asked)]
    assert len(asked) >= HOSTILE_FOR_S / (2 * HEALTHY_INTERVAL_S), asked
    assert max(gaps) <= 2 * HEALTHY_INTERVAL_S, f"the healthy vendor went {max(gaps):.1f} s unasked"
    # The hostile account's four fetches were in flight meanwhile, each cut off at its read
    # timeout (hanging) or its deadline (trickling), and tried again.
    text = log.read_text()
    for n in range(4):
        assert text.count(f"fetch hostile-{n} failed") >= 2, text[-3000:]
    assert "did not answer within 20 s" in text, text[-3000:]
