"""Run a project command in a child process, as an operator would from a shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]


def run_python(*args: str, **env_overrides: str | None) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the repository, with the environment changed by `env_overrides`
    (None removes a variable); output captured as text, never raising on a failure."""
    env = {k: v for k, v in os.environ.items() if k not in env_overrides}
    env.update({k: v for k, v in env_overrides.items() if v is not None})
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def manage(*args: str, **env_overrides: str | None) -> subprocess.CompletedProcess[str]:
    """`python manage.py ARGS`."""
    return run_python("manage.py", *args, **env_overrides)


def database_url_of_test_db() -> str:
    """The URL of the database pytest-django created, for a child process to use."""
    from django.db import connection

    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))
