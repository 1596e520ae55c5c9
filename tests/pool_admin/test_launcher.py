"""make run's launcher end to end: own servers, web + workers up, Ctrl-C leaves nothing behind."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from pool_admin.launcher import group_alive
from pool_admin.localservices import free_port

REPO = Path(__file__).resolve().parents[2]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return None, ""


def pgid_of(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError):
        return None


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launcher_starts_everything_and_sigint_stops_everything():
    run_dir = Path(tempfile.mkdtemp(prefix="pp-launch-"))
    run_dir.chmod(0o755)  # the postgres OS user must reach run_dir/postgres
    web = f"127.0.0.1:{free_port()}"
    env = {
        k: v for k, v in os.environ.items() if k not in ("METRICS_REDIS_URL", "CELERY_BROKER_URL")
    }
    env.update(
        RUN_DIR=str(run_dir),
        WEB_BIND=web,
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",  # nothing answers: it starts its own
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/pool_admin",
        ADMIN_PASSWORD="Launcher-Test-Pass-1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pool_admin.launcher"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    groups: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            status, _ = get(f"http://{web}/readyz")
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200, "".join(lines)
        status, html = get(f"http://{web}/admin/login/")
        assert status == 200 and "Proxy Pool" in html
        assert get(f"http://{web}/static/admin/css/base.css")[0] == 200  # whitenoise

        started = dict(re.findall(r"started (.+?) pid=(\d+)", "".join(lines)))
        children = {"web (granian)", "fetch worker", "check worker", "upkeep worker",
                    "celery beat", "metrics consumer"}  # fmt: skip
        assert {"redis-server", "postgres", *children} <= set(started)
        groups = {g for g in (pgid_of(int(pid)) for pid in started.values()) if g}

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=45) == 0
        reader.join(timeout=5)
        output = "".join(lines)
        assert "all stopped" in output
        assert not [g for g in groups if group_alive(g)], output
        assert "Launcher-Test-Pass-1" not in output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for group in groups:  # a failed run must not leave servers behind either
            if group_alive(group):
                os.killpg(group, signal.SIGKILL)
        if proc.stdout:
            proc.stdout.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def test_fetches_and_upkeep_run_on_workers_of_their_own():
    """A vendor call holds its fetch's thread up to its deadline: fetches go to the fetch
    worker's queue, a thread each; dispatches, rechecks, sweeps and ownership expiry to the
    upkeep worker's, so no fetch delays them (issue 22)."""
    from django.conf import settings

    from pool_admin.celery import app
    from pool_admin.launcher import child_commands

    def queue_of(task: str) -> str:
        return app.amqp.router.route({}, task, args=(), kwargs={})["queue"].name

    assert queue_of("pool_admin.fetch_upstream") == settings.FETCH_QUEUE
    assert queue_of("pool_admin.check_upstream") == settings.CHECK_QUEUE
    upkeep = ("dispatch_fetches", "dispatch_checks", "sweep_pool", "expire_ownership",
              "heartbeat", "keep_usage_bounded")  # fmt: skip
    for task in upkeep:
        assert queue_of(f"pool_admin.{task}") == settings.CELERY_TASK_DEFAULT_QUEUE
    assert (
        len({settings.FETCH_QUEUE, settings.CHECK_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE}) == 3
    )
    commands = dict(child_commands("127.0.0.1:8000"))

    def option(argv: list[str], name: str) -> str:
        return argv[argv.index(name) + 1]

    fetch, upkeep_worker = commands["fetch worker"], commands["upkeep worker"]
    assert (option(fetch, "-Q"), option(fetch, "--pool")) == (settings.FETCH_QUEUE, "threads")
    assert option(fetch, "--concurrency") == str(settings.FETCH_WORKER_THREADS)
    assert option(upkeep_worker, "-Q") == settings.CELERY_TASK_DEFAULT_QUEUE
    assert option(upkeep_worker, "--pool") == "threads"
    check_worker = commands["check worker"]
    assert (option(check_worker, "-Q"), option(check_worker, "--pool")) == ("checks", "threads")


def test_a_worker_raises_its_open_file_limit_to_what_its_checks_need():
    """32 threads of 200 checks each need thousands of sockets: the soft limit is raised (up
    to the hard one), and a hard limit below the need is said."""
    import resource

    from pool_admin.celery import room_for_connections

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert room_for_connections(512) == 512 == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
