"""pytest plugin (``-p tests.harness.plugin`` in pyproject): real Redis and PostgreSQL.

Before Django's settings are read, use the servers at TEST_REDIS_URL/REDIS_URL and DATABASE_URL
when they answer, else start private ones on free loopback ports under a temporary directory,
and point the environment at them. There is no skip path: a server that cannot be started ends
the run with an error (what CI=true requires; it holds everywhere).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from activity.redact import redact_url
from pool_admin.defaults import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL
from pool_admin.local_postgres import PostgresCluster
from pool_admin.localservices import RedisServer, postgres_answers, redis_answers
from tests.harness.check_target import CheckTargetServer, check_target


class _Harness:
    """What this run uses and what it started (to stop it at the end)."""

    def __init__(self) -> None:
        self.base_dir: Path | None = None
        self.redis_url = ""
        self.database_url = ""
        self.redis_server: RedisServer | None = None
        self.cluster: PostgresCluster | None = None

    def make_base_dir(self) -> Path:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="pp-test-"))
            # The postgres OS user (private clusters, as root) must be able to traverse it.
            self.base_dir.chmod(0o755)
        return self.base_dir

    def teardown(self) -> None:
        if self.redis_server is not None:
            self.redis_server.stop()
            self.redis_server = None
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None


_harness = _Harness()
atexit.register(_harness.teardown)  # also when pytest dies before pytest_unconfigure


def _start_servers() -> None:
    redis_url = os.environ.get("TEST_REDIS_URL") or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    if not redis_answers(redis_url):
        server = RedisServer(_harness.make_base_dir() / "redis")
        _harness.redis_server = server
        server.start()
        redis_url = server.url
        os.environ["METRICS_REDIS_URL"] = os.environ["CELERY_BROKER_URL"] = redis_url
    _harness.redis_url = os.environ["REDIS_URL"] = redis_url

    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if not postgres_answers(database_url):
        cluster = PostgresCluster(_harness.make_base_dir() / "postgres", fast=True)
        _harness.cluster = cluster
        cluster.start()
        database_url = cluster.url("pool_admin")
    _harness.database_url = os.environ["DATABASE_URL"] = database_url


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    # tryfirst: pytest-django's own (plain) implementation of this hook imports the settings,
    # which read the environment once; ours must have set it by then.
    assert "pool_admin.settings" not in sys.modules, "settings were read before the harness ran"
    os.environ.setdefault("POOL_DEV", "1")  # development secrets are fine in tests
    static_root = _harness.make_base_dir() / "static"
    static_root.mkdir(exist_ok=True)  # whitenoise warns about a missing STATIC_ROOT
    os.environ["RUN_DIR"] = str(_harness.base_dir)
    try:
        _start_servers()
    except Exception as exc:
        _harness.teardown()
        raise pytest.UsageError(f"test harness: could not start a private server: {exc}") from exc


def pytest_report_header(config: pytest.Config) -> list[str]:
    redis_kind = "private" if _harness.redis_server else "existing"
    pg_kind = "private" if _harness.cluster else "existing"
    return [
        f"harness redis ({redis_kind}): {redact_url(_harness.redis_url)}",
        f"harness postgres ({pg_kind}): {redact_url(_harness.database_url)}",
    ]


def pytest_unconfigure(config: pytest.Config) -> None:
    _harness.teardown()


@pytest.fixture(scope="module")
def target() -> Iterator[CheckTargetServer]:
    """A check URL's server on loopback (tests/harness/check_target.py), one per test module."""
    with check_target() as server:
        yield server


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the run's Redis: shared by all tests, so isolate by ``unique_prefix``."""
    return _harness.redis_url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client on the run's Redis. Never FLUSHDB: the server may be shared."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
    yield client
    client.close()


@pytest.fixture
def unique_prefix() -> str:
    """A key prefix no other test uses, e.g. ``t-1a2b3c4d5e6f``."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(autouse=True)
def _own_usage_stream(unique_prefix: str) -> Iterator[None]:
    """Every test's usage events on a stream of its own: never a running deployment's
    (``pp:{metrics}:events`` on a shared Redis), never another test's. (Django's
    override_settings, not pytest-django's ``settings``: a test may name a parameter so.)"""
    from django.test import override_settings

    with override_settings(METRICS_STREAM=f"{unique_prefix}:{{metrics}}:events",
                           METRICS_DEAD_LETTER=f"{unique_prefix}:{{metrics}}:dead"):  # fmt: skip
        yield


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], RedisServer]]:
    """Factory of started Redis servers the test owns (may stop, kill, restart them)."""
    servers: list[RedisServer] = []

    def make() -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("private-redis"))
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.kill()


@pytest.fixture
def private_postgres() -> Iterator[Callable[[], PostgresCluster]]:
    """Factory of started PostgreSQL clusters the test owns (fast: no fsync; may stop or kill
    them). Each lives in its own directory that the ``postgres`` OS user can reach (not
    tmp_path: its parents are 0700); what is still running at the end is stopped."""
    made: list[tuple[PostgresCluster, Path]] = []

    def make() -> PostgresCluster:
        directory = Path(tempfile.mkdtemp(prefix="pp-test-pg-"))
        directory.chmod(0o755)
        cluster = PostgresCluster(directory / "data", fast=True)
        made.append((cluster, directory))
        cluster.start()
        return cluster

    yield make
    for cluster, directory in made:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
