"""Private Redis and PostgreSQL servers: real processes, started and stopped by the test."""

import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
import redis

from pool_admin.localservices import (
    PostgresCluster,
    RedisServer,
    create_database_if_missing,
    ensure_installed,
    is_loopback,
    postgres_answers,
    redis_answers,
)


@pytest.fixture
def traversable_dir():
    # Not tmp_path: its parents are 0700, and a cluster run as the postgres user must reach it.
    path = Path(tempfile.mkdtemp(prefix="pp-ls-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_is_loopback():
    assert is_loopback("redis://127.0.0.1:6379/0")
    assert is_loopback("postgresql://u@localhost/db")
    assert is_loopback("redis://[::1]:6379/0")
    assert not is_loopback("redis://10.1.2.3:6379/0")
    assert not is_loopback("redis://cache.internal/0")


def test_ensure_installed_is_a_no_op_when_binaries_exist(capsys):
    ensure_installed()
    assert "binaries are present" in capsys.readouterr().out


@pytest.mark.fault
def test_private_redis_start_kill_restart(private_redis):
    server = private_redis()
    url = server.url
    client = redis.Redis.from_url(url, socket_timeout=1)
    client.set("k", "v")
    assert client.get("k") == b"v"
    pid = server.pid

    server.kill()
    assert server.pid is None and not server.running
    assert not redis_answers(url)
    with pytest.raises(redis.ConnectionError):
        client.ping()

    server.restart()
    assert server.url == url and server.pid != pid
    assert client.get("k") is None  # no persistence: a restart starts empty
    client.close()
    server.stop()
    assert not redis_answers(url)


def test_private_redis_refuses_a_port_another_server_holds(private_redis, tmp_path):
    holder = private_redis()
    with pytest.raises(RuntimeError, match="exited"):
        RedisServer(tmp_path, port=holder.port).start(timeout=5)
    assert redis_answers(holder.url)


@pytest.mark.slow
def test_postgres_cluster_start_create_database_stop(traversable_dir):
    cluster = PostgresCluster(traversable_dir / "pg", fast=True)
    try:
        cluster.start()
        assert cluster.pid is not None
        assert postgres_answers(cluster.url())
        url = cluster.url("made_here")
        assert create_database_if_missing(url) is True
        assert create_database_if_missing(url) is False
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("made_here",)
    finally:
        cluster.stop()
    assert cluster.pid is None
    assert not postgres_answers(cluster.url())
