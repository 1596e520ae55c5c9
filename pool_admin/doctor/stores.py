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
from redis.backoff import NoBackoff
from redis.retry import Retry

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
#: One try per command: redis-py retries a refused connection with back-off by default, and a
#: doctor wants the first answer, whatever it is.
ONE_TRY = Retry(NoBackoff(), 0)
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


def connect_once(url: str) -> redis.Redis:
    """A client on ``url`` for one check: short timeouts, one try per command."""
    return redis_url.connect(
        url, socket_timeout=IO_TIMEOUT_S, socket_connect_timeout=IO_TIMEOUT_S, retry=ONE_TRY
    )


def _where(url: str) -> str:
    if redis_url.is_sentinel_url(url):
        return f"master {redis_url.parse_sentinel_url(url).master!r} through Sentinel"
    return redact_url(url)


def check_redis(role: str, url: str) -> Callable[[], Sequence[Finding]]:
    """A check of one role's Redis: reachable, its version, and what the role needs of it."""

    def run() -> Sequence[Finding]:
        client = connect_once(url)
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


def check_sentinels(role: str, url: str) -> Callable[[], Sequence[Finding]]:
    """A Sentinel-managed role: the Sentinels that answer, whether they agree on the master,
    whether they can still fail it over (CKQUORUM), and whether it has a replica to go to."""

    def run() -> Sequence[Finding]:
        target = redis_url.parse_sentinel_url(url)
        masters, quorum, replicas, silent = set(), [], 0, []
        for host, port in target.sentinels:
            client = redis.Redis(
                host,
                port,
                socket_timeout=SENTINEL_TIMEOUT_S,
                socket_connect_timeout=SENTINEL_TIMEOUT_S,
                retry=ONE_TRY,
            )
            try:
                address: Any = client.sentinel_get_master_addr_by_name(target.master)
                masters.add(None if address is None else f"{text(address[0])}:{address[1]}")
                quorum.append(_ckquorum(client, target.master))
                listed: Any = client.sentinel_slaves(target.master)
                replicas = max(replicas, sum(not _down(r) for r in listed))
            except redis.RedisError:
                silent.append(f"{host}:{port}")
            finally:
                client.close()
        return [_judge_sentinels(role, target.master, len(target.sentinels), masters, quorum,
                                 replicas, silent)]  # fmt: skip

    return run


#: Seconds each Sentinel has to answer (a Sentinel answers from memory).
SENTINEL_TIMEOUT_S = 1.0


def _ckquorum(client: redis.Redis, master: str) -> bool:
    # redis-py reads the reply as a plain "OK" (bool_ok), but a Sentinel answers "OK 3 usable
    # Sentinels. ...", which would read as False: take the reply as it comes.
    client.set_response_callback("SENTINEL CKQUORUM", lambda reply, **options: reply)
    try:
        reply: Any = client.sentinel_ckquorum(master)
    except redis.ResponseError:  # NOQUORUM: too few Sentinels can authorise a failover
        return False
    return text(reply).startswith("OK")


def text(value: Any) -> str:
    """A reply's bytes (or a str) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _down(replica: dict[str, Any]) -> bool:
    flags = str(replica.get("flags", ""))
    return "s_down" in flags or "o_down" in flags or "disconnected" in flags


def _judge_sentinels(
    role: str,
    master: str,
    configured: int,
    masters: set[str | None],
    quorum: list[bool],
    replicas: int,
    silent: list[str],
) -> Finding:
    name = f"sentinel:{role}"
    answered = configured - len(silent)
    head = f"{answered} of {configured} Sentinels answer"
    fix = "start the Sentinels, or correct the redis+sentinel:// URL's hosts and master name"
    if not answered:
        return fail(name, f"no Sentinel answers ({', '.join(silent)})", fix)
    if None in masters:
        return fail(name, f"{head}; some do not know master {master!r}", fix)
    if len(masters) > 1:
        named = ", ".join(sorted(map(str, masters)))
        return fail(
            name,
            f"{head}, naming different masters for {master!r}: {named}",
            "wait for the failover to settle; if it does not, read the Sentinels' logs",
        )
    where = f"master {master!r} at {next(iter(masters))}, {replicas} replica(s) up"
    if not any(quorum):
        return fail(
            name,
            f"{head}; {where}; too few Sentinels to agree on a failover (CKQUORUM)",
            "start more Sentinels: a failover needs the quorum and a majority of them",
        )
    if silent or replicas == 0:
        problem = f"silent: {', '.join(silent)}" if silent else "no replica to fail over to"
        return warn(name, f"{head}; {where}; {problem}", "start the missing Sentinel or replica")
    return ok(name, f"{head}; {where}")


def check_libraries(role: str, url: str) -> Callable[[], Sequence[Finding]]:
    """The role's function libraries: this code's version loaded, and any other versions."""

    def run() -> Sequence[Finding]:
        client = connect_once(url)
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
    return text(fields.get(b"library_name", fields.get("library_name", b"")))


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
    client = connect_once(url)
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
