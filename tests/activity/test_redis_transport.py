"""activity/redis/_transport.py: a dropped, cut or frozen connection never fails or misleads a
later call, and the active deadline bounds every wait on the socket."""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
import redis

from activity import ExtractRequest
from activity.deadline import deadline
from activity.errors import DeadlineExceeded, StoreUnavailable
from activity.redis import RedisPool
from activity.redis_transport import bounded_client, pooled_call
from pool_admin.localservices import RedisServer

pytestmark = pytest.mark.redis

DEADLINE = timedelta(milliseconds=250)
#: What a call cut at DEADLINE may take beyond it (a loaded machine's scheduling, the error's
#: handling); far below the 2 s socket timeout the deadline has to beat.
SLACK_S = 0.5


def _client_id(pool: redis.ConnectionPool) -> int:
    return pooled_call(pool, "CLIENT", "ID")


@pytest.fixture
def pools() -> Iterator[Callable[..., redis.ConnectionPool]]:
    """Makes connection pools (``from_url``), each disconnected at the end."""
    made: list[redis.ConnectionPool] = []

    def make(url: str, **kwargs: object) -> redis.ConnectionPool:
        made.append(redis.ConnectionPool.from_url(url, **kwargs))
        return made[-1]

    yield make
    for pool in made:
        pool.disconnect()


@pytest.fixture
def bounded(server) -> Iterator[Callable[[timedelta], redis.ConnectionPool]]:
    """Makes the connection pools of ``bounded_client`` on the test's server."""
    made: list[redis.Redis] = []

    def make(timeout: timedelta) -> redis.ConnectionPool:
        made.append(bounded_client(redis.Redis.from_url(server.url), timeout))
        return made[-1].connection_pool

    yield make
    for client in made:
        client.connection_pool.disconnect()


def test_a_connection_the_server_closed_is_replaced_before_the_command(redis_url, pools):
    pool = pools(redis_url)
    first = _client_id(pool)
    admin = redis.Redis(connection_pool=pools(redis_url))
    assert admin.client_kill_filter(_id=first) == 1
    second = _client_id(pool)  # no error: the closed connection was found and replaced
    assert second != first


def test_a_stopped_server_is_an_error_and_a_restarted_one_is_reached(private_redis, pools):
    server = private_redis()
    pool = pools(server.url, socket_timeout=1, socket_connect_timeout=1)
    assert pooled_call(pool, "SET", "k", "v")
    server.kill()
    with pytest.raises(redis.ConnectionError):
        pooled_call(pool, "GET", "k")
    server.start()
    assert pooled_call(pool, "GET", "k") is None  # nothing kept: a new server


def test_a_reply_cut_by_a_timeout_is_never_read_by_the_next_call(redis_url, unique_prefix, pools):
    pool = pools(redis_url, socket_timeout=0.05)
    # BLPOP on a key nobody pushes to answers (nil) after its own 500 ms timeout: a wait every
    # server honours (a script busy-waiting on TIME never ends on Valkey, which freezes TIME
    # for a script's whole run).
    with pytest.raises(redis.TimeoutError):
        pooled_call(pool, "BLPOP", f"{unique_prefix}:never-pushed", 0.5)
    time.sleep(0.6)  # the BLPOP's reply has been sent by now, to a connection closed since
    assert pooled_call(pool, "ECHO", "after") == b"after"


# ---------------------------------------------------------------------- deadlines


@contextmanager
def _frozen(server: RedisServer) -> Iterator[None]:
    """The server process stopped: the kernel still accepts connections, nothing answers."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


def _bounded_by_the_deadline(call: Callable[[], object], error: type[Exception]) -> None:
    started = time.monotonic()
    with deadline(DEADLINE), pytest.raises(error):
        call()
    elapsed = time.monotonic() - started
    assert DEADLINE.total_seconds() <= elapsed < DEADLINE.total_seconds() + SLACK_S, elapsed


def _extract(pool: RedisPool) -> Callable[[], object]:
    return lambda: pool.extract(ExtractRequest("c1", 1, request_id=uuid.uuid4().hex))


@pytest.fixture
def server(private_redis) -> RedisServer:
    return private_redis()


@pytest.fixture
def redis_pool(server) -> Iterator[Callable[[], RedisPool]]:
    """Makes RedisPools on the test's server with the default call timeout (2 s), which the
    deadline has to beat; each closed at the end."""
    made: list[RedisPool] = []

    def make() -> RedisPool:
        made.append(RedisPool(redis.Redis.from_url(server.url)))
        return made[-1]

    yield make
    for pool in made:
        pool.close()


def test_a_frozen_server_costs_a_call_its_deadline_not_the_socket_timeout(server, redis_pool):
    pool = redis_pool()
    assert pool.extract(ExtractRequest("c1", 1)).returned == 0  # connected, library loaded
    with _frozen(server):
        # A replay-safe extract (request ID): not retried past its deadline either.
        _bounded_by_the_deadline(_extract(pool), DeadlineExceeded)
        _bounded_by_the_deadline(lambda: pool.get("p1"), StoreUnavailable)
    # The cut calls' connections were dropped: later calls read their own replies.
    assert pool.extract(ExtractRequest("c1", 1)).returned == 0
    assert pool.get("p1") is None


def test_connecting_to_a_frozen_server_is_bounded_by_the_deadline_too(server, redis_pool):
    with _frozen(server):
        pool = redis_pool()  # no connection yet: the call's connect and handshake wait
        _bounded_by_the_deadline(_extract(pool), DeadlineExceeded)
    assert pool.extract(ExtractRequest("c1", 1)).returned == 0


def test_a_deadline_longer_than_the_socket_timeout_leaves_the_socket_timeout(server, bounded):
    pool = bounded(timedelta(milliseconds=100))
    assert pooled_call(pool, "PING")
    with _frozen(server):
        started = time.monotonic()
        with deadline(timedelta(seconds=30)), pytest.raises(redis.TimeoutError):
            pooled_call(pool, "PING")
        assert time.monotonic() - started < 0.1 + SLACK_S


class _SetTimeoutCalls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[float | None] = []
        original = socket.socket.settimeout

        def counting(sock: socket.socket, value: float | None) -> None:
            self.calls.append(value)
            original(sock, value)

        monkeypatch.setattr(socket.socket, "settimeout", counting)


def test_a_call_without_a_deadline_sets_no_socket_timeout(bounded, monkeypatch):
    """The extract's hot path: no system call for deadlines when none is active."""
    pool = bounded(timedelta(seconds=2))
    assert pooled_call(pool, "PING")  # connected outside the count
    settimeout = _SetTimeoutCalls(monkeypatch)
    for _ in range(20):
        assert pooled_call(pool, "PING")
    assert redis.Redis(connection_pool=pool).ping()  # redis-py's own path, same connections
    assert settimeout.calls == []

    with deadline(timedelta(seconds=1)):
        assert pooled_call(pool, "PING")
    assert len(settimeout.calls) == 1 and 0 < settimeout.calls[0] <= 1  # type: ignore[operator]
    assert pooled_call(pool, "PING")  # the configured timeout back, once
    assert settimeout.calls[1:] == [2.0]
    assert pooled_call(pool, "PING")
    assert settimeout.calls[2:] == []


def test_a_deadline_that_passes_before_the_command_is_sent_sends_nothing(bounded):
    pool = bounded(timedelta(seconds=2))
    assert pooled_call(pool, "SET", "k", "before")
    with deadline(timedelta(0)), pytest.raises(DeadlineExceeded, match="nothing changed"):
        pooled_call(pool, "SET", "k", "after")
    assert pooled_call(pool, "GET", "k") == b"before"
