"""RedisScheduler with real processes and threads at once, on real time: what the contract's
one caller cannot show. Dispatchers racing on one account never run it past its concurrency
or its call budget; a fetch whose process is killed loses its lease and is claimed again."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis

from activity._time import to_ms
from activity.scheduler import AccountLimits, Claim
from activity.scheduler.redis import RedisScheduler
from activity.scheduler.types import MAX_CALLS_PER_MINUTE, MAX_GRANTS_PER_MINUTE
from tests.harness.commands import REPO

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(redis_url):
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    yield client
    client.close()


def test_dispatchers_at_once_never_run_one_account_past_its_concurrency_or_budget(client, prefix):
    scheduler = RedisScheduler(client, prefix=prefix)
    limits = AccountLimits(concurrency=2, calls_per_second=20)
    for n in range(5):
        scheduler.schedule("a1", f"u{n}", now())
    lock = threading.Lock()
    running: set[str] = set()
    most_at_once = 0
    claimed_at: list[datetime] = []
    errors: list[BaseException] = []

    def dispatcher() -> None:
        nonlocal most_at_once
        try:
            ends = time.monotonic() + 2
            while time.monotonic() < ends:
                at = now()
                result = scheduler.claim(at, "a1", limits, timedelta(seconds=5))
                if not isinstance(result, Claim):
                    time.sleep(0.001)
                    continue
                with lock:
                    assert result.upstream_id not in running, "one upstream twice at once"
                    running.add(result.upstream_id)
                    most_at_once = max(most_at_once, len(running))
                    claimed_at.append(at)
                time.sleep(0.002)  # the fetch
                with lock:  # off the books before its place is freed
                    running.discard(result.upstream_id)
                scheduler.finish(now(), result, now())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=dispatcher) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert most_at_once == 2  # reached, never passed
    assert len(claimed_at) >= 30  # the budget, not the dispatchers, held it back
    # Every claim took one call: no window of one second holds more than 20 of them, on the
    # scheduler's millisecond clock (a call at t ms counts until t + 1000).
    ms = sorted(to_ms(t) for t in claimed_at)
    for i, start in enumerate(ms):
        inside = [t for t in ms[i:] if t < start + 1000]
        assert len(inside) <= 20, (start, len(inside))


def test_a_fetch_whose_process_is_killed_is_claimed_again_once_its_lease_ends(
    client, prefix, redis_url
):
    scheduler = RedisScheduler(client, prefix=prefix)
    scheduler.schedule("a1", "u1", now())
    code = (
        "import sys, time, redis\n"
        "from datetime import UTC, datetime, timedelta\n"
        "from activity.scheduler import AccountLimits\n"
        "from activity.scheduler.redis import RedisScheduler\n"
        f"s = RedisScheduler(redis.Redis.from_url({redis_url!r}), prefix={prefix!r})\n"
        "c = s.claim(datetime.now(UTC), 'a1', AccountLimits(), timedelta(seconds=1))\n"
        "print(c.upstream_id, flush=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "u1"
    finally:
        worker.kill()
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()
    lease = timedelta(seconds=30)
    assert not isinstance(scheduler.claim(now(), "a1", AccountLimits(), lease), Claim)
    deadline = time.monotonic() + 5
    while not isinstance(again := scheduler.claim(now(), "a1", AccountLimits(), lease), Claim):
        assert time.monotonic() < deadline, again
        time.sleep(0.05)
    assert again.upstream_id == "u1"


def test_the_call_log_keeps_the_newest_calls_that_any_limit_can_need(client, prefix):
    """Also for an account with no call limit: its log holds MAX_CALLS_PER_MINUTE at most."""
    scheduler = RedisScheduler(client, prefix=prefix)
    scheduler.schedule("a1", "u1", now())
    claim = scheduler.claim(now(), "a1", AccountLimits(), timedelta(minutes=5))
    assert isinstance(claim, Claim)
    for _ in range(MAX_CALLS_PER_MINUTE + 50):
        assert scheduler.take_call(now(), claim, AccountLimits()) is None
    [key] = client.keys(f"{prefix}:{{sched}}:acct:*:calls")
    assert client.zcard(key) == MAX_CALLS_PER_MINUTE
    limited = AccountLimits(calls_per_minute=MAX_CALLS_PER_MINUTE)
    assert scheduler.take_call(now(), claim, limited) is not None  # the newest say: full


def test_the_proxy_grants_log_keeps_a_minutes_worth_and_then_grants_nothing(client, prefix):
    scheduler = RedisScheduler(client, prefix=prefix)
    scheduler.schedule("a1", "u1", now())
    claim = scheduler.claim(now(), "a1", AccountLimits(), timedelta(minutes=5))
    assert isinstance(claim, Claim)
    for _ in range(MAX_GRANTS_PER_MINUTE):
        assert scheduler.take_proxies(now(), claim, AccountLimits(), 1) == 1
    assert scheduler.take_proxies(now(), claim, AccountLimits(), 1) == 0  # fails closed
    [key] = client.keys(f"{prefix}:{{sched}}:acct:*:proxies")
    assert client.zcard(key) == MAX_GRANTS_PER_MINUTE
