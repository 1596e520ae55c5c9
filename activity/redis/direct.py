"""One Redis command on a pooled connection, past redis-py's per-command wrapper.

redis-py's ``Redis.execute_command`` adds retries (RedisPool wants none)
and observability hooks: ~30 µs of CPU per call on this project's machines, a fifth of an
extract's client side (docs/PERFORMANCE.md). Errors are redis-py's own; a connection that
failed mid-reply is disconnected before it goes back to the pool, so no later call reads a
stale reply. The command is packed by hiredis directly (redis-py's packer checks each
argument's type in Python first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # redis-py packs it then
    _hiredis_pack = None


def pooled_call(pool: redis.ConnectionPool, *command: Any) -> Any:
    conn = pool.get_connection()
    try:
        if _hiredis_pack is not None:
            conn.send_packed_command([_hiredis_pack(command)], check_health=False)  # type: ignore[no-untyped-call]
        else:
            conn.send_command(*command)  # type: ignore[no-untyped-call]  # untyped in redis-py
        return conn.read_response()
    except (redis.ConnectionError, redis.TimeoutError):
        conn.disconnect()  # type: ignore[no-untyped-call]
        raise
    finally:
        pool.release(conn)
