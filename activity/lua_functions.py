"""Redis function libraries: loading one and calling its operations, shared by the Redis
adapters (the pool's, activity/redis; the fetch scheduler's, activity/scheduler/redis.py) and
the usage stream's consumer group (pool_admin/metrics/group.py).

A library's shared part and its operation files (each wrapped as one function) form one Redis
function library, loaded once (FUNCTION LOAD) and called with FCALL. A library costs its helpers
once per load instead of once per call, which as an EVALSHA prelude cost more than the
operations themselves (docs/PERFORMANCE.md). The library's name carries a digest of its code, so
two versions side by side never clash; a "function not found" reply (a restart, a failover to a
replica without it, FUNCTION FLUSH) reloads it and retries transparently, once. Replies of
``Scripts.call`` are JSON: ``{"ok": value}`` or ``{"err": code, "reason": ..., ...}``; errors map
to the shared code table in ``activity.errors``. ``Scripts.call_raw`` leaves both as Redis
gives them, for a library whose replies are Redis's own structures.
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
from activity.redis_transport import pooled_call

LUA_DIR = Path(__file__).resolve().parents[1] / "lua"

_TRANSIENT = (redis.ConnectionError, redis.TimeoutError)


@dataclass(frozen=True)
class FunctionLibrary:
    """One Redis function library: ``prefix`` names it, ``shared`` is the Lua every function
    uses (declarations only), ``operations`` are (name, file) pairs each wrapped as one
    function by ``wrapper`` (with ``{name}``, ``{suffix}`` and ``{body}`` in it)."""

    prefix: str
    shared: tuple[Path, ...]
    operations: tuple[tuple[str, Path], ...]
    wrapper: str

    @classmethod
    def of_folder(
        cls, prefix: str, folder: Path, operations: tuple[str, ...], wrapper: str
    ) -> FunctionLibrary:
        """A library kept in one folder: ``lib.lua`` shared, ``<operation>.lua`` each."""
        ops = tuple((name, folder / f"{name}.lua") for name in operations)
        return cls(prefix, (folder / "lib.lua",), ops, wrapper)


@cache
def library(spec: FunctionLibrary) -> tuple[str, str]:
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
    """A function library on one client, its operations called by name with ``meta_key`` as
    KEYS[1]."""

    def __init__(self, client: redis.Redis, meta_key: str, spec: FunctionLibrary) -> None:
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

    def call(
        self, name: str, *args: object, retry_safe: bool = False, history: bool = False
    ) -> Any:
        """Run one script; a dropped connection is retried once when the call is replay-safe.

        ``retry_safe`` calls carry an operation ID, so a script that committed before the
        connection broke answers the retry from its stored result and changes nothing twice.
        ``history`` calls get the replication ID of the server their connection reached as
        their last argument (``redis_transport.replication_id``), learned when it connected.
        """
        check_deadline()
        argv = [_arg(a) for a in args]
        attempts = 2 if retry_safe else 1
        loaded = False
        while True:
            try:
                raw = self._fcall(name, argv, history)
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

    def call_raw(self, name: str, *args: object) -> Any:
        """Run one function whose reply is not JSON, and give its reply as Redis sends it and
        its errors as redis-py raises them (the caller maps them itself). For replies that
        carry bytes JSON cannot hold unchanged, such as stream entries (the usage stream's
        library). Never retried: only a missing library is loaded, and the call made again."""
        argv = [_arg(a) for a in args]
        try:
            return self._fcall(name, argv)
        except redis.ResponseError as exc:
            if "function not found" not in str(exc).lower():
                raise
        self._client.function_load(self._code, replace=True)  # never ran: calling again is safe
        return self._fcall(name, argv)

    def _fcall(
        self, name: str, argv: list[str | int | float | bytes], history: bool = False
    ) -> Any:
        function = f"{name}_{self._suffix}"
        pool = self._client.connection_pool
        return pooled_call(pool, "FCALL", function, 1, self._meta, *argv, history=history)

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
