"""Local Redis and PostgreSQL for development and tests: check, install, start, stop (and the
installation of the forward proxies pool_admin/forward_proxies.py runs).

No Django import: `make run`, `make test` and the pytest harness use this before Django is
configured. Private servers listen on 127.0.0.1 only and run in their own sessions, so a Ctrl-C
in the terminal reaches the launcher, which stops them in order, and never them directly.

CLI: ``python -m pool_admin.localservices install | status``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

import psycopg
import redis

from activity.redact import redact_url
from pool_admin.defaults import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL

SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def say(message: str) -> None:
    """Progress line on stdout, flushed so it interleaves with children's output."""
    print(f"localservices: {message}", flush=True)


# --- reachability -------------------------------------------------------------------------


def redis_answers(url: str, timeout: float = 1.0) -> bool:
    """True when a Redis server at ``url`` answers PING within ``timeout`` seconds."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def postgres_answers(url: str, timeout: int = 2) -> bool:
    """True when the PostgreSQL server of ``url`` accepts a connection to its ``postgres`` DB.

    The maintenance database is used because the URL's own database may not exist yet.
    libpq treats a connect_timeout below 2 s as 2 s.
    """
    try:
        with psycopg.connect(url, dbname="postgres", connect_timeout=timeout):
            return True
    except psycopg.Error:
        return False


def is_loopback(url: str) -> bool:
    """True when the URL's host is a loopback address (only those get private servers)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_port(url: str, default: int) -> int:
    return urlsplit(url).port or default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_database_if_missing(url: str) -> bool:
    """Create the URL's database on its server when absent; True when it was created."""
    dbname = (urlsplit(url).path or "/").lstrip("/")
    if not dbname:
        raise ValueError(f"no database name in {redact_url(url)}")
    with psycopg.connect(url, dbname="postgres", connect_timeout=3, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if exists:
            return False
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(dbname)))
    say(f"created database {dbname!r}")
    return True


# --- installation -------------------------------------------------------------------------


def redis_server_binary() -> str | None:
    return shutil.which("redis-server", path=SBIN_PATH)


def postgres_bindir() -> Path | None:
    """Newest /usr/lib/postgresql/<ver>/bin holding initdb (``PG_BINDIR`` overrides)."""
    override = os.environ.get("PG_BINDIR")
    if override:
        return Path(override) if (Path(override) / "initdb").exists() else None
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else None


def forward_proxy_binary(name: str) -> str | None:
    """``tinyproxy`` or ``microsocks``: the demo's and the checker tests' real forward proxies
    (pool_admin/forward_proxies.py)."""
    return shutil.which(name, path=SBIN_PATH)


#: Debian package -> whether what the project runs from it is there.
REQUIRED_PACKAGES: dict[str, Callable[[], object]] = {
    "redis-server": redis_server_binary,
    "postgresql": postgres_bindir,
    "tinyproxy": lambda: forward_proxy_binary("tinyproxy"),
    "microsocks": lambda: forward_proxy_binary("microsocks"),
}


def chromium_binary() -> str | None:
    """Debian's Chromium: the console's browser tests drive it (Playwright's own browser
    download is not reachable from the machines this runs on)."""
    return shutil.which("chromium")


#: What the tests need besides: installed by ``install --tests`` (``make test``), not by
#: ``make run``. nginx: the production layout's reverse proxy (tests/deploy/test_layout.py).
TEST_PACKAGES: dict[str, Callable[[], object]] = {
    "chromium": chromium_binary,
    "nginx": lambda: forward_proxy_binary("nginx"),
}


def ensure_installed(wanted: dict[str, Callable[[], object]] | None = None) -> None:
    """apt-get install what ``wanted`` (``REQUIRED_PACKAGES`` by default) finds missing."""
    wanted = REQUIRED_PACKAGES if wanted is None else wanted
    packages = [name for name, present in wanted.items() if present() is None]
    if not packages:
        say(f"{', '.join(wanted)}: binaries are present")
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"missing {' '.join(packages)}; install them with apt-get as root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say("apt-get update")
    subprocess.run(["apt-get", "update"], check=True, env=env)  # noqa: S607 - apt-get on PATH
    say(f"apt-get install -y {' '.join(packages)}")
    subprocess.run(["apt-get", "install", "-y", *packages], check=True, env=env)  # noqa: S603, S607
    still = [name for name, present in wanted.items() if present() is None]
    if still:
        raise RuntimeError(
            f"apt-get installed {' '.join(packages)} but {' '.join(still)} is missing"
        )


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# --- a private Redis ------------------------------------------------------------------------


class RedisServer:
    """A ``redis-server`` child process on 127.0.0.1 without persistence.

    The port is fixed at construction, so ``restart`` keeps ``url`` valid.
    """

    def __init__(self, directory: Path, port: int | None = None, args: Sequence[str] = ()) -> None:
        """``args``: more ``redis-server`` options (e.g. ``--replicaof 127.0.0.1 6379``)."""
        self.args = tuple(args)
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed (python -m pool_admin.localservices install)"
            )
        self.binary = binary
        self.directory = Path(directory)
        self.port = port if port is not None else free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def logfile(self) -> Path:
        return self.directory / f"redis-{self.port}.log"

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        # Own session: a terminal Ctrl-C must not kill it before its users are stopped.
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own binary
            self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                raise RuntimeError(
                    f"redis-server on port {self.port} exited:\n{log_tail(self.logfile)}"
                )
            if self._answers_as_us():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer in {timeout} s")

    def argv(self) -> list[str]:
        return [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.logfile),
            "--daemonize",
            "no",
            *self.args,
        ]

    def _answers_as_us(self) -> bool:
        # Another server may already hold the port; only our own process counts.
        client = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
        try:
            return bool(self._proc and client.info("server")["process_id"] == self._proc.pid)
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM and wait; SIGKILL if it has not exited within ``timeout``."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL: the abrupt loss a fault test wants."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._proc = None

    def restart(self, timeout: float = 10.0) -> None:
        self.stop()
        self.start(timeout)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pool_admin.localservices")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser(
        "install", help="apt-get install the servers the project runs, if missing"
    )
    install.add_argument(
        "--tests", action="store_true", help="and what the tests need besides (Chromium, nginx)"
    )
    sub.add_parser("status", help="say whether REDIS_URL and DATABASE_URL answer")
    args = parser.parse_args(argv)
    if args.command == "install":
        ensure_installed({**REQUIRED_PACKAGES, **(TEST_PACKAGES if args.tests else {})})
        return 0
    redis_url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    up_redis, up_pg = redis_answers(redis_url), postgres_answers(database_url)
    say(f"redis {redact_url(redis_url)}: {'answers' if up_redis else 'no answer'}")
    say(f"postgres {redact_url(database_url)}: {'answers' if up_pg else 'no answer'}")
    return 0 if up_redis and up_pg else 1


if __name__ == "__main__":
    sys.exit(main())
