"""A web server process for a test: started on a free port, waited for, stopped with its
process group; and the project's own web server so started, as ``make run`` runs it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from pool_admin.launcher import Child, stop_children, web_command
from pool_admin.localservices import free_port
from tests.harness.commands import database_url_of_test_db
from tests.harness.raw_http import exchange, request

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def project_web_server(
    redis_url: str,
    prefix: str,
    run_dir: Path,
    workers: int,
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[int]:
    """The port of the web server as ``make run`` runs it (``launcher.web_command``), with
    ``workers`` workers, on the test database and the pool under ``prefix``, with ``env`` added
    to its environment; its log is ``run_dir / "web.log"``. ``port``: that one (a server
    started again where its clients expect it), else a free one."""
    env = {**project_env(redis_url, prefix, run_dir), **(env or {})}
    command = partial(_web_command, workers=workers)
    with serving(command, run_dir / "web.log", env, port=port) as bound:
        yield bound


def _web_command(port: int, workers: int) -> list[str]:
    return web_command(f"127.0.0.1:{port}", workers)


def project_env(redis_url: str, prefix: str, run_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_of_test_db(),
        "REDIS_URL": redis_url,
        "METRICS_REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        "POOL_PREFIX": prefix,
        "POOL_DEV": "1",
        "RUN_DIR": str(run_dir),
        "DJANGO_SETTINGS_MODULE": "pool_admin.settings",
    }


@contextlib.contextmanager
def serving(
    command: Callable[[int], list[str]],
    log: Path,
    env: dict[str, str] | None = None,
    ready_path: str = "/healthz",
    port: int | None = None,
) -> Iterator[int]:
    """The port of ``command(port)`` run from the repository, once ``GET ready_path`` answers
    200 (at most 60 s); its output in ``log`` (appended to: a server started again keeps its
    first run's lines). ``port``: that one, else a free one. Stopped on the way out as
    ``make run`` stops its children (SIGTERM to the process group, SIGKILL after 15 s)."""
    port = free_port() if port is None else port
    with log.open("ab") as out:
        server = subprocess.Popen(
            command(port), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                ready = request("GET", ready_path, Host="127.0.0.1")
                if exchange(port, ready, 2)[0] == 200:
                    break
            assert server.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"{command(port)[:6]} did not start"
            time.sleep(0.1)
        yield port
    finally:
        stop_children([Child("web server", server)], timeout=15)
