"""Real local forward proxies: Debian's ``tinyproxy`` (HTTP, Basic auth) and ``microsocks``
(SOCKS5, user/password), each a child process on 127.0.0.1. The demo provider hands them out
(``make run``) and the checker's tests probe through them; neither is a proxy of ours.

No Django import: the launcher and the tests start them before Django is configured.
Installed by ``python -m pool_admin.localservices install`` (``REQUIRED_PACKAGES``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from pool_admin.localservices import forward_proxy_binary, free_port


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, created 0600: what holds a password is never readable by
    others, not even between the write and a chmod."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _check_login(username: str, password: str) -> None:
    if not all(part.isalnum() and part.isascii() for part in (username, password)):
        raise ValueError("a forward proxy's username and password: ASCII letters and digits")


class ForwardProxy:
    """One forward proxy process on ``127.0.0.1:port`` that asks for ``username`` and
    ``password`` (letters and digits only: both servers read them from a command line or a
    config line split at spaces). ``protocol``: ``http`` or ``socks5``."""

    protocol = ""
    binary_name = ""

    def __init__(self, directory: Path, username: str, password: str, port: int | None = None):
        _check_login(username, password)
        binary = forward_proxy_binary(self.binary_name)
        if binary is None:
            raise RuntimeError(
                f"{self.binary_name} is not installed (python -m pool_admin.localservices install)"
            )
        self.binary = binary
        self.directory = Path(directory)
        self.username, self.password = username, password
        self.port = port if port is not None else free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def logfile(self) -> Path:
        return self.directory / f"{self.binary_name}-{self.port}.log"

    @property
    def pid(self) -> int | None:
        """The running process's ID (benchmarks read its CPU time from /proc)."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.logfile.open("ab") as log:
            # Own session: a terminal Ctrl-C reaches the launcher, which stops it in order.
            self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, a Debian binary
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                tail = self.logfile.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{self.binary_name} on port {self.port} exited:\n{tail}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.binary_name} on port {self.port} did not listen in {timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM and wait; SIGKILL if it has not exited within ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> ForwardProxy:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Tinyproxy(ForwardProxy):
    """An HTTP proxy (absolute-URI requests and CONNECT to any port) with Basic auth; with
    ``more_users``, more username/password pairs it takes too (each a proxy of its own to the
    pool, whose exit includes the user name)."""

    protocol = "http"
    binary_name = "tinyproxy"

    def __init__(
        self,
        directory: Path,
        username: str,
        password: str,
        port: int | None = None,
        more_users: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(directory, username, password, port)
        for user, secret in more_users:
            _check_login(user, secret)
        self.more_users = list(more_users)

    def argv(self) -> list[str]:
        config = self.directory / f"tinyproxy-{self.port}.conf"
        logins = "".join(
            f"BasicAuth {user} {secret}\n"
            for user, secret in [(self.username, self.password), *self.more_users]
        )
        write_private(  # the passwords are in it
            config,
            f"Port {self.port}\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 30\n"
            f"MaxClients 1024\n{logins}DisableViaHeader Yes\nLogLevel Warning\n",
        )
        return [self.binary, "-d", "-c", str(config)]


class Microsocks(ForwardProxy):
    """A SOCKS5 proxy with username/password authentication (RFC 1929)."""

    protocol = "socks5"
    binary_name = "microsocks"

    def argv(self) -> list[str]:
        return [
            self.binary,
            "-i",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-u",
            self.username,
            "-P",
            self.password,
        ]
