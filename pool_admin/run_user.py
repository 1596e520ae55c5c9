"""Who ``make run``'s Celery worker and beat run as: when the launcher is root, an unprivileged
user (``RUN_USER``, default ``nobody``), so a task's bug or a hostile vendor answer does not run
with root's rights. No Django import.

They need to read the repository and the interpreter with its packages, and to write nothing:
their output goes to descriptors the launcher opened, beat's schedule is in PostgreSQL
(django-celery-beat), the brokers and the database are reached over TCP. Their HOME is a
private directory made for the run. Before the children start, a probe imports the Celery app
as that user; when it cannot (e.g. the interpreter under a mode-0700 home), they run as root
and the launcher says why in one line.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Seconds the probe may take (an import of the Celery app, about a second).
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RunAs:
    name: str
    uid: int
    gid: int
    home: Path

    def popen_kwargs(self, env: dict[str, str]) -> dict[str, Any]:
        """What ``subprocess.Popen`` takes to run a child as this user, its groups dropped."""
        return {
            "user": self.uid,
            "group": self.gid,
            "extra_groups": [],
            "env": {**env, "HOME": str(self.home), "USER": self.name, "LOGNAME": self.name},
        }

    def cleanup(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


def make_run_as(name: str) -> RunAs:
    """``name`` with a fresh private HOME (mode 0700, owned by it); KeyError if no such user."""
    entry = pwd.getpwnam(name)
    home = Path(tempfile.mkdtemp(prefix=f"pp-run-{name}-"))
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return RunAs(name, entry.pw_uid, entry.pw_gid, home)


def celery_user(repo: Path, env: dict[str, str]) -> tuple[RunAs | None, str | None]:
    """Whom Celery runs as, and a warning when it must be root though it need not.

    ``(None, None)`` when the launcher is not root (nothing changes) or ``RUN_USER=root``.
    """
    if os.geteuid() != 0:
        return None, None
    name = env.get("RUN_USER", "").strip() or "nobody"
    if name == "root":
        return None, None
    try:
        run_as = make_run_as(name)
    except KeyError:
        return None, f"Celery runs as root: RUN_USER {name!r} is no user here"
    problem = probe(run_as, repo, env)
    if problem is None:
        return run_as, None
    run_as.cleanup()
    return None, (
        f"Celery runs as root: user {name} cannot import the Celery app from {repo} with "
        f"{sys.executable} ({problem}); make both readable by it, or set RUN_USER"
    )


def probe(run_as: RunAs, repo: Path, env: dict[str, str]) -> str | None:
    """None when ``run_as`` can import the Celery app from ``repo``; else why, in a few words."""
    try:
        done = subprocess.run(  # our interpreter, a fixed statement
            [sys.executable, "-c", "import pool_admin.celery"],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            **run_as.popen_kwargs(env),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) else exc}"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return (lines[-1] if lines else f"exit {done.returncode}")[:200]
