"""A tunnel's bytes both ways, once both ends are connected: each side's transport is handed a
small protocol that writes what it receives straight to the other side's transport, with the
transports' own flow control (a side whose peer cannot take more stops reading), half-close
forwarded, and an idle clock.

This runs below asyncio streams on purpose: a stream copy loop costs a coroutine step per chunk
each way; a protocol costs a method call. The streams' buffered bytes (what arrived with the
handshake) are sent first, so nothing is lost in the switch.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, cast


class Counts(Protocol):
    """Where a tunnel's bytes are counted as they pass (a traffic record)."""

    bytes_up: int
    bytes_down: int


class _Side(asyncio.Protocol):
    """One connection of a tunnel: what it receives goes to ``peer``'s transport."""

    __slots__ = ("_relay", "_upward", "eof", "peer", "transport")

    def __init__(self, relay: _Relay, transport: asyncio.Transport, upward: bool) -> None:
        self._relay = relay
        self._upward = upward
        self.transport = transport
        self.peer: _Side
        self.eof = False

    def data_received(self, data: bytes) -> None:
        self.peer.transport.write(data)
        relay = self._relay
        relay.active = True
        if self._upward:
            relay.counts.bytes_up += len(data)
        else:
            relay.counts.bytes_down += len(data)

    def eof_received(self) -> bool:
        self.eof = True
        if self.peer.eof or not self.peer.transport.can_write_eof():
            self._relay.finish()
            return False
        self.peer.transport.write_eof()  # half-close: the other way may still carry bytes
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._relay.finish()

    def pause_writing(self) -> None:
        self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.peer.transport.is_closing():
            self.peer.transport.resume_reading()


class _Relay:
    def __init__(self, counts: Counts, idle_timeout: float) -> None:
        self.counts = counts
        self.active = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle = idle_timeout
        self._sides: list[_Side] = []
        self._timer = asyncio.get_running_loop().call_later(idle_timeout, self._tick)

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
        for side in self._sides:
            # Abort what cannot be written out (a peer that stopped reading): the socket must
            # not outlive the tunnel the worker counts.
            if side.transport.get_write_buffer_size():
                side.transport.abort()
            else:
                side.transport.close()
        self.done.set_result(None)


async def relay(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    counts: Counts,
    idle_timeout: float,
) -> None:
    """Carry bytes between ``client`` and ``upstream`` until either closes (or both half-close),
    or nothing passes for ``idle_timeout``; then close both."""
    state = _Relay(counts, idle_timeout)
    sides = []
    for (_reader, writer), upward in ((client, True), (upstream, False)):
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        transport = cast(asyncio.Transport, writer.transport)
        sides.append(_Side(state, transport, upward))
    sides[0].peer, sides[1].peer = sides[1], sides[0]
    state._sides = sides
    for side, (reader, _) in zip(sides, (client, upstream), strict=True):
        pending = _take_buffered(reader)
        side.transport.set_protocol(side)
        if pending:
            side.data_received(pending)
        if reader.at_eof():
            side.eof_received()
        elif not side.transport.is_closing():
            side.transport.resume_reading()  # the stream may have paused it when its buffer filled
    try:
        await state.done
    finally:
        state.finish()


def buffered(reader: asyncio.StreamReader) -> int:
    """Bytes the stream read that nobody consumed yet (see ``_take_buffered``)."""
    return len(reader._buffer)  # type: ignore[attr-defined]


def close_now(writer: asyncio.StreamWriter) -> None:
    """Close the connection; at once (abort) when bytes still wait to be written, so a peer
    that stopped reading cannot keep the socket open after the worker stopped counting it."""
    transport = writer.transport
    if transport.get_write_buffer_size():
        transport.abort()
    else:
        transport.close()


def _take_buffered(reader: asyncio.StreamReader) -> bytes:
    """What the stream read but nobody consumed yet (bytes that came with the handshake).

    StreamReader has no public call for this without awaiting; its buffer is a bytearray named
    ``_buffer`` in every CPython 3.x this project runs (3.11). Were it renamed, the tunnel would
    lose those bytes, so tests send bytes together with the handshake to catch it.
    """
    buffer: bytearray = reader._buffer  # type: ignore[attr-defined]
    pending = bytes(buffer)
    buffer.clear()
    return pending
