"""Upstream connections kept alive between plain-HTTP requests, so a request that rotates to
another proxy usually finds a connection to it already open.

A kept connection still holds its proxy's slot (its ticket stays active): the vendor counts
the TCP connection, not the request, so the worker's report counts it too. Kept connections are
few and brief (``Limits.upstream_idle_timeout``, below the upstreams' own idle limits), at most
``per_proxy`` for a proxy and ``total`` in all; the most recently used is taken first (the
rest age out), and ``sweep`` closes the aged ones and those of proxies no longer served.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Container
from dataclasses import dataclass

from gateway_runtime.snapshot_store import SnapshotStore, Ticket

#: A proxy, or for a SOCKS proxy the proxy and the target it is connected to.
Key = tuple[str, str, int] | str


@dataclass(slots=True)
class Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ticket: Ticket
    idle_since: float = 0.0
    #: Whether it served a request before (a failure before any answer byte is then retried).
    reused: bool = False

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()


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
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def take(self, key: Key, ticket: Ticket) -> Connection | None:
        """A kept connection for ``key`` under the same assignment as ``ticket``, or None."""
        kept = self._kept.get(key)
        deadline = self._clock() - self._idle_timeout
        while kept:
            connection = kept.pop()
            self._count -= 1
            if (
                connection.idle_since >= deadline
                and connection.usable()
                and connection.ticket.epoch == ticket.epoch
            ):
                if not kept:
                    del self._kept[key]
                connection.reused = True
                return connection
            self.close(connection)
        self._kept.pop(key, None)
        return None

    def give(self, key: Key, connection: Connection) -> None:
        """Keep ``connection`` (its request done, its answer read whole) for the next request."""
        kept = self._kept.setdefault(key, deque())
        if self._count >= self._total or len(kept) >= self._per_proxy or not connection.usable():
            if not kept:
                del self._kept[key]
            self.close(connection)
            return
        connection.idle_since = self._clock()
        kept.append(connection)
        self._count += 1

    def close(self, connection: Connection) -> None:
        connection.writer.close()
        self._store.release(connection.ticket, active=True)

    def sweep(self, served: Container[str] | None = None) -> int:
        """Close the connections idle too long, and those of proxies not in ``served``; the
        number closed."""
        deadline = self._clock() - self._idle_timeout
        closed = 0
        for key in list(self._kept):
            proxy_id = key if isinstance(key, str) else key[0]
            kept = self._kept[key]
            gone = served is not None and proxy_id not in served
            while kept and (gone or kept[0].idle_since < deadline or not kept[0].usable()):
                self.close(kept.popleft())
                self._count -= 1
                closed += 1
            if not kept:
                del self._kept[key]
        return closed

    def shed(self, count: int) -> int:
        """Close up to ``count`` of the oldest kept connections, freeing their slots (when no
        proxy has room for a new request); the number closed."""
        oldest = sorted(
            ((kept[0].idle_since, key) for key, kept in self._kept.items() if kept),
            key=lambda pair: pair[0],
        )
        closed = 0
        for _, key in oldest:
            kept = self._kept[key]
            while kept and closed < count:
                self.close(kept.popleft())
                self._count -= 1
                closed += 1
            if not kept:
                del self._kept[key]
            if closed >= count:
                break
        return closed

    def close_all(self) -> None:
        for kept in self._kept.values():
            for connection in kept:
                self.close(connection)
        self._kept.clear()
        self._count = 0
