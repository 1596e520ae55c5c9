"""activity/redis/direct.py: a dropped or cut connection never fails or misleads a later call."""

from __future__ import annotations

import time

import pytest
import redis

from activity.redis import direct

pytestmark = pytest.mark.redis

#: Keeps the server busy for 20 ms.
_BUSY_20MS = """
local function now() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end
local started = now()
while now() - started < 20000 do end
return 1
"""


def _client_id(pool: redis.ConnectionPool) -> int:
    return direct.pooled_call(pool, "CLIENT", "ID")


def test_a_connection_the_server_closed_is_replaced_before_the_command(redis_url):
    pool = redis.ConnectionPool.from_url(redis_url)
    first = _client_id(pool)
    admin = redis.Redis.from_url(redis_url)
    assert admin.client_kill_filter(_id=first) == 1
    second = _client_id(pool)  # no error: the closed connection was found and replaced
    assert second != first


def test_a_stopped_server_is_an_error_and_a_restarted_one_is_reached(private_redis):
    server = private_redis()
    pool = redis.ConnectionPool.from_url(server.url, socket_timeout=1, socket_connect_timeout=1)
    assert direct.pooled_call(pool, "SET", "k", "v")
    server.kill()
    with pytest.raises(redis.ConnectionError):
        direct.pooled_call(pool, "GET", "k")
    server.start()
    assert direct.pooled_call(pool, "GET", "k") is None  # nothing kept: a new server


def test_a_reply_cut_by_a_timeout_is_never_read_by_the_next_call(redis_url):
    pool = redis.ConnectionPool.from_url(redis_url, socket_timeout=0.005)
    with pytest.raises(redis.TimeoutError):
        direct.pooled_call(pool, "EVAL", _BUSY_20MS, 0)
    time.sleep(0.1)  # the script's reply has been sent by now, to a connection closed since
    assert direct.pooled_call(pool, "ECHO", "after") == b"after"
