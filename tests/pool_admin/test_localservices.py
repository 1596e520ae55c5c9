"""Private Redis and PostgreSQL servers: real processes, started and stopped by the test."""

import os
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
import redis

from pool_admin.local_postgres import PostgresCluster, cluster_datadir
from pool_admin.localservices import (
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


def test_make_runs_cluster_starts_from_a_directory_only_its_owner_may_enter(traversable_dir):
    """As root from a home directory of mode 0700, initdb (run as postgres) could not reach
    ``.run/``: the cluster goes under a shared directory of root's instead, one per checkout,
    and ``.run/postgres.location`` says where. Not as root, it stays in ``.run/``."""
    home = traversable_dir / "home"
    home.mkdir(mode=0o700)
    run_dir = home / "proxy-pool" / ".run"
    shared = traversable_dir / "shared"
    datadir = cluster_datadir(run_dir, shared)
    if os.geteuid() != 0:
        assert datadir == run_dir / "postgres"
        return
    assert datadir.parent.parent == shared
    assert (run_dir / "postgres.location").read_text().strip() == str(datadir)
    assert cluster_datadir(run_dir, shared) == datadir  # the same place every run
    other = cluster_datadir(home / "other-clone" / ".run", shared)
    assert other != datadir
    cluster = PostgresCluster(datadir, fast=True)
    try:
        cluster.start()
        assert postgres_answers(cluster.url())
    finally:
        cluster.stop()
    # A traversable run directory keeps its cluster: nothing moves for anyone else.
    assert (
        cluster_datadir(traversable_dir / ".run", shared) == traversable_dir / ".run" / "postgres"
    )


def test_a_shared_directory_another_user_may_write_is_refused(traversable_dir):
    """Root chowns the cluster to postgres inside it: a directory others may write could have
    the data directory swapped under it. (Not as root, nothing is moved, so nothing refused.)"""
    home = traversable_dir / "home"
    home.mkdir(mode=0o700)
    shared = traversable_dir / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    if os.geteuid() != 0:
        assert cluster_datadir(home / ".run", shared) == home / ".run" / "postgres"
        return
    with pytest.raises(RuntimeError, match="only root may write"):
        cluster_datadir(home / ".run", shared)
