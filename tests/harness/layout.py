"""The production layout under deploy/, run on this machine as its files state it.

There is no init system here, so this reads each systemd unit's ``ExecStart``, ``Environment``
and ``EnvironmentFile`` and runs that command itself. What a test may change is written once,
here (``Paths``, ``UnitRunner``): the production paths mapped to the test's directories, the
example env files' values it must choose (each must be a variable the example declares, so a
variable dropped from deploy/env/ fails the test), the ports. The rest is the files' own text.

Expansion follows systemd.service(5) for what the units use: the specifiers ``%i`` (the
instance) and ``%%``; ``${VAR}`` inside a word, ``$VAR`` as a whole word (split on
whitespace), from the unit's environment; an unknown variable is an error here (systemd would
make it empty). Env files: ``KEY=VALUE`` lines, ``#`` comments, values optionally quoted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pool_admin.launcher import Child, stop_children

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
#: Production paths as the files name them.
VENV_PYTHON = "/opt/proxypool/venv/bin/python"
APP_DIR = "/opt/proxypool/app"
ETC_DIR = "/etc/proxypool"
STATE_DIR = "/var/lib/proxypool"
NGINX_LOG_DIR = "/var/log/nginx"


class LayoutError(AssertionError):
    """A file under deploy/ is not what the harness can run (a test failure, with the reason)."""


@dataclass
class Unit:
    name: str
    options: dict[str, list[str]]

    def one(self, key: str) -> str:
        values = self.options.get(key, [])
        if len(values) != 1:
            raise LayoutError(f"{self.name}: expected one {key}=, found {len(values)}")
        return values[0]


def read_unit(name: str) -> Unit:
    """deploy/systemd/``name``'s [Service] section (repeated keys kept in order)."""
    section, options = "", {}
    text = (DEPLOY / "systemd" / name).read_text()
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, equals, value = line.partition("=")
        if not equals:
            raise LayoutError(f"{name}: not a key=value line: {line!r}")
        if section == "Service":
            options.setdefault(key.strip(), []).append(value.strip())
    return Unit(name, options)


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, equals, value = line.partition("=")
        if not equals or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", key.strip()):
            raise LayoutError(f"{path}: not a KEY=VALUE line: {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def specifiers(text: str, instance: str) -> str:
    return re.sub(r"%(.)", lambda m: {"i": instance, "%": "%"}[m.group(1)], text)


def expand(words: list[str], env: dict[str, str], unit: str) -> list[str]:
    def value(name: str) -> str:
        if name not in env:
            raise LayoutError(f"{unit}: ExecStart names ${name}, which no env file sets")
        return env[name]

    argv: list[str] = []
    for word in words:
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv += value(whole.group(1)).split()
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: value(m[1]), word))
    return argv


@dataclass
class Paths:
    """Where the production paths point in a test: ``root`` holds etc/ (a copy of deploy/env/
    with the test's values; the test's certificates and tokens go there too), state/ and
    logs/."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def rules(self) -> dict[str, str]:
        return {
            VENV_PYTHON: sys.executable,
            APP_DIR: str(REPO),
            ETC_DIR: str(self.etc),
            STATE_DIR: str(self.state),
            NGINX_LOG_DIR: str(self.logs),
        }

    def localize(self, text: str) -> str:
        for production, local in self.rules().items():
            text = text.replace(production, local)
        return text

    def make(self) -> None:
        for folder in (self.etc / "tls", self.etc / "gateway", self.state, self.logs):
            folder.mkdir(parents=True, exist_ok=True)

    def write_env(self, example: str, values: dict[str, str], name: str | None = None) -> Path:
        """deploy/env/``example`` as ``etc/<name or example>``, with ``values`` for variables
        it declares (any other is a LayoutError: the example lost a variable)."""
        declared = read_env_file(DEPLOY / "env" / example)
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise LayoutError(f"deploy/env/{example} does not declare {', '.join(unknown)}")
        merged = {key: self.localize(value) for key, value in declared.items()} | values
        target = self.etc / (name or example)
        target.write_text("".join(f"{key}={value}\n" for key, value in merged.items()))
        target.chmod(0o600)
        return target


def replace_each(text: str, replacements: dict[str, str], what: str) -> str:
    """Each literal of ``replacements`` replaced; one missing from ``text`` is a LayoutError."""
    for old, new in replacements.items():
        if old not in text:
            raise LayoutError(f"{what} no longer holds {old!r}")
        text = text.replace(old, new)
    return text


@dataclass
class UnitRunner:
    """Starts units as systemd would (command, environment, working directory), each in its own
    process group, its output in ``logs/<unit>@<instance>.log``; ``stop`` stops them all as
    ``make run`` stops its children."""

    paths: Paths
    #: Added to every unit's environment (what systemd's own environment would hold).
    base_env: dict[str, str] = field(default_factory=dict)
    children: list[Child] = field(default_factory=list)

    def command(self, name: str, instance: str = "") -> tuple[list[str], dict[str, str], Path]:
        unit = read_unit(name)
        env = dict(self.base_env)
        for item in unit.options.get("EnvironmentFile", []):
            optional = item.startswith("-")
            path = Path(self.paths.localize(specifiers(item.lstrip("-"), instance)))
            if not path.exists() and optional:
                continue
            env.update(read_env_file(path))
        for item in unit.options.get("Environment", []):
            for assignment in shlex.split(self.paths.localize(specifiers(item, instance))):
                key, _, value = assignment.partition("=")
                env[key] = value
        words = shlex.split(self.paths.localize(specifiers(unit.one("ExecStart"), instance)))
        cwd = Path(self.paths.localize(unit.one("WorkingDirectory")))
        return expand(words, env, name), env, cwd

    def log(self, name: str, instance: str = "") -> Path:
        return self.paths.logs / f"{name.split('.')[0]}{instance}.log"

    def start(self, name: str, instance: str = "") -> Child:
        argv, env, cwd = self.command(name, instance)
        with self.log(name, instance).open("ab") as out:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        child = Child(self.log(name, instance).stem, proc)
        self.children.append(child)
        return child

    def stop(self) -> None:
        stop_children(self.children, timeout=15)
        self.children.clear()


def wait_for(what: str, check: Callable[[], bool], timeout: float, children: list[Child]) -> None:
    """Until ``check()`` is true; a LayoutError naming ``what`` (and any child that died)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            if check():
                return
        dead = [c.name for c in children if c.proc.poll() is not None]
        if dead:
            raise LayoutError(f"waiting for {what}: {', '.join(dead)} exited")
        if time.monotonic() > deadline:
            raise LayoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.2)


def nginx_binary() -> str:
    found = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if found is None:
        raise LayoutError("nginx is not installed (python -m pool_admin.localservices install)")
    return found


def nginx_main_config(paths: Paths, site: str) -> Path:
    """The main configuration Debian's /etc/nginx/nginx.conf would be, around ``site`` (the
    site file's localized text): in the foreground, its pid, logs and temporary files in the
    test's directories."""
    base = paths.root / "nginx"
    temporaries = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    for folder in temporaries:
        (base / folder).mkdir(parents=True, exist_ok=True)
    site_file = base / "proxypool.conf"
    site_file.write_text(site)
    user = "user root root;\n" if os.geteuid() == 0 else ""  # workers read the test's 0700 dirs
    config = base / "nginx.conf"
    config.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {base}/nginx.pid;\n"
        f"error_log {paths.logs}/nginx-main.error.log warn;\nevents {{ worker_connections 256; }}\n"
        "http {\n  access_log off;\n"
        + "".join(f"  {name}_temp_path {base}/{name};\n" for name in temporaries)
        + f"  include {site_file};\n}}\n"
    )
    return config


@contextlib.contextmanager
def children_stopped(runner: UnitRunner) -> Iterator[UnitRunner]:
    try:
        yield runner
    finally:
        runner.stop()
