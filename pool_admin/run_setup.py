"""``make run``'s setup steps and ready banner (the launcher's; no Django import).

Each setup step (migrate, collectstatic, ensure_admin, ensure_demo) runs to the end with its
output appended to ``$RUN_DIR/logs/setup.log``; when one fails, the end of that log is shown.
A secret a step generates (the admin's password, the demo client's API key, each on first
creation only) comes back on a pipe (``--secrets-fd``) and is shown in the banner, on the
terminal, never in a log file. A secret the operator set (``ADMIN_PASSWORD``, ``DEMO_API_KEY``)
is never echoed: the banner names the variable.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from activity.redact import redact_text
from pool_admin.run_logs import open_log, tail

REPO_DIR = Path(__file__).resolve().parent.parent


class LaunchError(RuntimeError):
    """Setup could not complete; the message says why in one line."""


def say(message: str) -> None:
    print(f"launcher: {message}", flush=True)


SETUP_STEPS = [
    ["migrate", "--noinput"],
    ["collectstatic", "--noinput", "-v", "0"],
    ["ensure_admin"],
]

#: Setup steps that may generate a secret: it comes back on a pipe (``--secrets-fd``), for the
#: terminal only, so their log holds none.
SECRET_STEPS = frozenset({"ensure_admin", "ensure_demo"})
#: Bytes read from that pipe: a few NAME=VALUE lines.
MAX_SECRETS_BYTES = 4096


def manage(*args: str, log_path: Path) -> dict[str, str]:
    """Run a manage.py command to the end, its output appended to ``log_path``; the secrets it
    generated (``NAME=VALUE``, from ``--secrets-fd``), or a LaunchError with the log's tail.

    Same process group as the launcher: Ctrl-C stops it too.
    """
    say(f"manage.py {' '.join(args)}")
    argv = [sys.executable, "manage.py", *args]
    read_end, write_end = os.pipe()
    try:
        if args[0] in SECRET_STEPS:
            argv += ["--secrets-fd", str(write_end)]
        with open_log(log_path, f"manage.py {' '.join(args)}") as log:
            done = subprocess.run(  # noqa: S603
                argv,
                cwd=REPO_DIR,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
                check=False,
            )
        os.close(write_end)
        write_end = -1
        handed = read_bounded(read_end, MAX_SECRETS_BYTES)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if done.returncode != 0:
        lines = "\n".join(f"    {redact_text(line)}" for line in tail(log_path))
        raise LaunchError(
            f"manage.py {args[0]} failed with exit {done.returncode}; the end of {log_path}:\n"
            f"{lines}"
        )
    pairs = (line.partition("=") for line in handed.decode(errors="replace").splitlines())
    return {name: value for name, sep, value in pairs if sep and value}


def read_bounded(fd: int, limit: int) -> bytes:
    """What ``fd`` holds up to EOF, at most ``limit`` bytes."""
    data = b""
    while len(data) < limit:
        chunk = os.read(fd, limit - len(data))
        if not chunk:
            break
        data += chunk
    return data


def banner(
    base_url: str, gateway: str, secrets: dict[str, str], with_demo: bool, logs_dir: Path
) -> str:
    """The ready banner: what to open and what to paste."""
    user = os.environ.get("ADMIN_USERNAME", "admin").strip()
    if "admin_password" in secrets:
        login = f"user {user}, password {secrets['admin_password']} (generated: store it now)"
    elif os.environ.get("ADMIN_PASSWORD"):
        login = f"user {user}, password from ADMIN_PASSWORD"
    else:
        login = f"user {user} (its password was shown when it was created)"
    lines = [
        "Proxy Pool is up. Open:",
        f"    admin      {base_url}/admin/   {login}",
        f"    console    {base_url}/admin/console/",
        f"    readiness  {base_url}/readyz",
        f"    API docs   {base_url}/api/docs/",
    ]
    if with_demo:
        if "demo_api_key" in secrets:
            key = secrets["demo_api_key"]
            note = "the demo client's key, generated now: store it (set DEMO_API_KEY to choose)"
        elif os.environ.get("DEMO_API_KEY"):
            key, note = "$DEMO_API_KEY", "export DEMO_API_KEY in the shell you paste into"
        else:
            key, note = "$DEMO_API_KEY", "DEMO_API_KEY: the demo key shown when it was issued"
        lines += [
            f'    extract    curl -s -H "Authorization: Bearer {key}" '
            f"-H 'Content-Type: application/json' -d '{{}}' {base_url}/api/v1/extract",
            f'    gateway    curl -x http://{gateway} --proxy-user "demo:{key}" {base_url}/healthz',
            f"    ({note})",
        ]
    lines.append(f"    doctor     {doctor_command()}")
    lines += [
        f"  Logs: {logs_dir}/ (only warnings and errors are shown here). Ctrl-C stops everything.",
    ]
    return "\n".join(lines)


#: The variables that say where make run's stores are: the doctor needs the same.
WHERE = ("DATABASE_URL", "REDIS_URL", "METRICS_REDIS_URL", "CELERY_BROKER_URL", "POOL_PREFIX")


def doctor_command() -> str:
    """``manage.py doctor`` as a shell in the repository runs it against this make run (with
    POOL_DEV=1, as make run's children; the store variables named, never their values, which
    may hold a password)."""
    python = Path(sys.executable)
    with_venv = REPO_DIR / ".venv"
    shown = ".venv/bin/python" if with_venv in python.parents else str(python)
    command = f"POOL_DEV=1 {shown} manage.py doctor"
    given = [name for name in WHERE if os.environ.get(name)]
    if given:
        command += f"   (with this run's {', '.join(given)} exported)"
    return command
