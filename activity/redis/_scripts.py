"""Loading the Lua scripts and calling them: the only place that speaks to Redis.

Each script is ``lua/lib.lua`` followed by its own file, registered once with redis-py
(EVALSHA; a NOSCRIPT reply after a flush or failover reloads and retries transparently).
Replies are JSON: ``{"ok": value}`` or ``{"err": code, "reason": ..., ...}``; errors map to
the shared code table in ``activity.errors``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis
from redis.commands.core import Script

from activity.deadline import check_deadline
from activity.errors import (
    ERROR_CODES,
    ActivityError,
    InsufficientInventory,
    ReportRejected,
    StoreUnavailable,
)

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"

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
)

_TRANSIENT = (redis.ConnectionError, redis.TimeoutError)


def script_source(name: str) -> str:
    library = (LUA_DIR / "lib.lua").read_text()
    return library + "\n" + (LUA_DIR / f"{name}.lua").read_text()


class Scripts:
    """The registered scripts of one client, called by name."""

    def __init__(self, client: redis.Redis, meta_key: str) -> None:
        self._meta = meta_key
        self._client = client
        self._scripts: dict[str, Script] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }

    def hget_json(self, key: str, field: str) -> Any:
        """One plain read (no script needed): a JSON value of a hash field, or None."""
        check_deadline()
        try:
            raw = self._client.hget(key, field)
        except _TRANSIENT as exc:
            raise StoreUnavailable("Redis did not answer a read") from exc
        except redis.RedisError as exc:
            raise StoreUnavailable("Redis refused a read") from exc
        return None if raw is None else json.loads(raw)

    def call(self, name: str, *args: object, retry_safe: bool = False) -> Any:
        """Run one script; a dropped connection is retried once when the call is replay-safe.

        ``retry_safe`` calls carry an operation ID, so a script that committed before the
        connection broke answers the retry from its stored result and changes nothing twice.
        """
        check_deadline()
        script = self._scripts[name]
        attempts = 2 if retry_safe else 1
        for attempt in range(attempts):
            try:
                raw = script(keys=[self._meta], args=[_arg(a) for a in args])
                break
            except _TRANSIENT as exc:
                if attempt + 1 == attempts:
                    raise StoreUnavailable(
                        f"Redis did not answer {name}; the outcome is unknown"
                    ) from exc
                check_deadline()
            except redis.ResponseError as exc:
                raise _response_error(name, exc) from exc
            except redis.RedisError as exc:
                raise StoreUnavailable(f"Redis refused {name}") from exc
        return _decode(name, raw)


def _arg(value: object) -> str | int | float | bytes:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int, float, bytes)):
        return value
    return json.dumps(value, separators=(",", ":"))


def _response_error(name: str, exc: redis.ResponseError) -> ActivityError:
    text = str(exc)
    if "BUSY" in text or "LOADING" in text or "READONLY" in text or "OOM" in text:
        return StoreUnavailable(f"Redis cannot run {name} now")
    # A Lua error here is a bug in a script or its caller, never a business refusal.
    return ActivityError(f"script {name} failed: {text.splitlines()[0][:200]}")


def _decode(name: str, raw: Any) -> Any:
    reply = json.loads(raw)
    if "err" not in reply:
        return reply["ok"]
    code, reason = reply["err"], reply.get("reason")
    cls = ERROR_CODES.get(code, ActivityError)
    message = f"{name}: {code}" + (f" ({reason})" if reason else "")
    if cls is InsufficientInventory:
        return_error: ActivityError = InsufficientInventory(
            message, requested=int(reply["requested"]), available=int(reply["available"])
        )
    elif cls is ReportRejected:
        ids = reply.get("proxy_ids") or []
        return_error = ReportRejected(message, reason=str(reason), proxy_ids=list(ids))
    else:
        return_error = cls(message, reason=reason)
    raise return_error
