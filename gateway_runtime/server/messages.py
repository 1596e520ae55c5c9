"""HTTP/1.1 messages as a forward proxy handles them: a request or answer head read whole
(bounded) and parsed by llhttp (httptools), the hop-by-hop headers taken out, and a body
carried to the other side by its own framing (a length, chunks passed through as they are, or
until the connection closes) without being parsed into memory.

Heads are read with ``readuntil`` and bodies with exact reads, so a message never consumes a
byte of the next one on a kept-alive connection.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

import httptools

from gateway_runtime.server.conn import Conn

#: Headers of one hop only (RFC 9110 §7.6.1), plus the proxy login and ``Expect`` (the worker
#: answers 100-continue itself): never passed on.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"upgrade",
        b"expect",
    }
)
#: Never dropped for being listed in ``Connection`` (``Head.forwarded_headers``).
FRAMING = frozenset({b"content-length", b"transfer-encoding", b"host"})
#: A chunk-size line (with any extensions), read at most.
MAX_CHUNK_LINE = 4 * 1024
#: Bytes carried per read.
CHUNK = 64 * 1024
_AUTHORITY = re.compile(rb"(?:\[([0-9A-Fa-f:.]{2,45})\]|([A-Za-z0-9._-]{1,253})):([0-9]{1,5})")


class BadMessage(Exception):
    """A message the worker will not carry; ``reason`` is safe to send back."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class Head:
    """A parsed request or answer head."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    url: bytes = b""
    method: bytes = b""
    status: int = 0
    keep_alive: bool = False
    content_length: int | None = None
    chunked: bool = False
    #: Header names the ``Connection`` header lists (hop-by-hop too).
    connection: frozenset[bytes] = frozenset()
    proxy_authorization: bytes | None = None
    expect_continue: bool = False
    _complete: bool = False

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._complete = True

    def forwarded_headers(self, host: bytes | None = None) -> list[bytes]:
        """The headers to pass on, each as ``Name: value\\r\\n``."""
        # A header ``Connection`` names is hop-by-hop too, except the framing and ``Host``:
        # the worker carries the body by them, so the next hop must read the same framing.
        # Dropping them because a client listed them would let a body pass as a request of
        # its own on a shared upstream connection.
        dropped = HOP_BY_HOP | (self.connection - FRAMING)
        if host is not None:
            # A proxy forwards an absolute-form request with the target's own host, whatever
            # Host the client sent (RFC 9112 §3.2.2).
            dropped = dropped | {b"host"}
        kept = [
            name + b": " + value + b"\r\n"
            for name, value in self.headers
            if name.lower() not in dropped
        ]
        return kept if host is None else [b"Host: " + host + b"\r\n", *kept]


def parse_request(data: bytes) -> Head:
    head, parser = _parsed(httptools.HttpRequestParser, data, "malformed request")
    head.method = parser.get_method()
    return head


def parse_answer(data: bytes) -> Head:
    head, parser = _parsed(httptools.HttpResponseParser, data, "the upstream's answer is malformed")
    head.status = parser.get_status_code()
    return head


def _parsed(kind: type, data: bytes, refusal: str) -> tuple[Head, Any]:
    """A whole head (line, headers, the empty line) parsed by llhttp, framing read off it."""
    head = Head()
    parser = kind(head)
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        pass  # CONNECT (or an Upgrade): the head is whole, which is all that is read here
    except httptools.HttpParserError:
        raise BadMessage(refusal) from None
    if not head._complete:
        raise BadMessage(refusal)
    head.keep_alive = parser.should_keep_alive()
    _framing(head)
    return head, parser


def _framing(head: Head) -> None:
    connection: set[bytes] = set()
    for name, value in head.headers:
        lowered = name.lower()
        if lowered == b"content-length":
            # llhttp refused a malformed or duplicated different length already.
            head.content_length = int(value)
        elif lowered == b"transfer-encoding":
            head.chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            head.content_length = None if head.chunked else head.content_length
        elif lowered == b"connection":
            connection.update(token.strip().lower() for token in value.split(b","))
        elif lowered == b"proxy-authorization":
            head.proxy_authorization = value
        elif lowered == b"expect":
            head.expect_continue = value.strip().lower() == b"100-continue"
    head.connection = frozenset(connection)


def authority(target: bytes) -> tuple[str, int]:
    """``host:port`` of a CONNECT (or SOCKS) target, checked."""
    found = _AUTHORITY.fullmatch(target)
    if found is None:
        raise BadMessage("the target must be host:port")
    port = int(found.group(3))
    if not 1 <= port <= 65_535:
        raise BadMessage("the target's port must be 1 to 65535")
    return (found.group(1) or found.group(2)).decode(), port


def absolute_target(url: bytes) -> tuple[str, int, bytes]:
    """An absolute-URI request's host, port and origin-form target (path and query)."""
    try:
        parts = httptools.parse_url(url)
    except httptools.HttpParserInvalidURLError:
        raise BadMessage("the request target must be an absolute http:// URL") from None
    if parts.schema is None or parts.host is None:
        raise BadMessage("the request target must be an absolute http:// URL")
    if parts.schema.lower() != b"http":
        raise BadMessage("only http:// is forwarded as is; use CONNECT for https://")
    port = parts.port or 80
    host = parts.host
    found = _AUTHORITY.fullmatch(
        (b"[" + host + b"]" if b":" in host else host) + b":" + str(port).encode()
    )
    if found is None or not 1 <= port <= 65_535:
        raise BadMessage("the request target's host or port is malformed")
    origin = parts.path or b"/"
    if parts.query is not None:
        origin += b"?" + parts.query
    return host.decode(), port, origin


class Transfer:
    """Carries one body from ``source`` to ``sink``; ``sent`` counts what was carried.

    ``head``, when given, goes out with the body's first bytes in one write (one send for a
    small answer instead of two); ``flush`` sends it if the body had none. Each read, and each
    wait for the sink to take more, must end within ``idle_s``: a body may take as long as it
    keeps moving, and a side that stalls (or a reader that stops reading) is cut off after
    ``idle_s`` (``TimeoutError``).
    """

    __slots__ = ("_head", "_idle_s", "sent")

    def __init__(self, head: bytes = b"", idle_s: float = 0.0) -> None:
        self.sent = 0
        self._head = head
        self._idle_s = idle_s

    @property
    def head_sent(self) -> bool:
        return not self._head

    def flush(self, sink: Conn) -> None:
        if self._head:
            sink.write(self._head)
            self._head = b""

    async def exactly(self, source: Conn, sink: Conn, size: int) -> None:
        while size > 0:
            source.expire_in(self._idle_s)
            data = await source.read(min(size, CHUNK))
            if not data:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(data)
            await self._write(sink, data)

    async def chunked(self, source: Conn, sink: Conn) -> None:
        """Chunks passed through as they are, up to the last one and its trailers."""
        while True:
            line = await self._line(source)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BadMessage("a malformed chunk size") from None
            await self._write(sink, line)
            if size == 0:
                while True:  # trailers, then the empty line
                    trailer = await self._line(source)
                    await self._write(sink, trailer)
                    if trailer == b"\r\n":
                        return
            await self.exactly(source, sink, size)
            source.expire_in(self._idle_s)
            end = await source.readexactly(2)
            if end != b"\r\n":
                raise BadMessage("a chunk without its CRLF")
            await self._write(sink, end)

    async def until_closed(self, source: Conn, sink: Conn) -> None:
        while True:
            source.expire_in(self._idle_s)
            data = await source.read(CHUNK)
            if not data:
                return
            await self._write(sink, data)

    async def _write(self, sink: Conn, data: bytes) -> None:
        self.sent += len(data)
        if self._head:
            data, self._head = self._head + data, b""
        sink.write(data)
        sink.expire_in(self._idle_s)
        await sink.drain()

    async def _line(self, source: Conn) -> bytes:
        source.expire_in(self._idle_s)
        try:
            line = await source.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise BadMessage("a chunk line is too long") from None
        if len(line) > MAX_CHUNK_LINE:
            raise BadMessage("a chunk line is too long")
        return line


def answer_has_body(method: bytes, status: int) -> bool:
    return method != b"HEAD" and not (100 <= status < 200 or status in (204, 304))
