"""Loading the Lua operations and calling them: the only place that speaks to Redis.

The library's parts (``lua/lib/<part>.lua``, joined in ``LIB_PARTS`` order) and every operation
file (``lua/<name>.lua``, each wrapped as one function) form one Redis function library, loaded
once (FUNCTION LOAD) and called with FCALL. A library costs its helpers once per load instead
of once per call, which as an EVALSHA prelude cost more than the operations themselves
(docs/PERFORMANCE.md). The library's name carries a digest of its
code, so two versions side by side never clash; a "function not found" reply (a restart, a
failover to a replica without it, FUNCTION FLUSH) reloads it and retries transparently, once.
Replies are JSON: ``{"ok": value}`` or ``{"err": code, "reason": ..., ...}``; errors map to
the shared code table in ``activity.errors``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import redis

from activity.deadline import check_deadline
from activity.errors import (
    ERROR_CODES,
    ActivityError,
    InsufficientInventory,
    LayoutMismatch,
    QuotaExceeded,
    ReportRejected,
    StoreUnavailable,
)
from activity.redis._transport import pooled_call

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"
LIB_DIR = LUA_DIR / "lib"

# The library's parts, in the order they are joined. A Lua local is visible only below its
# declaration, so each part comes after every part it uses; a part out of order compiles but
# fails when a function calls a name that is not declared yet. `core` first: its buffer is the
# only way to a hash or sorted set (tests/activity/test_lua_rules.py).
LIB_PARTS = (
    "core",
    "records",
    "sessions_slots",
    "ownership_drain",
    "sweep",
    "outcomes_quarantine",
    "upsert_health",
    "extract_quota",
)

SCRIPT_NAMES = (
    "upsert",
    "apply_health",
    "inventory",
    "extract",
    "assign",
    "renew",
    "begin_drain",
    "acknowledge_drain",
    "expire",
    "open_session",
    "issue_snapshot",
    "acknowledge_snapshot",
    "write_report",
    "read_runtime",
    "worker_assignments",
    "drain_tickets",
    "upstream_inventory",
    "sweep",
    "report_outcome",
    "quarantine_of",
    "charge_call",
    "take_due_checks",
    "browse",
    "proxy_detail",
    "worker_sessions",
)

_TRANSIENT = (redis.ConnectionError, redis.TimeoutError)


def lib_source() -> str:
    """The shared part of the library: its parts joined in ``LIB_PARTS`` order, as Lua text."""
    return "\n".join((LIB_DIR / f"{part}.lua").read_text() for part in LIB_PARTS)


def script_source(name: str) -> str:
    """The shared library and one operation's body, as Lua text (for tests and readers)."""
    return lib_source() + "\n" + (LUA_DIR / f"{name}.lua").read_text()


_WRAPPER = (
    "redis.register_function('{name}_{suffix}', function(KEYS, ARGV)\n"
    "  local layout_error = bind(KEYS[1])\n"
    "  if layout_error then return layout_error end\n"
    "  local reply = (function()\n{body}\n  end)()\n"
    "  flush_writes()\n"
    "  flush_counts()\n"
    "  return reply\n"
    "end)\n"
)


@dataclass(frozen=True)
class FunctionLibrary:
    """One Redis function library: ``prefix`` names it, ``shared`` is the Lua every function
    uses (declarations only), ``operations`` are (name, file) pairs each wrapped as one
    function by ``wrapper`` (with ``{name}``, ``{suffix}`` and ``{body}`` in it)."""

    prefix: str
    shared: tuple[Path, ...]
    operations: tuple[tuple[str, Path], ...]
    wrapper: str


#: The pool's library: lua/lib/ in LIB_PARTS order, then lua/<name>.lua for each operation.
POOL_LIBRARY = FunctionLibrary(
    prefix="pp_activity",
    shared=tuple(LIB_DIR / f"{part}.lua" for part in LIB_PARTS),
    operations=tuple((name, LUA_DIR / f"{name}.lua") for name in SCRIPT_NAMES),
    wrapper=_WRAPPER,
)


@cache
def library(spec: FunctionLibrary = POOL_LIBRARY) -> tuple[str, str]:
    """(library code, suffix of its function names), built once per process.

    The suffix is a digest of the whole library as it will run (library, bodies and wrapper),
    so any change to any of them is a new library, never old code under a known name.
    """
    lib = "\n".join(path.read_text() for path in spec.shared)
    bodies = {name: path.read_text() for name, path in spec.operations}

    def build(suffix: str) -> str:
        wrapped = [spec.wrapper.format(name=n, suffix=suffix, body=b) for n, b in bodies.items()]
        return f"#!lua name={spec.prefix}_{suffix}\n" + "\n".join([lib, *wrapped])

    suffix = hashlib.sha1(build("").encode()).hexdigest()[:12]  # noqa: S324 - a version tag
    return build(suffix), suffix


class Scripts:
    """A function library (the pool's unless told) on one client, its operations called by
    name with ``meta_key`` as KEYS[1]."""

    def __init__(
        self, client: redis.Redis, meta_key: str, spec: FunctionLibrary = POOL_LIBRARY
    ) -> None:
        self._meta = meta_key
        self._client = client
        self._code, self._suffix = library(spec)

    def hget_json(self, key: str, field: str) -> Any:
        """One plain read (no script needed): a JSON value of a hash field, or None."""
        check_deadline()
        try:
            raw = self._client.hget(key, field)
        except _TRANSIENT as exc:
            raise StoreUnavailable("Redis did not answer a read") from exc
        except redis.RedisError as exc:
            raise StoreUnavailable("Redis refused a read") from exc
        return None if raw is None else orjson.loads(raw)

    def call(self, name: str, *args: object, retry_safe: bool = False) -> Any:
        """Run one script; a dropped connection is retried once when the call is replay-safe.

        ``retry_safe`` calls carry an operation ID, so a script that committed before the
        connection broke answers the retry from its stored result and changes nothing twice.
        """
        check_deadline()
        argv = [_arg(a) for a in args]
        attempts = 2 if retry_safe else 1
        loaded = False
        while True:
            try:
                raw = pooled_call(
                    self._client.connection_pool, "FCALL", f"{name}_{self._suffix}", 1,
                    self._meta, *argv,
                )  # fmt: skip
                break
            except _TRANSIENT as exc:
                attempts -= 1
                if attempts == 0:
                    raise StoreUnavailable(
                        f"Redis did not answer {name}; the outcome is unknown"
                    ) from exc
                check_deadline()
            except redis.ResponseError as exc:
                if "function not found" not in str(exc).lower() or loaded:
                    raise _response_error(name, exc) from exc
                self._load()  # never ran: loading and calling again is always safe
                loaded = True
            except redis.RedisError as exc:
                raise StoreUnavailable(f"Redis refused {name}") from exc
        return _decode(name, raw)

    def _load(self) -> None:
        try:
            self._client.function_load(self._code, replace=True)
        except _TRANSIENT as exc:
            raise StoreUnavailable("Redis did not answer while loading a function library") from exc
        except redis.ResponseError as exc:
            raise _response_error("FUNCTION LOAD", exc) from exc
        except redis.RedisError as exc:
            raise StoreUnavailable("Redis refused to load a function library") from exc


def _arg(value: object) -> str | int | float | bytes:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int, float, bytes)):
        return value
    return orjson.dumps(value)


def _response_error(name: str, exc: redis.ResponseError) -> ActivityError:
    text = str(exc)
    unavailable = (redis.ReadOnlyError, redis.exceptions.OutOfMemoryError, redis.BusyLoadingError)
    if isinstance(exc, unavailable) or any(w in text for w in ("BUSY", "LOADING", "READONLY")):
        return StoreUnavailable(f"Redis cannot run {name} now")
    if "unknown command" in text.lower():
        return LayoutMismatch("RedisPool needs Redis 7.0 or newer (FUNCTION LOAD / FCALL)")
    # A Lua error here is a bug in a script or its caller, never a business refusal.
    return ActivityError(f"script {name} failed: {text.splitlines()[0][:200]}")


def _decode(name: str, raw: Any) -> Any:
    reply = orjson.loads(raw)
    if "err" not in reply:
        return reply["ok"]
    code, reason = reply["err"], reply.get("reason")
    cls = ERROR_CODES.get(code, ActivityError)
    message = f"{name}: {code}" + (f" ({reason})" if reason else "")
    if cls is InsufficientInventory:
        return_error: ActivityError = InsufficientInventory(
            message, requested=int(reply["requested"]), available=int(reply["available"])
        )
    elif cls is QuotaExceeded:
        return_error = QuotaExceeded(
            message,
            reason=str(reason),
            retry_after_ms=int(reply["retry_after_ms"]),
            left=int(reply["left"]),
        )
    elif cls is ReportRejected:
        ids = reply.get("proxy_ids") or []
        return_error = ReportRejected(message, reason=str(reason), proxy_ids=list(ids))
    else:
        return_error = cls(message, reason=reason)
    raise return_error
