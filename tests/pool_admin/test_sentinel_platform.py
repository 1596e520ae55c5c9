"""The control plane's other Redis clients through one Sentinel failover (issue 26): the fetch
scheduler's leases and an upsert (a dispatch and its fetch task, pool_admin/fetch_tasks.py) and
the usage stream's consumer (pool_admin/metrics/consumer.py) on a Redis whose primary is lost
with writes the replica never got: the consumer's acknowledgements. Each carries on from the
new master within a bound; the consumer resumes from its group's position there and counts
nothing twice in PostgreSQL (the applied stream IDs recorded with the aggregates). The pool's
own extracts: tests/activity/test_sentinel_failover.py; Celery's worker:
tests/pool_admin/test_sentinel_celery.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest
import redis

from activity.errors import ActivityError
from activity.redis_url import connect
from activity.types import ExtractFilters, ExtractRequest
from pool_admin import bootstrap, fetch_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import AppliedEntry, UpstreamQuality
from pool_admin.forward_proxies import Tinyproxy
from pool_admin.metrics.consumer import Consumer, ConsumerOptions
from tests.harness.metrics import consumer_running, entry, wait_until
from tests.harness.sentinel import SentinelDeployment
from tests.harness.webshare_vendor import vendor, webshare
from tests.pool_admin.test_fetch_tasks import configure

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the consumer's thread sees what is committed
    pytest.mark.postgres,
    pytest.mark.fault,
    pytest.mark.slow,
]

#: From the primary's death to a fetch claimed, run and upserted through the new master.
FETCH_WITHIN_S = 10.0
#: From the primary's death to the consumer done with every entry there: Sentinel's failover
#: (about 1.5 s here), then the consumer's backoff (0.5, 1, 2, 4 s: its next try after the
#: new master is up comes within 4 s).
CONSUMER_WITHIN_S = 20.0
AT_MS = 29_666_666 * 60_000

T = TypeVar("T")


def _until_it_answers(call: Callable[[], T], within: float, what: str) -> T:
    """``call()``'s first answer, asked every 0.1 s while there is no master."""
    deadline = time.monotonic() + within
    while True:
        try:
            return call()
        except (ActivityError, redis.RedisError):
            assert time.monotonic() < deadline, f"{what}: no answer within {within} s"
            time.sleep(0.1)


def _produce(client: redis.Redis, stream: str, n: int) -> None:
    for i in range(n):
        one = entry(("outcome", AT_MS + i, {"upstream": "u1", "outcome": "ok"}))
        client.xadd(stream, one)  # type: ignore[arg-type]


def _counted() -> int:
    return sum(row.ok for row in UpstreamQuality.objects.all())


@pytest.fixture
def deployment(tmp_path):
    with SentinelDeployment(tmp_path) as running:
        yield running


@pytest.fixture
def tinyproxy(tmp_path):
    with Tinyproxy(tmp_path / "tinyproxy", "demo1", "pw1") as proxy:
        yield proxy


def test_a_fetch_and_the_metrics_consumer_carry_on_through_a_failover_that_lost_writes(
    deployment, tinyproxy, target, unique_prefix
):
    bootstrap.point_at(deployment.url, unique_prefix)
    client = connect(deployment.url, socket_timeout=2, socket_connect_timeout=1)
    options = ConsumerOptions(stream=f"{unique_prefix}:{{metrics}}:events", group="aggregates",
                              dead_letter=f"{unique_prefix}:{{metrics}}:dead", batch=20,
                              block_ms=100, claim_idle_ms=60_000, claim_every_s=0.2,
                              max_deliveries=50)  # fmt: skip
    consumer = Consumer(client, "c1", options)
    try:
        with vendor(webshare((tinyproxy.port, "demo1", "pw1"))) as url:
            # Under its low-water mark after each fetch: due again at once, on any master.
            configure(url, target, low_water_mark=5, refill_cooldown_s=0)
            claims: list[dict] = []
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
            assert fetch_tasks.run_fetch(claims.pop()) is not None
            nowhere = ExtractFilters(region="nowhere")  # the generation, nothing handed out
            before = get_pool().extract(ExtractRequest("c0", 1, filters=nowhere)).generation

            consumer.ensure_group()
            _produce(client, options.stream, 100)
            deployment.synced()  # the entries and the group are on the replica
            with deployment.replication_held():
                with consumer_running(consumer):
                    wait_until(lambda: _counted() == 100, 20, "the first 100 applied")
                    wait_until(lambda: not client.xpending(options.stream, "aggregates")["pending"],
                               5, "the first 100 acknowledged")  # fmt: skip
                # Its acknowledgements never reached the replica.
                deployment.lose_primary()
            killed = time.monotonic()

            with consumer_running(consumer):
                # The fetch scheduler: a claim on the new master, a fetch, its upsert.
                _until_it_answers(
                    lambda: fetch_tasks.dispatch(fetch_tasks.now(), claims.append) or None,
                    FETCH_WITHIN_S,
                    "a dispatch",
                )
                while not claims:  # a dispatch that answered 0 (nothing due yet) is asked again
                    assert time.monotonic() - killed < FETCH_WITHIN_S, "no claim"
                    fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
                report = fetch_tasks.run_fetch(claims.pop())
                assert report is not None and report.reconcile.refreshed == 1, report
                fetched = time.monotonic() - killed
                assert fetched < FETCH_WITHIN_S, fetched
                after = get_pool().extract(ExtractRequest("c1", 5))
                assert len(after.proxies) == 1 and after.generation != before

                _until_it_answers(lambda: _produce(client, options.stream, 50), 10, "an XADD")
                # The 100 entries are pending again on the new master: delivered again, they
                # add nothing (their IDs are recorded with the aggregates).
                wait_until(lambda: _counted() == 150, CONSUMER_WITHIN_S, "150 applied")
                wait_until(
                    lambda: not client.xpending(options.stream, "aggregates")["pending"],
                    CONSUMER_WITHIN_S,
                    "everything acknowledged on the new master",
                )
            assert _counted() == 150
            assert AppliedEntry.objects.count() == 150
            assert consumer.duplicates == 100  # it resumed from the group's position there
            assert time.monotonic() - killed < CONSUMER_WITHIN_S
    finally:
        bootstrap.reset()
        client.close()
