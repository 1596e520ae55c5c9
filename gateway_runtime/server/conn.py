"""A TCP connection as the worker's server uses it: one object that is the transport's protocol,
a buffered reader, a writer, and, once a tunnel starts, one side of its relay.

This is below asyncio streams on purpose: a stream connection is four objects (StreamReader, its
protocol, StreamWriter, a task) and every bounded wait an ``asyncio.timeout`` (a context and a
timer made and cancelled). Measured, leaving them saved little (docs/PERFORMANCE.md "The worker
on its own connections"); what this module is kept for is one deadline per connection
(``expire_in``, kept by at most one timer, armed only when a wait has to wait and re-armed only
when it fires before the deadline, which moved) and a tunnel switch that needs no stream's
private buffer.

Every wait honours the deadline last set with ``expire_in`` (None: no deadline). A site that
waits sets its own first: a deadline left from an earlier wait is not a bound for the next one.
A wait past its deadline raises ``TimeoutError``; a read at the end of input raises
``asyncio.IncompleteReadError`` (``read`` returns ``b""``), as a stream's would, so callers keep
the streams' error vocabulary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

#: A listener's handler of one client connection.
Serve = Callable[["Conn"], Coroutine[Any, Any, None]]


class Counts(Protocol):
    """Where a tunnel's bytes are counted as they pass (a traffic record)."""

    bytes_up: int
    bytes_down: int


class Conn(asyncio.Protocol):
    """One connection; ``limit``: the most bytes buffered unread (a head must fit in it)."""

    __slots__ = (
        "_buffer",
        "_drainer",
        "_eof",
        "_error",
        "_expires",
        "_limit",
        "_loop",
        "_made",
        "_reading_paused",
        "_timer",
        "_tunnel",
        "_waiter",
        "_writing_paused",
        "peer",
        "transport",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        limit: int,
        made: Callable[[Conn], None] | None = None,
    ) -> None:
        self._loop = loop
        self._limit = limit
        self._made = made
        self._buffer = bytearray()
        self._eof = False
        #: The connection was lost with this error (reads and drains raise it).
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._drainer: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._expires: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tunnel: _Tunnel | None = None
        self.peer: Conn | None = None
        self.transport: asyncio.Transport

    # ------------------------------------------------------------------ protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        if self._made is not None:
            self._made(self)

    def data_received(self, data: bytes) -> None:
        tunnel = self._tunnel
        if tunnel is not None:
            tunnel.carry(self, data)
            return
        self._buffer += data
        self._wake(self._waiter)
        if len(self._buffer) > 2 * self._limit and not self._reading_paused:
            # Nobody reads it (yet): stop taking more until a read makes room.
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        if self._tunnel is not None:
            return self._tunnel.eof(self)
        self._wake(self._waiter)
        return True  # half-closed: an answer can still be written to a client that finished

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._error = exc if exc is not None else ConnectionResetError("connection lost")
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._tunnel is not None:
            self._tunnel.finish()
        self._wake(self._waiter)
        self._wake(self._drainer)

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._tunnel is not None and self.peer is not None:
            self.peer.transport.pause_reading()  # the peer sends what this side cannot take

    def resume_writing(self) -> None:
        self._writing_paused = False
        peer = self.peer
        if self._tunnel is not None and peer is not None and not peer.transport.is_closing():
            peer.transport.resume_reading()
        self._wake(self._drainer)

    # ------------------------------------------------------------------ deadline
    def expire_in(self, seconds: float | None) -> None:
        """The deadline of this connection's waits from now on: ``seconds`` ahead, or none."""
        self._expires = None if seconds is None else self._loop.time() + seconds

    def _arm(self) -> None:
        expires = self._expires
        if expires is None:
            return
        timer = self._timer
        if timer is not None:
            if timer.when() <= expires:
                return  # it fires first and re-arms for the later deadline then
            timer.cancel()
        self._timer = self._loop.call_at(expires, self._expire)

    def _expire(self) -> None:
        self._timer = None
        expires = self._expires
        if expires is None or (self._waiter is None and self._drainer is None):
            return
        if self._loop.time() < expires:
            self._arm()  # the deadline moved since the timer was armed
            return
        for waiter in (self._waiter, self._drainer):
            if waiter is not None and not waiter.done():
                waiter.set_exception(TimeoutError())

    async def _wait(self) -> None:
        """Until more bytes, the end of input, the loss of the connection or the deadline."""
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()
        waiter = self._loop.create_future()
        self._waiter = waiter
        self._arm()
        try:
            await waiter
        finally:
            self._waiter = None

    @staticmethod
    def _wake(waiter: asyncio.Future[None] | None) -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------------ reading
    def at_eof(self) -> bool:
        """The peer closed its side and every byte it sent was read."""
        return self._eof and not self._buffer

    def buffered(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buffer)

    async def readuntil(self, separator: bytes) -> bytes:
        """The bytes up to and with ``separator``; ``asyncio.LimitOverrunError`` when it is not
        within the connection's limit (the bytes stay unread)."""
        buffer = self._buffer
        start = 0
        while True:
            found = buffer.find(separator, start)
            if found >= 0:
                end = found + len(separator)
                if end > self._limit:
                    raise asyncio.LimitOverrunError("the separator is past the limit", found)
                return self._take(end)
            if len(buffer) > self._limit:
                raise asyncio.LimitOverrunError("no separator within the limit", len(buffer))
            if self._eof:
                partial = bytes(buffer)
                buffer.clear()
                raise asyncio.IncompleteReadError(partial, None)
            start = max(0, len(buffer) - len(separator) + 1)
            await self._wait()

    async def readexactly(self, size: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < size:
            if self._eof:
                partial = bytes(buffer)
                buffer.clear()
                raise asyncio.IncompleteReadError(partial, size)
            await self._wait()
        return self._take(size)

    async def read(self, most: int) -> bytes:
        """Up to ``most`` bytes, at least one; ``b""`` at the end of input."""
        while not self._buffer:
            if self._eof:
                return b""
            await self._wait()
        return self._take(min(most, len(self._buffer)))

    def _take(self, size: int) -> bytes:
        buffer = self._buffer
        if size == len(buffer):
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:size])
            del buffer[:size]
        if self._reading_paused and len(buffer) <= self._limit:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    # ------------------------------------------------------------------ writing
    def write(self, data: bytes) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        """Until the transport takes more (its buffer below its high-water mark)."""
        if self._error is not None:
            raise ConnectionResetError("connection lost")
        if not self._writing_paused:
            return
        drainer = self._loop.create_future()
        self._drainer = drainer
        self._arm()
        try:
            await drainer
        finally:
            self._drainer = None
        if self._error is not None:
            raise ConnectionResetError("connection lost")

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def close(self) -> None:
        self.transport.close()

    def close_now(self) -> None:
        """Close; at once (abort) when bytes still wait to be written, so a peer that stopped
        reading cannot keep the socket open after the worker stopped counting it."""
        if self.transport.get_write_buffer_size():
            self.transport.abort()
        else:
            self.transport.close()


class _Tunnel:
    """Two connections relaying each other's bytes: what one receives is written to the other
    at once (a method call per chunk, no coroutine step), with the transports' own flow control
    (a side whose peer cannot take more stops reading), half-close passed on, and an idle
    clock."""

    __slots__ = ("_idle", "_timer", "active", "client", "counts", "done", "upstream")

    def __init__(self, client: Conn, upstream: Conn, counts: Counts, idle_timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self.client, self.upstream, self.counts = client, upstream, counts
        self.active = False
        self.done: asyncio.Future[None] = loop.create_future()
        self._idle = idle_timeout
        self._timer = loop.call_later(idle_timeout, self._tick)

    def carry(self, side: Conn, data: bytes) -> None:
        if side is self.client:
            self.upstream.transport.write(data)
            self.counts.bytes_up += len(data)
        else:
            self.client.transport.write(data)
            self.counts.bytes_down += len(data)
        self.active = True

    def eof(self, side: Conn) -> bool:
        peer = self.upstream if side is self.client else self.client
        if peer._eof or not peer.transport.can_write_eof():
            self.finish()
            return False
        peer.transport.write_eof()  # half-close: the other way may still carry bytes
        return True

    def _tick(self) -> None:
        # Re-armed each period: idle means no byte either way for a whole period.
        if not self.active:
            self.finish()
            return
        self.active = False
        self._timer = asyncio.get_running_loop().call_later(self._idle, self._tick)

    def finish(self) -> None:
        if self.done.done():
            return
        self._timer.cancel()
        for side in (self.client, self.upstream):
            side.close_now()  # a side that cannot write its rest is aborted, not left open
            # No reference cycle (side -> tunnel -> side) left for the garbage collector: a
            # closed transport delivers no more bytes, and its connection_lost needs neither.
            side._tunnel = side.peer = None
        self.done.set_result(None)


async def relay(client: Conn, upstream: Conn, counts: Counts, idle_timeout: float) -> None:
    """Carry bytes between ``client`` and ``upstream`` until either closes (or both half-close),
    or nothing passes for ``idle_timeout``; then close both. Bytes either side sent with its
    handshake (read but not consumed) go first, so nothing is lost in the switch."""
    tunnel = _Tunnel(client, upstream, counts, idle_timeout)
    client.peer, upstream.peer = upstream, client
    try:
        for side in (client, upstream):
            if tunnel.done.done():
                break  # the first side's end ended it
            side._tunnel = tunnel
            if side._error is not None:
                tunnel.finish()
                break
            if side._buffer:
                pending = bytes(side._buffer)
                side._buffer.clear()
                tunnel.carry(side, pending)
            if side._eof:
                side.eof_received()
            elif side._reading_paused:
                side._reading_paused = False
                side.transport.resume_reading()
        for side in (client, upstream):
            if side._writing_paused and side.peer is not None:
                side.peer.transport.pause_reading()
        await tunnel.done
    finally:
        tunnel.finish()


async def listen(
    serve: Serve, host: str, port: int, limit: int, handlers: set[asyncio.Task[None]]
) -> asyncio.Server:
    """A listening server whose every client connection is a ``Conn`` (``limit`` unread bytes
    at most) served by a task of its own, held in ``handlers`` while it runs (so a shutdown can
    drain them)."""
    loop = asyncio.get_running_loop()

    def made(conn: Conn) -> None:
        task = loop.create_task(serve(conn))
        handlers.add(task)
        task.add_done_callback(handlers.discard)

    return await loop.create_server(lambda: Conn(loop, limit, made), host, port, backlog=1024)
