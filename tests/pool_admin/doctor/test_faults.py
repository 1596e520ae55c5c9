"""``manage.py doctor`` as an operator runs it, against a deployment with one part stopped: the
pool's Redis, PostgreSQL, beat, a gateway worker. Each time it exits 1 and its failing line
names the part; nothing else fails for it (what reads through a dead store is "not
checked"), nothing prints a traceback or a password. (A whole ``make run`` passing the doctor:
tests/pool_admin/test_launcher.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pool_admin import bootstrap
from pool_admin.config.models import GatewayWorker, Heartbeat, WorkerGroup, WorkerToken
from pool_admin.doctor import processes
from pool_admin.doctor.findings import Status
from pool_admin.launcher import Child, stop_children
from tests.harness.commands import REPO, database_url_of_test_db, manage
from tests.harness.gateway_process import gateway_worker_process
from tests.harness.metrics import wait_until
from tests.harness.web_server import project_env, project_web_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.fault,
]


def doctor(redis_url: str, prefix: str, **env: str) -> tuple[int, dict[str, str], str]:
    """Exit status, each check's line by name, and the whole output."""
    where = {**project_env(redis_url, prefix, REPO / ".run"), **env}
    began = time.monotonic()
    done = manage("doctor", "--timeout", "8", **where)
    assert time.monotonic() - began < 30
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    lines = {line.split()[1]: line for line in done.stdout.splitlines()[:-1]}
    assert done.stdout.splitlines()[-1].startswith("doctor: ")
    return done.returncode, lines, output


def status_of(line: str) -> str:
    return line.split()[0]


def test_the_pools_redis_stopped(private_redis, unique_prefix):
    server = private_redis()
    url = server.url.replace("redis://", "redis://:pw-not-printed@")
    server.stop()
    code, lines, output = doctor(url, unique_prefix)
    assert code == 1
    assert lines["redis:pool"].startswith("FAIL  redis:pool")
    assert "Connection refused" in lines["redis:pool"]
    for dependant in ("lua:pool", "clock", "celery", "metrics-consumer", "gateway"):
        assert status_of(lines[dependant]) == "--", lines[dependant]
    assert status_of(lines["postgres"]) == "ok"
    assert "pw-not-printed" not in output


def test_postgresql_stopped(private_postgres, redis_url, unique_prefix):
    cluster = private_postgres()
    database = cluster.url("postgres")
    cluster.stop()
    code, lines, _ = doctor(redis_url, unique_prefix, DATABASE_URL=database)
    assert code == 1
    assert lines["postgres"].startswith("FAIL  postgres")
    for dependant in ("beat", "gateway", "alerts"):
        assert lines[dependant].split()[0] == "--", lines[dependant]
        assert lines[dependant].endswith("not checked: postgres failed")
    assert status_of(lines["redis:pool"]) == "ok"


@pytest.mark.slow
def test_beat_stopped(private_redis, unique_prefix, tmp_path):
    broker = private_redis().url  # what beat sends goes where no worker of the machine listens
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_test_db(),
        "REDIS_URL": broker,
        "CELERY_BROKER_URL": broker,
        "POOL_PREFIX": unique_prefix,
        "POOL_DEV": "1",
        "BEAT_HEARTBEAT_S": "1",
        "BEAT_HEARTBEAT_MAX_AGE_S": "3",
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "pool_admin.settings",
    }
    with (tmp_path / "beat.log").open("wb") as log:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "pool_admin", "beat", "--loglevel", "INFO"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: Heartbeat.objects.filter(role="beat").exists(), 30, "beat's heartbeat")
        fresh = {"BEAT_HEARTBEAT_S": "1", "BEAT_HEARTBEAT_MAX_AGE_S": "3"}
        code, lines, _ = doctor(broker, unique_prefix, **fresh)
        assert lines["beat"].startswith("ok    beat"), lines["beat"]
    finally:
        stop_children([Child("beat", beat)], timeout=15)
    time.sleep(4)  # past BEAT_HEARTBEAT_MAX_AGE_S
    code, lines, _ = doctor(broker, unique_prefix, **fresh)
    assert code == 1
    assert lines["beat"].startswith("FAIL  beat"), lines["beat"]
    assert "limit 3 s" in lines["beat"]
    assert not list(Path(tmp_path).glob("celerybeat*")), "beat wrote a schedule file"


@pytest.mark.slow
def test_a_gateway_worker_stopped(redis_url, unique_prefix, tmp_path):
    group = WorkerGroup.objects.create(name="edge", target_capacity=10)
    worker = GatewayWorker.objects.create(name="edge-1", group=group)
    _, token = WorkerToken.objects.issue(worker)
    fast = {
        "GATEWAY_SESSION_TTL_S": "5",
        "GATEWAY_SNAPSHOT_INTERVAL_S": "1",
        "GATEWAY_REPORT_INTERVAL_S": "1",
    }
    bootstrap.point_at(redis_url, unique_prefix)
    try:
        with project_web_server(redis_url, unique_prefix, tmp_path, workers=1, env=fast) as port:
            with gateway_worker_process(port, token) as (proc, _):
                wait_until(
                    lambda: (
                        processes.check_gateway()[0].status is Status.OK
                        and processes.check_gateway()[0].summary.startswith("1 live")
                    ),
                    20,
                    "the worker's session, snapshot ACK and report",
                )
                code, lines, _ = doctor(redis_url, unique_prefix)
                assert lines["gateway"].startswith("ok    gateway  "), lines["gateway"]
                proc.send_signal(signal.SIGKILL)  # a crash: no goodbye to the control plane
                proc.wait(10)
            wait_until(
                lambda: processes.check_gateway()[0].status is Status.FAIL,
                15,
                "the dead worker's session to expire",
            )
            code, lines, _ = doctor(redis_url, unique_prefix)
    finally:
        bootstrap.reset()
    assert code == 1
    assert lines["gateway"].endswith(
        "1 enabled worker(s) without a live session: edge-1 -> start them (manage.py "
        "gateway_worker NAME), or disable the ones retired"
    )


def test_a_bad_timeout_is_one_line_and_checks_nothing(redis_url, unique_prefix):
    where = project_env(redis_url, unique_prefix, REPO / ".run")
    done = manage("doctor", "--timeout", "0", **where)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == "CommandError: --timeout must be between 1 and 120, got 0"
