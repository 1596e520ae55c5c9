"""``python -m pool_admin.launcher`` (``make run``): the whole stack in the foreground.

Starts private Redis/PostgreSQL under RUN_DIR when nothing answers at a loopback URL, prepares
the database (create, migrate, collectstatic, ensure_admin, ensure_demo), then runs the web
server (granian), three Celery workers, Celery beat, the usage stream's consumer (``manage.py
consume_metrics``) and a gateway worker, each in its own process group. On SIGINT/SIGTERM, or
when any child dies, it stops the children (SIGTERM, then SIGKILL after a timeout), then the
servers it started itself (never pre-existing ones), and exits. No Django import: Django runs
in the children.

The terminal stays readable: a line per process as it starts (with its log file), the ready
banner, then only the children's warnings and errors (pool_admin/run_logs.py) and a status
line every ``RUN_STATUS_INTERVAL_S`` (pool_admin/run_status.py). Everything else is in the log
files under ``$RUN_DIR/logs/``. Generated secrets reach the terminal, never a log file. As
root, Celery runs as an unprivileged user when it can (pool_admin/run_user.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from activity.env import EnvError, env_int
from activity.redact import redact_text, redact_url
from activity.redis_url import is_sentinel_url
from pool_admin.defaults import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL
from pool_admin.demo_proxies import DemoProxies
from pool_admin.local_postgres import PostgresCluster, cluster_datadir
from pool_admin.localservices import (
    RedisServer,
    create_database_if_missing,
    ensure_installed,
    is_loopback,
    postgres_answers,
    redis_answers,
    url_port,
)
from pool_admin.run_logs import Echo, LogTail, log_name, open_log
from pool_admin.run_setup import SETUP_STEPS, LaunchError, banner, manage, say
from pool_admin.run_status import StatusReporter
from pool_admin.run_user import RunAs, celery_user

REPO_DIR = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 60.0


class StopFlag:
    """Set by SIGINT/SIGTERM; the main loop polls it, so no handler ever runs cleanup itself."""

    def __init__(self) -> None:
        self.signum: int | None = None
        signal.signal(signal.SIGINT, self._handle)
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        if self.requested:
            raise LaunchError(f"stopped by {signal.Signals(self.signum or 0).name} during setup")


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    #: Where its stdout and stderr go (None: the launcher's own, as in the test harness).
    log_path: Path | None = None
    echo: Echo | None = field(default=None, repr=False)

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session makes each child its group's leader


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in process group ``pgid`` (scans /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def stop_children(children: list[Child], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every group, wait up to ``timeout`` for all of them, then SIGKILL the rest."""
    for child in reversed(children):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for child in children:
        while time.monotonic() < deadline and (
            child.proc.poll() is None or group_alive(child.pgid)
        ):
            time.sleep(0.1)
        if child.proc.poll() is None or group_alive(child.pgid):
            say(f"{child.name} did not stop in {timeout:.0f} s; killing its process group")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pgid, signal.SIGKILL)
        child.proc.wait()
        say(f"{child.name} stopped (exit {child.proc.returncode})")


def start_services(run_dir: Path, started: list[RedisServer | PostgresCluster]) -> None:
    """Start private servers for loopback URLs that do not answer, appending each to ``started``.

    Appending as we go lets the caller stop whatever did start when a later step fails.
    """
    redis_urls = {
        os.environ.get(name) or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
        for name in ("REDIS_URL", "METRICS_REDIS_URL", "CELERY_BROKER_URL")
    }
    ports_started: set[int] = set()
    for url in sorted(redis_urls):
        if is_sentinel_url(url):
            continue  # a deployment's Sentinel-managed Redis: never one make run starts
        port = url_port(url, 6379)
        if port in ports_started or redis_answers(url):
            continue
        if not is_loopback(url):
            raise LaunchError(
                f"Redis at {redact_url(url)} does not answer (not loopback: not starting one)"
            )
        server = RedisServer(run_dir / "redis", port=port)
        started.append(server)
        server.start()
        ports_started.add(port)
        say(f"started redis-server pid={server.pid} port={port} dir={server.directory}")

    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if not postgres_answers(database_url):
        if not is_loopback(database_url):
            raise LaunchError(
                f"PostgreSQL at {redact_url(database_url)} does not answer (not loopback)"
            )
        datadir = cluster_datadir(run_dir)
        cluster = PostgresCluster(datadir, port=url_port(database_url, 5432))
        started.append(cluster)  # appended first: a failed start may still leave a postmaster
        cluster.start()
        say(f"started postgres pid={cluster.pid} port={cluster.port} dir={cluster.datadir}")
    create_database_if_missing(database_url)


def stop_services(services: list[RedisServer | PostgresCluster]) -> None:
    for service in reversed(services):
        try:
            service.stop()
            say(f"stopped {type(service).__name__} on port {service.port}")
        except RuntimeError as exc:
            say(f"could not stop {type(service).__name__} on port {service.port}: {exc}")


def spawn(
    name: str, argv: list[str], logs_dir: Path | None = None, run_as: RunAs | None = None
) -> Child:
    """Start a child in its own session and process group (stopped as a unit, and not hit by
    the terminal's SIGINT); with ``logs_dir``, its output goes to ``logs_dir/<name>.log``, with
    ``run_as``, it runs as that user."""
    log: BinaryIO | None = None
    log_path = logs_dir / f"{log_name(name)}.log" if logs_dir else None
    extra = run_as.popen_kwargs(dict(os.environ)) if run_as else {}
    try:
        if log_path is not None:
            log = open_log(log_path, name)
        # Read from here on: measured before the child can write its first line.
        start = os.fstat(log.fileno()).st_size if log else 0
        proc = subprocess.Popen(  # noqa: S603
            argv,
            cwd=REPO_DIR,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log else None,
            start_new_session=True,
            **extra,
        )
    finally:
        if log is not None:
            log.close()  # the child has its own copy of the descriptor
    user = f" user={run_as.name}" if run_as else ""
    say(f"started {name} pid={proc.pid}{user}" + (f" log={log_path}" if log_path else ""))
    child = Child(name, proc, log_path)
    if log_path is not None:
        child.echo = Echo(name, LogTail(log_path, start), print_line)
    return child


def print_line(line: str) -> None:
    print(line, flush=True)


def pump_echoes(children: list[Child]) -> None:
    for child in children:
        if child.echo is not None:
            child.echo.pump()


def wait_until_serving(
    base_url: str,
    children: list[Child],
    stop: StopFlag,
    on_tick: Callable[[], None] | None = None,
) -> bool:
    """Poll /healthz until it answers; False if stopped, a child died or the time ran out."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and not stop.requested:
        if on_tick is not None:
            on_tick()
        if any(child.proc.poll() is not None for child in children):
            return False
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=1) as response:  # noqa: S310
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def supervise(
    children: list[Child], stop: StopFlag, on_tick: Callable[[], None] | None = None
) -> int:
    """Block until a signal (exit 0) or until any child exits (exit 1)."""
    while not stop.requested:
        if on_tick is not None:
            on_tick()
        for child in children:
            if child.proc.poll() is not None:
                say(f"{child.name} exited with {child.proc.returncode}; stopping everything")
                return 1
        time.sleep(0.2)
    say(f"received {signal.Signals(stop.signum or 0).name}; stopping everything")
    return 0


#: The children that run as an unprivileged user when the launcher is root.
CELERY_CHILDREN = frozenset({"fetch worker", "check worker", "upkeep worker", "celery beat"})


#: Seconds a web worker gets to finish its requests on shutdown before it is killed.
WEB_GRACE_S = 10
#: Connections a web worker serves at once (granian's --backpressure; more wait in the listen
#: backlog), and so requests: the server speaks HTTP/1 only, one request at a time per
#: connection. It bounds what a worker holds for clients that send slowly: request bodies in
#: memory (each at most DATA_UPLOAD_MAX_MEMORY_SIZE + 1, so 1.25 GiB per worker at the very
#: worst) and requests waiting for an application thread. 512 is granian's own default for 2
#: workers.
WEB_BACKPRESSURE = 512
#: What granian serves: the WSGI application (pool_admin/wsgi.py) through the RSGI bridge that
#: reads each body under a deadline (pool_admin/rsgi.py).
WEB_APPLICATION = "pool_admin.rsgi:application"


def web_command(bind: str, workers: int | None = None) -> list[str]:
    """The web server's command line: ``make run`` and ``bench/api.py`` both run exactly this.

    granian serving ``WEB_APPLICATION`` (RSGI), one worker process per core (``workers``
    overrides it), each reading bodies on its event loop and running the application on
    ``settings.WEB_THREADS`` threads (one runs while the other waits on Redis or PostgreSQL),
    HTTP/1.1 only (one request at a time per connection, so ``WEB_BACKPRESSURE`` connections
    bound the requests a worker holds), keep-alive on; the access log is the bridge's
    (``WEB_ACCESS_LOG``, pool_admin/rsgi.py), not granian's, which writes a log record per
    request on the event loop. Why granian and not
    gunicorn: docs/DECISIONS.md (2026-11-30); why RSGI: (2026-12-01, "request bodies read on
    the event loop").
    """
    host, _, port = bind.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104  (":8000": every interface)
    count = workers if workers is not None else os.cpu_count() or 1
    return [
        sys.executable,
        "-m",
        "granian",
        "--interface",
        "rsgi",
        WEB_APPLICATION,
        "--host",
        host,
        "--port",
        port,
        "--http",
        "1",
        "--workers",
        str(count),
        "--loop",
        "uvloop",
        "--backpressure",
        str(WEB_BACKPRESSURE),
        "--no-ws",
        "--workers-kill-timeout",
        str(WEB_GRACE_S),
    ]


def worker_options(queue: str, threads: int) -> list[str]:
    """A Celery worker's options for one queue: a pool of ``threads`` threads (the tasks wait
    on vendors, proxies and Redis, not on the CPU; a thread each is what lets a slow vendor
    delay only its own fetch), no gossip or mingle (nothing here uses them)."""
    return [
        "-Q",
        queue,
        "--pool",
        "threads",
        "--concurrency",
        str(threads),
        "--without-gossip",
        "--without-mingle",
    ]


def child_commands(bind: str) -> list[tuple[str, list[str]]]:
    """The long-running children: web (one worker per core), the fetch worker (vendor calls,
    ``FETCH_WORKER_THREADS`` at once), the check worker (rechecks), the upkeep worker
    (dispatches, sweeps, ownership expiry, retention), beat, and the usage stream's
    consumer."""
    from django.conf import settings

    py = sys.executable
    celery = [py, "-m", "celery", "-A", "pool_admin"]
    fetches = worker_options(settings.FETCH_QUEUE, settings.FETCH_WORKER_THREADS)
    checks = worker_options(settings.CHECK_QUEUE, settings.CHECK_WORKER_THREADS)
    upkeep = worker_options(settings.CELERY_TASK_DEFAULT_QUEUE, settings.UPKEEP_WORKER_THREADS)
    worker = [*celery, "worker", "--loglevel", "INFO"]
    return [
        ("web (granian)", web_command(bind)),
        ("fetch worker", [*worker, "-n", "fetches@%h", *fetches]),
        ("check worker", [*worker, "-n", "checks@%h", *checks]),
        ("upkeep worker", [*worker, "-n", "upkeep@%h", *upkeep]),
        ("celery beat", [*celery, "beat", "--loglevel", "INFO"]),
        ("metrics consumer", [py, str(REPO_DIR / "manage.py"), "consume_metrics"]),
        ("gateway worker", gateway_command()),
    ]


def gateway_command() -> list[str]:
    """The local gateway worker (``GATEWAY_BIND``, SOCKS5 on ``GATEWAY_SOCKS_BIND``), made
    with its group on first run, with a token issued for the run (docs/gateway.md)."""
    return [
        sys.executable,
        str(REPO_DIR / "manage.py"),
        "gateway_worker",
        "local-1",
        "--ensure",
        "--http-bind",
        gateway_bind(),
        "--socks-bind",
        os.environ.get("GATEWAY_SOCKS_BIND", "127.0.0.1:1080"),
        "--metrics-bind",
        os.environ.get("GATEWAY_METRICS_BIND", "127.0.0.1:9899"),
    ]


#: How the launcher names the secrets setup steps hand it (--secrets-fd).
SECRET_NAMES = {"admin_password": "the admin password", "demo_api_key": "the demo client's key"}
#: Children that call the web server, stopped before it.
WEB_CLIENTS = frozenset({"gateway worker"})


def gateway_bind() -> str:
    return os.environ.get("GATEWAY_BIND", "127.0.0.1:8899")


def main() -> int:
    stop = StopFlag()
    run_dir = Path(os.environ.get("RUN_DIR") or REPO_DIR / ".run").absolute()
    os.environ["RUN_DIR"] = str(run_dir)  # settings put STATIC_ROOT under it
    logs_dir = run_dir / "logs"
    try:
        status_every = env_int("RUN_STATUS_INTERVAL_S", 60, minimum=0, maximum=86_400)
    except EnvError as exc:
        say(str(exc))
        return 2
    if "POOL_DEV" not in os.environ:
        os.environ["POOL_DEV"] = "1"
        say("POOL_DEV=1: development secrets allowed (set DJANGO_SECRET_KEY for anything real)")
    bind = os.environ.get("WEB_BIND", "127.0.0.1:8000")
    host, _, port = bind.rpartition(":")
    base_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"  # noqa: S104
    # The demo provider, unless DEMO=0: its proxies here, its configuration by ensure_demo,
    # its vendor emulator in the web server (settings.DEMO).
    with_demo = os.environ.get("DEMO", "1").strip() != "0"
    os.environ["DEMO"] = "1" if with_demo else "0"

    services: list[RedisServer | PostgresCluster] = []
    children: list[Child] = []
    demo = DemoProxies(run_dir)
    run_as: RunAs | None = None
    try:
        ensure_installed()
        run_dir.mkdir(parents=True, exist_ok=True)
        start_services(run_dir, services)
        steps = [*SETUP_STEPS]
        if with_demo:
            entries = demo.start()
            ports = sorted({entry["port"] for entry in entries})
            say(
                f"demo provider: {len(entries)} local proxies (tinyproxy and microsocks) on "
                f"ports {', '.join(map(str, ports))}; DEMO=0 turns it off"
            )
            steps.append(["ensure_demo", "--base-url", base_url])
        say(f"setup steps log to {logs_dir / 'setup.log'}")
        secrets: dict[str, str] = {}
        for step in steps:
            stop.check()
            made = manage(*step, log_path=logs_dir / "setup.log")
            # Shown now, not only in the banner: a run that stops before the banner must not
            # take a secret that exists nowhere else with it (the banner repeats it).
            for name, value in made.items():
                say(f"{step[0]} generated {SECRET_NAMES.get(name, name)}: {value} (store it now)")
            secrets.update(made)
        run_as, warning = celery_user(REPO_DIR, dict(os.environ))
        stop.check()  # a Ctrl-C during the probe is no reason to warn
        if warning:
            say(f"warning: {warning}")
        commands = child_commands(bind)
        # The web server's clients start once it answers: started earlier, the gateway worker
        # would only warn that its control plane is unreachable, and retry.
        for name, argv in [c for c in commands if c[0] not in WEB_CLIENTS]:
            stop.check()
            user = run_as if name in CELERY_CHILDREN else None
            children.append(spawn(name, argv, logs_dir, user))
        status = StatusReporter(base_url, status_every, print_line)
        serving = wait_until_serving(base_url, children, stop, lambda: pump_echoes(children))
        for name, argv in [c for c in commands if c[0] in WEB_CLIENTS]:
            stop.check()
            children.append(spawn(name, argv, logs_dir))
        if serving:
            say(banner(base_url, gateway_bind(), secrets, with_demo, logs_dir))
            status.start()
        elif not stop.requested:
            say(f"no answer from {base_url}/healthz yet; see the logs in {logs_dir}")

        def tick() -> None:
            pump_echoes(children)
            status.tick()

        return supervise(children, stop, tick)
    except LaunchError as exc:
        if stop.requested:  # a setup step that died of the same Ctrl-C is no error
            say(f"stopped by {signal.Signals(stop.signum or 0).name} during setup")
            return 0
        say(str(exc))
        return 1
    except Exception as exc:  # install, server start or database creation failed
        say(f"error: {type(exc).__name__}: {redact_text(str(exc))}")
        return 1
    finally:
        # The web server's own clients first (the gateway worker polls it every 2 s): a control
        # request arriving while granian stops its workers can keep one from stopping
        # gracefully, and granian then kills it after WEB_GRACE_S.
        clients = [child for child in children if child.name in WEB_CLIENTS]
        stop_children(clients)
        stop_children([child for child in children if child not in clients])
        for child in children:
            if child.echo is not None:
                child.echo.finish()  # what they logged while stopping
        demo.stop()
        stop_services(services)
        if run_as is not None:
            run_as.cleanup()
        say("all stopped")


if __name__ == "__main__":
    sys.exit(main())
