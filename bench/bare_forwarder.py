"""A bare uvloop forwarder for ``bench/gateway.py --part forward``: the floor a Python forwarder
can reach, to judge the gateway worker against in the same run.

    bare_forwarder.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT UPSTREAM_USER UPSTREAM_PASSWORD

It listens on 127.0.0.1:LISTEN_PORT and sends everything to one fixed HTTP proxy (the bench's
tinyproxy) with that proxy's Basic login. Written at the asyncio Protocol level on uvloop: a
Protocol per connection, no streams; the only task is a short one per upstream dial
(``loop.create_connection`` is a coroutine).

What it does, and only that (what bench/loadclient.c sends):

* ``CONNECT host:port``: the same CONNECT to the upstream with its login; on a 2xx answer the
  client gets ``200 Connection established`` and bytes are relayed both ways (any bytes that
  arrived after either head included), with flow control (a side whose writes back up pauses
  the other's reading); when either side closes, both are closed (no half-close). Any other
  answer, or a failed dial: 502 and close.
* Absolute-URI requests without a body on kept-alive client connections: each request goes to
  the upstream on a new connection (none is kept: tinyproxy closes its client connection after
  every answer anyway), request line as is, the client's headers minus Proxy-Authorization,
  Proxy-Connection and Connection, plus the upstream's Proxy-Authorization. The answer is
  relayed framed by its Content-Length (its Connection, Proxy-Connection and Keep-Alive
  headers dropped) and the client's next request is served. An answer that is chunked or
  has no length is refused with 502 (the bench's never are); a request with a body with 501.

What it is not: no client auth (a client's Proxy-Authorization is dropped, unread), no
selection (one upstream for all), no timeouts, no metrics, no logging, no IPv6, no pipelining
beyond holding the next request until the answer before it is done. Not project code.
"""

from __future__ import annotations

import asyncio
import base64
import signal
import sys

import uvloop

#: Longest request or answer head taken; also how much a client may send ahead of its answer.
MAX_HEAD = 64 * 1024
#: Client headers not passed on: the client's login is not the upstream's, hops are not kept.
DROPPED = {b"proxy-authorization", b"proxy-connection", b"connection"}
#: Answer headers not passed back: the client connection is kept whatever the upstream does.
HOP = {b"connection", b"proxy-connection", b"keep-alive"}
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


class Upstream:
    """The one upstream proxy: where to dial and the login line to send."""

    def __init__(self, host: str, port: int, user: str, password: str) -> None:
        self.host, self.port = host, port
        login = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.auth = f"Proxy-Authorization: Basic {login}".encode()


def write(transport: asyncio.Transport, data: bytes) -> None:
    if data and not transport.is_closing():
        transport.write(data)


class Client(asyncio.Protocol):
    """One client connection: its request heads, then a tunnel or answers relayed."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.buf = b""
        self.busy = False  # a request is being forwarded; later bytes wait in buf
        self.peer: asyncio.Transport | None = None  # the upstream connection of the moment
        self.tunnel: asyncio.Transport | None = None  # set once a tunnel is open
        self.close_after = self.closed = False
        self.held = False  # reading paused because buf holds too much
        self.dialing: asyncio.Task[None] | None = None  # referenced while it runs

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            write(self.tunnel, data)
            return
        self.buf += data
        if not self.busy:
            self.next_request()
        elif len(self.buf) > MAX_HEAD and not self.held:
            self.held = True
            self.transport.pause_reading()

    def next_request(self) -> None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self.refuse(b"431 Request Header Fields Too Large")
            return
        head, self.buf = self.buf[:end], self.buf[end + 4 :]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3:
            self.refuse(b"400 Bad Request")
            return
        method, target, version = parts
        self.busy = True
        if method == b"CONNECT":
            request = b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n" % (
                target, target, self.upstream.auth
            )  # fmt: skip
            self.dial(Tunnel(self, request))
            return
        if target[:7].lower() != b"http://":
            self.refuse(b"400 Bad Request")
            return
        kept = [lines[0]]
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"connection" and value.strip().lower() == b"close":
                self.close_after = True
            elif name == b"transfer-encoding" or (
                name == b"content-length" and value.strip() != b"0"
            ):
                self.refuse(b"501 Not Implemented")
                return
            if name not in DROPPED:
                kept.append(line)
        self.close_after |= version == b"HTTP/1.0"
        kept.append(self.upstream.auth)
        self.dial(Answer(self, b"\r\n".join(kept) + b"\r\n\r\n", method == b"HEAD"))

    def dial(self, protocol: Forward) -> None:
        self.dialing = asyncio.get_running_loop().create_task(self._dial(protocol))

    async def _dial(self, protocol: Forward) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: protocol, self.upstream.host, self.upstream.port)
        except OSError:
            self.refuse(b"502 Bad Gateway")
        self.dialing = None

    def tunnel_open(self, transport: asyncio.Transport) -> None:
        self.tunnel, self.busy = transport, False
        write(transport, self.buf)
        self.buf = b""
        self.resume()

    def answered(self) -> None:
        """The answer to the last request is all written: serve the next."""
        self.peer, self.busy = None, False
        if self.close_after:
            self.close()
            return
        self.resume()
        if self.buf:
            self.next_request()

    def resume(self) -> None:
        if self.held:
            self.held = False
            self.transport.resume_reading()

    def refuse(self, status: bytes) -> None:
        write(self.transport, b"HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n" % status)
        self.close()

    def close(self) -> None:
        """Close both sides; what is buffered for either is still written first."""
        self.closed = True
        self.transport.close()
        if self.peer is not None:
            self.peer.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    # The client's writes back up: stop reading the upstream until they drain.
    def pause_writing(self) -> None:
        if self.peer is not None and not self.peer.is_closing():
            self.peer.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and not self.peer.is_closing():
            self.peer.resume_reading()


class Forward(asyncio.Protocol):
    """A connection to the upstream for one client's request or tunnel."""

    def __init__(self, client: Client, request: bytes) -> None:
        self.client, self.request = client, request
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.head = b""
        self.relaying = False  # the answer's head is read: what follows goes to the client
        self.done = False  # the client is past this connection: its loss means nothing

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.client.closed:
            self.done = True
            transport.close()
            return
        self.client.peer = self.transport
        self.transport.write(self.request)

    def read_head(self, data: bytes) -> tuple[int, list[bytes], bytes] | None:
        """The answer's status, head lines and the bytes after the head, once all there."""
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            if len(self.head) > MAX_HEAD:
                self.fail()
            return None
        lines = self.head[:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            self.fail()
            return None
        return int(parts[1]), lines, self.head[end + 4 :]

    def fail(self) -> None:
        """No usable answer: 502 if the client has had no byte of one, else just close."""
        self.done = True
        self.transport.close()
        if self.client.closed:
            return
        if self.relaying:
            self.client.close()
        else:
            self.client.refuse(b"502 Bad Gateway")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done:
            self.fail()

    # The upstream's writes back up: stop reading the client until they drain.
    def pause_writing(self) -> None:
        if not self.client.transport.is_closing():
            self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.client.transport.is_closing():
            self.client.transport.resume_reading()


class Tunnel(Forward):
    def data_received(self, data: bytes) -> None:
        if self.relaying:
            write(self.client.transport, data)
            return
        answer = self.read_head(data)
        if answer is None:
            return
        status, _, rest = answer
        if not 200 <= status < 300:
            self.fail()
            return
        self.relaying = True
        write(self.client.transport, ESTABLISHED + rest)
        self.client.tunnel_open(self.transport)


class Answer(Forward):
    def __init__(self, client: Client, request: bytes, head_only: bool) -> None:
        super().__init__(client, request)
        self.head_only = head_only
        self.left = 0  # body bytes still to relay, once the head is read

    def data_received(self, data: bytes) -> None:
        if self.done:
            return
        head = b""
        if not self.relaying:
            answer = self.read_head(data)
            if answer is None:
                return
            status, lines, data = answer
            kept = [lines[0]]
            length = None
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"transfer-encoding":
                    length = None
                    break
                if name == b"content-length" and value.strip().isdigit():
                    length = int(value)
                if name not in HOP:
                    kept.append(line)
            else:
                if self.head_only or status in (204, 304):
                    length = 0
            if length is None:  # chunked, or ending with the connection: refused
                self.fail()
                return
            self.relaying, self.left = True, length
            head = b"\r\n".join(kept) + b"\r\n\r\n"
        if len(data) > self.left:  # more than the one answer asked for
            self.done = True
            self.transport.close()
            self.client.close()
            return
        self.left -= len(data)
        write(self.client.transport, head + data)  # one write when the head came with body
        if self.left == 0:
            self.done = True
            self.transport.close()
            self.client.answered()


async def serve(port: int, upstream: Upstream) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Client(upstream), "127.0.0.1", port, backlog=4096, reuse_address=True
    )
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__.split("\n\n")[1] if __doc__ else "bad arguments")
    port, host, up_port, user, password = sys.argv[1:]
    uvloop.run(serve(int(port), Upstream(host, int(up_port), user, password)))
