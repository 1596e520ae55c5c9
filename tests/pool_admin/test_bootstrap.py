"""The composition root (pool_admin/bootstrap.py): one of each handle per process, also after a
fork; one reset; one way to point the pool and the scheduler elsewhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pool_admin import bootstrap
from pool_admin.api import call_log
from pool_admin.metrics import stream
from tests.harness.commands import run_python

pytestmark = [pytest.mark.redis]


@pytest.fixture(autouse=True)
def _forget_after():
    yield
    bootstrap.reset()


def test_each_handle_is_built_once_and_shared(redis_url, unique_prefix):
    bootstrap.point_at(redis_url, unique_prefix)
    assert bootstrap.get_pool() is bootstrap.get_pool()
    assert bootstrap.get_scheduler() is bootstrap.get_scheduler()
    assert bootstrap.fetch_credentials() is bootstrap.fetch_credentials()
    assert bootstrap.api_key_cache() is bootstrap.api_key_cache()
    assert bootstrap.worker_token_cache() is bootstrap.worker_token_cache()
    assert bootstrap.worker_token_cache() is not bootstrap.api_key_cache()
    assert bootstrap.event_stream() is bootstrap.event_stream()
    assert bootstrap.call_log() is bootstrap.call_log()


def test_point_at_builds_the_pool_and_the_scheduler_on_that_redis_under_that_prefix(
    redis_url, unique_prefix, redis_client
):
    bootstrap.point_at(redis_url, unique_prefix)
    assert bootstrap.target() == bootstrap.Target(redis_url, unique_prefix)
    bootstrap.get_pool().open_session("edge-1", "sess-1", timedelta(minutes=1))
    bootstrap.get_scheduler().schedule("acme", "acme-us", datetime.now(UTC))
    keys = {key.decode() for key in redis_client.scan_iter(f"{unique_prefix}:*", count=1000)}
    assert any(key.startswith(f"{unique_prefix}:{{activity}}:") for key in keys), keys
    assert any(key.startswith(f"{unique_prefix}:{{sched}}:") for key in keys), keys
    redis_client.delete(*keys)


def test_reset_forgets_every_handle_and_the_target(settings, redis_url, unique_prefix):
    bootstrap.point_at(redis_url, unique_prefix)
    pool, scheduler = bootstrap.get_pool(), bootstrap.get_scheduler()
    keys, credentials = bootstrap.api_key_cache(), bootstrap.fetch_credentials()
    tokens = bootstrap.worker_token_cache()
    stream.emit_event("expired", upstream="u1", used=0, unused=1)
    call_log.log_call({"event": "extract"})

    bootstrap.reset()
    assert bootstrap.target() == bootstrap.Target(settings.REDIS_URL, settings.POOL_PREFIX)
    assert bootstrap.get_pool() is not pool
    assert bootstrap.get_scheduler() is not scheduler
    assert bootstrap.api_key_cache() is not keys
    assert bootstrap.worker_token_cache() is not tokens
    assert bootstrap.fetch_credentials() is not credentials
    assert stream.queued_events() == 0  # written out, not left for the next test
    assert bootstrap.call_log()._lines == []


#: Run in a fresh interpreter: it forks, and this test process has threads of its own.
_FORK = """
import os, signal, sys, threading
import django
django.setup()
from pool_admin import bootstrap

bootstrap.point_at(sys.argv[1], sys.argv[2])
pool, scheduler = bootstrap.get_pool(), bootstrap.get_scheduler()
keys, credentials = bootstrap.api_key_cache(), bootstrap.fetch_credentials()
tokens = bootstrap.worker_token_cache()
assert pool.inventory("u1") == 0  # a connection of the parent's, open and pooled

# Another thread of the parent holds the root's lock when the process forks.
held, release = threading.Event(), threading.Event()
def hold():
    with bootstrap._lock:
        held.set()
        release.wait()
threading.Thread(target=hold, daemon=True).start()
held.wait()

child = os.fork()
if child == 0:
    signal.alarm(10)  # a child stuck on the parent's lock dies instead of hanging the test
    try:
        built = bootstrap.get_pool()
        own = (built is not pool, bootstrap.get_scheduler() is not scheduler,
               bootstrap.api_key_cache() is not keys,
               bootstrap.worker_token_cache() is not tokens,
               bootstrap.fetch_credentials() is not credentials)
        answered = built.inventory("u1") == 0 and bootstrap.get_scheduler().forget("a", "u")
        os._exit(0 if all(own) and answered is not None else 1)
    except BaseException as exc:
        print("child failed:", repr(exc), file=sys.stderr)
        os._exit(2)
release.set()
_, status = os.waitpid(child, 0)
print("child", os.waitstatus_to_exitcode(status))
print("parent", bootstrap.get_pool() is pool, pool.inventory("u1"))
"""


def test_a_forked_child_builds_its_own_handles_and_its_parent_keeps_working(
    redis_url, unique_prefix
):
    """Celery's prefork workers and the web server's workers are forked: a child never uses a
    connection of its parent's, never waits on a lock a parent's thread held at the fork, and
    leaves the parent's connections working."""
    result = run_python(
        "-c", _FORK, redis_url, unique_prefix, DJANGO_SETTINGS_MODULE="pool_admin.settings"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["child 0", "parent True 0"], result.stderr
