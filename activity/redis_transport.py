"""How RedisPool's calls reach Redis: its own client, and one command sent past redis-py.

``bounded_client`` gives the pool a client of its own on the caller's server whose connections
never retry (only ``Scripts.call`` may, and only replay-safe calls), always time out, and let
the active ``activity.deadline`` bound every wait on the socket: connecting, sending and each
read of the reply wait at most the time left when the call starts, so a frozen server costs a
call inside ``deadline(250 ms)`` about 250 ms, not the socket timeout. Each of its connections
also learns its server's replication ID once, when it connects (``_LearnsHistory``), which
extracts and worker heartbeats send along so the pool can tell a failover
(docs/activity-pool.md "Generation").

``pooled_call`` runs one command on a pooled connection without redis-py's per-command wrapper:
its retries (RedisPool wants none) and observability hooks cost ~30 µs of CPU per call on this
project's machines, a fifth of an extract's client side (docs/PERFORMANCE.md). The command is
packed by hiredis directly (redis-py's packer checks each argument's type in Python first).
Errors are redis-py's own, or ``DeadlineExceeded`` when the deadline cut the call; a connection
that failed mid-reply is disconnected before it goes back to the pool, so no later call reads a
stale reply.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import timedelta
from functools import cache
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.connection import AbstractConnection
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from activity.deadline import check_deadline, remaining
from activity.errors import DeadlineExceeded

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # redis-py packs it then
    _hiredis_pack = None


def pooled_call(pool: redis.ConnectionPool, *command: Any, history: bool = False) -> Any:
    """``history``: the connection's replication ID (``replication_id``) is sent as the
    command's last argument."""
    try:
        conn = pool.get_connection()
    except redis.TimeoutError as exc:
        _raise_if_past_deadline(exc, "while connecting; nothing was sent")
        raise
    try:
        if not history:
            return _send(conn, command)
        try:
            return _send(conn, (*command, replication_id(conn)))
        except redis.ResponseError as exc:
            if not str(exc).startswith(HISTORY_UNCONFIRMED):
                raise
            # The script wrote nothing: this connection's replication ID is not the one the
            # pool's data was written under. Ask the server again, and resend it confirmed.
            return _send(conn, (*command, _confirmed_history(conn)))
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        conn.disconnect()  # type: ignore[no-untyped-call]
        if isinstance(exc, redis.TimeoutError):
            _raise_if_past_deadline(exc, "before Redis answered; the outcome is unknown")
        raise
    finally:
        pool.release(conn)


#: How a pool script refuses a replication ID it has not seen confirmed (check_history in
#: lua/lib/core.lua): an error reply that never leaves this module.
HISTORY_UNCONFIRMED = "HISTORY unconfirmed"


def _send(conn: Any, command: tuple[Any, ...]) -> Any:
    if _hiredis_pack is not None:
        conn.send_packed_command([_hiredis_pack(command)], check_health=False)
    else:
        conn.send_command(*command)
    return conn.read_response()


def _confirmed_history(conn: Any) -> str:
    """The connection's server's replication ID asked again now, as a script takes it
    confirmed: "<replid>!<promoted>" ("" when unknown)."""
    learn = getattr(conn, "learn_history", None)
    if learn is None:
        return ""
    learn()
    replid = replication_id(conn)
    return f"{replid}!{int(conn.promoted)}" if replid else ""


def _raise_if_past_deadline(exc: redis.TimeoutError, when: str) -> None:
    # A socket wait bounded by the deadline ends at or after it (poll rounds its timeout up).
    left = remaining()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"the call's deadline passed {when}") from exc


def bounded_client(client: redis.Redis, timeout: timedelta) -> redis.Redis:
    """A client on the same server whose calls time out and are never retried by redis-py.

    Only ``Scripts.call`` may retry, and only calls that carry an operation key: redis-py's own
    retries (on by default for some clients) would run an assign or a keyless extract twice
    after a lost reply. Connections without a socket timeout get ``timeout``; every connection
    also honours the active deadline (``_DeadlineBound``).
    """
    kwargs = dict(client.connection_pool.connection_kwargs)
    seconds = timeout.total_seconds()
    if kwargs.get("socket_timeout") is None:
        kwargs["socket_timeout"] = seconds
    if kwargs.get("socket_connect_timeout") is None:
        kwargs["socket_connect_timeout"] = seconds
    kwargs["retry"] = Retry(NoBackoff(), 0)
    kwargs["retry_on_error"] = []
    kwargs.pop("retry_on_timeout", None)
    source = client.connection_pool
    connection_class = _deadline_bound(source.connection_class)
    pool: redis.ConnectionPool
    if isinstance(source, SentinelConnectionPool):
        # The same master, found through the same Sentinels at each connection (the pool puts
        # its own back-reference in the connections' arguments).
        kwargs.pop("connection_pool", None)
        pool = SentinelConnectionPool(
            source.service_name,
            source.sentinel_manager,
            connection_class=connection_class,
            max_connections=source.max_connections,
            **kwargs,
        )
    else:
        pool = redis.ConnectionPool(
            connection_class=connection_class, max_connections=source.max_connections, **kwargs
        )
    return redis.Redis(connection_pool=pool)


def replication_id(conn: object) -> str:
    """The replication ID of the server ``conn`` is connected to, as it was when the connection
    was made (``_LearnsHistory``); "" when unknown (a replica, INFO refused, another client)."""
    return getattr(conn, "replid", "")


class _LearnsHistory(AbstractConnection):
    """Mixed in before any redis-py connection class: each new connection asks its server for
    ``INFO replication`` once, after the handshake, and keeps the master's replication ID
    (``master_replid``) and whether a promotion made it (``master_replid2`` set). A script
    compares it with the one the pool's data was written under (docs/activity-pool.md
    "Generation"); when they differ the script refuses, and ``pooled_call`` has this connection
    ask again (``learn_history``) before it resends. Once per connection, and once more per
    refusal; never per command."""

    replid = ""
    promoted = False

    def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        # Here rather than in on_connect: a client's own `redis_connect_func` replaces that.
        fresh = self._sock is None
        super().connect_check_health(check_health, retry_socket_connect)
        if fresh:
            try:
                self.learn_history()
            except BaseException:
                self.disconnect()  # type: ignore[no-untyped-call]
                raise

    def learn_history(self) -> None:
        self.send_command("INFO", "replication", check_health=False)  # type: ignore[no-untyped-call]
        try:
            info = self.read_response()
        except redis.exceptions.NoPermissionError:
            # INFO refused by the ACL, for good: no history to compare, nothing breaks.
            self.replid, self.promoted = "", False
            return
        except redis.ResponseError as exc:
            # Anything else (BUSY while a script runs, LOADING) passes: "" would mean "never
            # check" for the connection's whole life, so the connection fails instead.
            raise redis.ConnectionError(f"INFO replication refused: {exc}") from exc
        self.replid, self.promoted = _master_history(info)


#: master_replid2 of a server no promotion made (a new one, a backlog made or freed).
NO_REPLID = "0" * 40


def _master_history(info: bytes | str) -> tuple[str, bool]:
    """(master_replid, whether master_replid2 is set) of a master; ("", False) for a replica:
    a replica's master_replid is its master's, and only a master's own history counts."""
    text = info.decode() if isinstance(info, bytes) else info
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("role") != "master":
        return "", False
    replid2 = fields.get("master_replid2", NO_REPLID).strip()
    return fields.get("master_replid", "").strip(), replid2 not in ("", NO_REPLID)


class _DeadlineBound(AbstractConnection):
    """Mixed in before any redis-py connection class (TCP, TLS, Unix socket): the time left
    before the active deadline bounds each wait on the socket.

    Without a deadline a call costs one context-variable read here and no system call: the
    socket keeps the timeout it was connected with. Under a deadline shorter than the socket
    timeout, the socket's timeout is set to the time left before the command is sent (which
    bounds the send and each read of its reply) and set back at the next call without one.
    """

    #: The socket's timeout is the deadline's, not ``socket_timeout``.
    _shortened = False

    def _connect(self) -> socket.socket:
        configured = self.socket_connect_timeout, self.socket_timeout
        left = remaining()
        if left is not None:
            if left <= 0:
                raise TimeoutError("the call's deadline passed")  # socket.timeout: redis-py maps it
            # redis-py's _connect applies both; the handshake that follows (AUTH, HELLO, CLIENT
            # SETINFO) reads with the socket's timeout, so it is bounded too.
            self.socket_connect_timeout = _shorter(configured[0], left)
            self.socket_timeout = _shorter(configured[1], left)
        try:
            sock: socket.socket = super()._connect()  # type: ignore[safe-super,no-untyped-call]
        finally:
            self.socket_connect_timeout, self.socket_timeout = configured
        self._shortened = sock.gettimeout() != self.socket_timeout
        return sock

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        left = check_deadline()
        sock = self._sock
        if sock is not None:
            if left is not None and (self.socket_timeout is None or left < self.socket_timeout):
                sock.settimeout(left)
                self._shortened = True
            elif self._shortened:
                sock.settimeout(self.socket_timeout)
                self._shortened = False
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


def _shorter(configured: float | None, left: float) -> float:
    return left if configured is None else min(configured, left)


@cache
def _deadline_bound(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    if issubclass(connection_class, _DeadlineBound):
        return connection_class
    name = f"DeadlineBound{connection_class.__name__}"
    return type(name, (_DeadlineBound, _LearnsHistory, connection_class), {})
