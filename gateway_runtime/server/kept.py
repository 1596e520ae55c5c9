"""Upstream connections kept alive between plain-HTTP requests, so a request that rotates to
another proxy usually finds a connection to it already open.

A kept connection is parked in the store (``SnapshotStore.park``): the worker's report counts
it (the vendor counts the TCP connection, not the request), but it keeps no request from its
proxy. A request that reaches the proxy takes it (``take``), or, when the proxy would be past
its maximum with it, closes one (``shed_proxy``). Kept connections are few and brief
(``Limits.upstream_idle_timeout``, below the upstreams' own idle limits), at most ``per_proxy``
for a proxy and ``total`` in all; the most recently used is taken first (the rest age out), and
``sweep`` closes the aged ones and those of proxies no longer served.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container
from dataclasses import dataclass

from gateway_runtime.server.conn import Conn
from gateway_runtime.snapshot_store import SnapshotStore, Ticket

#: A proxy, or for a SOCKS proxy the proxy and the target it is connected to.
Key = tuple[str, str, int] | str


@dataclass(slots=True)
class Connection:
    conn: Conn
    ticket: Ticket
    idle_since: float = 0.0
    #: Whether it served a request before (a failure before any answer byte is then retried).
    reused: bool = False

    def usable(self) -> bool:
        """Open both ways, and nothing unread in it: bytes an answer did not account for
        would be read as the next request's answer."""
        conn = self.conn
        return not conn.is_closing() and not conn.at_eof() and not conn.buffered()


class KeptConnections:
    def __init__(
        self,
        store: SnapshotStore,
        idle_timeout: float,
        per_proxy: int,
        total: int,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._idle_timeout = idle_timeout
        self._per_proxy, self._total = per_proxy, total
        self._clock = clock
        self._kept: dict[Key, deque[Connection]] = {}
        #: The keys each proxy has connections under (a SOCKS proxy: one per target).
        self._keys_of: dict[str, set[Key]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def take(self, key: Key, ticket: Ticket) -> Connection | None:
        """A kept connection for ``key`` under the same assignment as ``ticket``, or None; the
        request's reserved slot becomes the connection's (the store's ``unpark``)."""
        kept = self._kept.get(key)
        deadline = self._clock() - self._idle_timeout
        while kept:
            connection = kept.pop()
            self._count -= 1
            if not kept:
                self._drop_key(key)
            if (
                connection.idle_since >= deadline
                and connection.usable()
                and connection.ticket.epoch == ticket.epoch
            ):
                self._store.unpark(connection.ticket, reused=True)
                connection.reused = True
                return connection
            self.close(connection)
            kept = self._kept.get(key)
        return None

    def give(self, key: Key, connection: Connection) -> None:
        """Keep ``connection`` (its request done, its answer read whole) for the next request;
        or close it and free its slot."""
        kept = self._kept.get(key)
        full = self._count >= self._total or (kept is not None and len(kept) >= self._per_proxy)
        if full or not connection.usable() or not self._store.park(connection.ticket):
            connection.conn.close_now()
            self._store.release(connection.ticket, active=True)
            return
        connection.idle_since = self._clock()
        if kept is None:
            kept = self._kept[key] = deque()
            self._keys_of.setdefault(_proxy_of(key), set()).add(key)
        kept.append(connection)
        self._count += 1

    def close(self, connection: Connection) -> None:
        """Close a kept (parked) connection."""
        connection.conn.close_now()
        self._store.unpark(connection.ticket, reused=False)

    def shed_proxy(self, proxy_id: str) -> bool:
        """Close the oldest kept connection of ``proxy_id`` (a new connection needs its place);
        False when it has none."""
        oldest: tuple[float, Key] | None = None
        for key in self._keys_of.get(proxy_id, ()):
            kept = self._kept[key]
            if oldest is None or kept[0].idle_since < oldest[0]:
                oldest = (kept[0].idle_since, key)
        if oldest is None:
            return False
        kept = self._kept[oldest[1]]
        self.close(kept.popleft())
        self._count -= 1
        if not kept:
            self._drop_key(oldest[1])
        return True

    def _drop_key(self, key: Key) -> None:
        del self._kept[key]
        proxy_id = _proxy_of(key)
        keys = self._keys_of.get(proxy_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys_of[proxy_id]

    def sweep(self, served: Container[str] | None = None) -> int:
        """Close the connections idle too long, and those of proxies not in ``served``; the
        number closed."""
        deadline = self._clock() - self._idle_timeout
        closed = 0
        for key in list(self._kept):
            kept = self._kept[key]
            gone = served is not None and _proxy_of(key) not in served
            while kept and (gone or kept[0].idle_since < deadline or not kept[0].usable()):
                self.close(kept.popleft())
                self._count -= 1
                closed += 1
            if not kept:
                self._drop_key(key)
        return closed

    def close_all(self) -> None:
        for kept in self._kept.values():
            for connection in kept:
                self.close(connection)
        self._kept.clear()
        self._keys_of.clear()
        self._count = 0


def _proxy_of(key: Key) -> str:
    return key if isinstance(key, str) else key[0]
