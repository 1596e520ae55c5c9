"""The doctor's checks of the configuration and the stores: the settings, PostgreSQL, each
Redis role, the Lua libraries on them, and this host's clock against Redis's.

Every connection is opened for the check with short timeouts (``IO_TIMEOUT_S``) and closed after
it; the runner bounds each check as a whole (findings.run_checks). Addresses are printed
without their passwords (``redact_url``), and nothing prints a setting's secret value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from django.conf import settings

from activity import redis_url
from activity.lua_functions import FunctionLibrary, library
from activity.redact import redact_url
from activity.redis._scripts import POOL_LIBRARY
from activity.scheduler.redis import SCHEDULER_LIBRARY
from activity.tick_lease.redis import LEASE_LIBRARY
from pool_admin.doctor.findings import Finding, fail, ok, warn
from pool_admin.metrics.group import METRICS_LIBRARY

#: Seconds any one connect or command of a check may take.
IO_TIMEOUT_S = 2.0
#: The oldest Redis the pool runs on: it keeps its Lua as function libraries (FUNCTION LOAD).
MIN_REDIS = (7, 0)
#: This host's clock against Redis's: warn past the first, fail past the second (seconds). The
#: pool takes "now" from each caller's clock; ownership leases last seconds (the manager ticks
#: every 2 s), so a host some seconds off expires or keeps them early or late.
CLOCK_WARN_S, CLOCK_FAIL_S = 1.0, 5.0
#: Function libraries each role's Redis carries, by role.
LIBRARIES: dict[str, tuple[FunctionLibrary, ...]] = {
    "pool": (POOL_LIBRARY, SCHEDULER_LIBRARY, LEASE_LIBRARY),
    "metrics": (METRICS_LIBRARY,),
}


def check_config() -> Sequence[Finding]:
    """Django's system checks (with the deployment checks outside development) and the
    development secrets."""
    from django.core import checks as django_checks

    production = not settings.DEV_DEFAULTS_ALLOWED
    messages = django_checks.run_checks(include_deployment_checks=production)
    errors = [m for m in messages if m.is_serious() and not m.is_silenced()]
    warnings = [m for m in messages if not m.is_serious() and not m.is_silenced()]
    if errors:
        ids = ", ".join(sorted({m.id or "?" for m in errors}))
        return [fail("config", f"system check errors: {ids}", "run manage.py check and fix them")]
    notes = []
    if settings.DEBUG:
        notes.append("DEBUG is on")
    if settings.DEV_DEFAULTS_ALLOWED:
        notes.append("development secrets allowed (POOL_DEV=1 or DEBUG)")
    if warnings:
        notes.append("system check warnings: " + ", ".join(sorted({m.id or "?" for m in warnings})))
    if notes:
        return [
            warn(
                "config",
                "; ".join(notes),
                "fine on a development machine; for production unset POOL_DEV and DEBUG, set "
                "DJANGO_SECRET_KEY and POOL_SECRET_KEY (docs/DEPLOY.md)",
            )
        ]
    return [ok("config", "settings load, system checks pass, secrets set")]


def check_postgres() -> Sequence[Finding]:
    """Reachable (a fresh connection, as /readyz), and every migration applied."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from pool_admin.readiness import check_postgres as answers

    answers()
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = str(cursor.fetchone()[0]).split()[0]
    finally:
        connection.close()
    where = f"PostgreSQL {version}"
    if pending:
        return [
            fail(
                "postgres",
                f"{where}: {len(pending)} migration(s) not applied",
                "run manage.py migrate",
            )
        ]
    return [ok("postgres", f"{where}, migrated")]


def redis_roles() -> list[tuple[str, str]]:
    """(role, URL) for the pool's, the usage stream's and the broker's Redis."""
    return [
        ("pool", settings.REDIS_URL),
        ("metrics", settings.METRICS_REDIS_URL),
        ("broker", settings.BROKER_REDIS_URL),
    ]


def _client(url: str) -> redis.Redis:
    return redis_url.connect(url, socket_timeout=IO_TIMEOUT_S, socket_connect_timeout=IO_TIMEOUT_S)


def _where(url: str) -> str:
    if redis_url.is_sentinel_url(url):
        return f"master {redis_url.parse_sentinel_url(url).master!r} through Sentinel"
    return redact_url(url)


def check_redis(role: str, url: str) -> Callable[[], Sequence[Finding]]:
    """A check of one role's Redis: reachable, its version, and what the role needs of it."""

    def run() -> Sequence[Finding]:
        client = _client(url)
        try:
            info: dict[str, Any] = client.info()
            saves = _config(client, "save")
        finally:
            client.close()
        return [_judge(role, url, info, saves)]

    return run


def _config(client: redis.Redis, name: str) -> str | None:
    """A configuration value, or None where CONFIG is refused (managed Redis renames it)."""
    try:
        values: Any = client.config_get(name)
    except redis.ResponseError:
        return None
    value = values.get(name)
    return None if value is None else str(value)


def _judge(role: str, url: str, info: dict[str, Any], saves: str | None) -> Finding:
    name = f"redis:{role}"
    version = str(info.get("redis_version", "?"))
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    head = f"Redis {version} at {_where(url)}"
    if parts < MIN_REDIS:
        wanted = ".".join(map(str, MIN_REDIS))
        return fail(name, f"{head}: older than {wanted}", f"upgrade Redis to {wanted} or later")
    policy = str(info.get("maxmemory_policy", "?"))
    aof = bool(int(info.get("aof_enabled", 0)))
    snapshots = bool(saves and saves.strip())
    if role == "pool":
        if policy != "noeviction":
            return fail(
                name,
                f"{head}: maxmemory-policy is {policy}: Redis may evict the pool's keys",
                "set maxmemory-policy noeviction on the pool's Redis (docs/OPERATIONS.md)",
            )
        if aof or snapshots:
            kind = "AOF" if aof else f"snapshots (save {saves})"
            return warn(
                name,
                f"{head}: persistence on ({kind}): a restart brings back an old pool under "
                "its old generation",
                'run the pool\'s Redis without persistence (appendonly no, save "")',
            )
    if role == "metrics" and not aof:
        shared = " (the pool's Redis)" if url == settings.REDIS_URL else ""
        return warn(
            name,
            f"{head}: no AOF{shared}: usage events not yet consumed are lost if Redis restarts",
            "put the usage stream on a Redis with appendonly yes (METRICS_REDIS_URL)",
        )
    return ok(name, head)


def check_libraries(role: str, url: str) -> Callable[[], Sequence[Finding]]:
    """The role's function libraries: this code's version loaded, and any other versions."""

    def run() -> Sequence[Finding]:
        client = _client(url)
        try:
            found = []
            for spec in LIBRARIES[role]:
                rows: Any = client.function_list(library=f"{spec.prefix}_*")
                loaded = sorted(_library_name(row) for row in rows)
                found.append((spec.prefix, f"{spec.prefix}_{library(spec)[1]}", loaded))
        finally:
            client.close()
        return [_judge_libraries(role, found)]

    return run


def _library_name(row: Any) -> str:
    """A FUNCTION LIST row's library name (RESP2 gives the row as a flat key, value list)."""
    fields = row if isinstance(row, dict) else dict(zip(row[::2], row[1::2], strict=True))
    name = fields.get(b"library_name", fields.get("library_name", b""))
    return name.decode() if isinstance(name, bytes) else str(name)


def _judge_libraries(role: str, found: list[tuple[str, str, list[str]]]) -> Finding:
    name = f"lua:{role}"
    missing = [prefix for prefix, wanted, loaded in found if wanted not in loaded]
    others = [n for _, wanted, loaded in found for n in loaded if n != wanted]
    versions = ", ".join(wanted for _, wanted, loaded in found if wanted in loaded)
    if missing:
        return warn(
            name,
            f"not loaded yet: {', '.join(missing)}"
            + (f" (loaded: {versions})" if versions else ""),
            "nothing to do if no process has used them yet: the first call loads them",
        )
    if others:
        return warn(
            name,
            f"this code's {versions}; other versions loaded too: {', '.join(others)}",
            "a process runs other code, or an upgrade left them: FUNCTION DELETE each once no "
            "process runs it",
        )
    return ok(name, f"loaded: {versions}")


def check_clock(url: str, now: Callable[[], float] = time.time) -> Sequence[Finding]:
    """This host's clock against the pool's Redis server time (TIME, halfway through the call)."""
    client = _client(url)
    try:
        before = now()
        seconds, micros = client.time()
        after = now()
    finally:
        client.close()
    skew = (before + after) / 2 - (seconds + micros / 1e6)
    text = f"this host is {abs(skew):.3f} s {'ahead of' if skew > 0 else 'behind'} Redis"
    fix = "synchronise the clocks (chrony or systemd-timesyncd) on every host"
    if abs(skew) > CLOCK_FAIL_S:
        return [fail("clock", text, fix)]
    if abs(skew) > CLOCK_WARN_S:
        return [warn("clock", text, fix)]
    return [ok("clock", text)]
