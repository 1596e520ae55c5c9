"""A private PostgreSQL cluster for ``make run`` and the tests: initdb, start, stop, in a
directory the ``postgres`` OS user can reach (as root, PostgreSQL's tools run as that user).

No Django import, as pool_admin/localservices.py, whose helpers it uses.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path
from types import TracebackType

from pool_admin.localservices import SBIN_PATH, free_port, log_tail, postgres_bindir, say

#: Where a private cluster goes when the directory ``make run`` keeps its servers in is one the
#: ``postgres`` OS user cannot enter (running as root from a home directory only its owner may
#: enter: initdb, run as ``postgres``, could not reach it).
SHARED_CLUSTERS = Path("/var/tmp/proxy-pool")  # noqa: S108  (checked: root's, root-writable only)


def reachable_by_postgres(directory: Path) -> bool:
    """True unless running as root and the ``postgres`` OS user cannot enter ``directory``."""
    if os.geteuid() != 0:
        return True
    runuser = shutil.which("runuser", path=SBIN_PATH) or "runuser"
    done = subprocess.run(  # noqa: S603 - fixed argv
        [runuser, "-u", "postgres", "--", "test", "-x", str(directory)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def cluster_datadir(run_dir: Path, shared: Path = SHARED_CLUSTERS) -> Path:
    """Where ``make run``'s private cluster for ``run_dir`` lives: ``run_dir/postgres``, or, when
    the ``postgres`` user cannot enter ``run_dir``, a directory of this ``run_dir``'s own under
    ``shared`` (named by a digest of its path, so each checkout keeps its own data), written in
    ``run_dir/postgres.location``. ``shared`` must be root's and writable by root alone: the
    cluster is chowned to ``postgres`` inside it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if reachable_by_postgres(run_dir):
        return run_dir / "postgres"
    shared.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.lstat(shared)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise RuntimeError(f"{shared} must be a directory of root's that only root may write")
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
    home = shared / digest
    home.mkdir(mode=0o755, exist_ok=True)
    (run_dir / "postgres.location").write_text(f"{home / 'postgres'}\n")
    return home / "postgres"


class PostgresCluster:
    """A PostgreSQL cluster in ``datadir`` on 127.0.0.1, trust auth, superuser ``postgres``.

    initdb and postgres refuse to run as root, so as root they run as the ``postgres`` OS user
    and ``datadir`` is chowned to it (its parents must be traversable by that user).
    ``fast`` turns off fsync: for throwaway test clusters only.
    """

    def __init__(self, datadir: Path, port: int | None = None, fast: bool = False) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise RuntimeError(
                "PostgreSQL is not installed (python -m pool_admin.localservices install)"
            )
        self.bindir = bindir
        self.datadir = Path(datadir).absolute()
        self.port = port if port is not None else free_port()
        self.fast = fast

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    @property
    def logfile(self) -> Path:
        return self.datadir / "server.log"

    @property
    def initialized(self) -> bool:
        return (self.datadir / "PG_VERSION").exists()

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs (first line of postmaster.pid)."""
        try:
            pid = int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        runuser = shutil.which("runuser", path=SBIN_PATH) or "runuser"
        return [runuser, "-u", "postgres", "--", *argv]

    def _run(self, argv: list[str], what: str) -> None:
        # Own session: the postmaster that pg_ctl leaves behind must not get the terminal's SIGINT.
        done = subprocess.run(  # noqa: S603 - fixed argv of PostgreSQL's own tools
            self._as_owner(argv),
            capture_output=True,
            text=True,
            start_new_session=True,
            check=False,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            raise RuntimeError(
                f"{what} failed ({done.returncode}): {output}\n{log_tail(self.logfile)}"
            )

    def init(self) -> None:
        if self.initialized:
            return
        self.datadir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.datadir, "postgres", "postgres")
        self.datadir.chmod(0o700)
        argv = [
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "--auth=trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
        ]
        if self.fast:
            argv.append("--no-sync")
        say(f"initdb {self.datadir}")
        self._run(argv, "initdb")

    def start(self, timeout: int = 60) -> None:
        self.init()
        if self.pid is not None:
            return
        # The data dir doubles as the socket dir: private, short enough, owned by postgres.
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.datadir}"
        if self.fast:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        argv = [
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.datadir),
            "-l",
            str(self.logfile),
            "-w",
            "-t",
            str(timeout),
            "-o",
            options,
            "start",
        ]
        self._run(argv, f"pg_ctl start (port {self.port})")

    def stop(self, timeout: int = 30) -> None:
        if self.pid is None:
            return
        argv = [
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.datadir),
            "-m",
            "fast",
            "-w",
            "-t",
            str(timeout),
            "stop",
        ]
        self._run(argv, "pg_ctl stop")

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
