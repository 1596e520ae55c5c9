"""Reaching a target through an upstream proxy of the snapshot: HTTP ``CONNECT`` (with the
proxy's Basic login) or SOCKS5 (RFC 1928, with RFC 1929 username/password), on the server's
own connections (``Conn``), within one deadline.

A proxy's protocol is read as the pool's checker reads it (activity/checker/probe.py):
``http`` and ``https`` are HTTP proxies, ``socks4`` and ``socks5`` are asked in SOCKS5, so
the worker speaks to a proxy the way the check that admitted it did.

What went wrong is told from where it happened, never from free text (``Failure``): the proxy
could not be reached or refused our login (``CONNECT``: the next proxy may do), the proxy
could not reach the target (``TARGET``: another proxy would likely fail the same), or time ran
out (``TIMEOUT``). A proxy's password goes to the proxy and nowhere else.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from dataclasses import dataclass, field
from enum import StrEnum

from gateway_runtime.server.conn import Conn
from gateway_runtime.wire import Credential, SnapshotProxy

#: An upstream's answer head (to CONNECT, or to a request), read at most.
MAX_UPSTREAM_HEAD = 64 * 1024


class Failure(StrEnum):
    #: No connection to the proxy, or it refused our login: try another proxy.
    CONNECT = "connect"
    #: The proxy answered that it could not reach the target (502 to the client).
    TARGET = "target"
    TIMEOUT = "timeout"


class UpstreamError(Exception):
    def __init__(self, failure: Failure, detail: str, status: int = 502) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail
        #: What the client is answered: 502, or 504 when the proxy or target timed out.
        self.status = status


@dataclass(frozen=True, slots=True)
class Hop:
    """An upstream proxy as the server dials it: made once per proxy and snapshot
    (``Hop.of``), so its login header is encoded once, not per request."""

    proxy: SnapshotProxy
    login: Credential | None = field(repr=False)
    socks: bool
    #: ``Proxy-Authorization: Basic ...\r\n`` for this proxy; empty without a login.
    authorization: bytes = field(repr=False)

    @classmethod
    def of(cls, proxy: SnapshotProxy, login: Credential | None) -> Hop:
        line = b""
        if login is not None:
            pair = f"{login.username}:{login.password}".encode()
            line = b"Proxy-Authorization: Basic " + base64.b64encode(pair) + b"\r\n"
        return cls(proxy, login, proxy.protocol.startswith("socks"), line)


def authority(host: str, port: int) -> str:
    """``host:port`` as a request line names it (an IPv6 literal in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def connect(hop: Hop, timeout: float) -> Conn:
    """A TCP connection to the proxy itself (the server keeps HTTP ones alive between
    requests)."""
    loop = asyncio.get_running_loop()
    # asyncio.timeout's work without its context object and its second look-up of the loop
    # (each a getpid() system call on CPython 3.11): a timer that cancels this task, told
    # apart from any other cancellation (a shutdown's) by ``expired``.
    task = asyncio.current_task(loop)
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = loop.call_later(timeout, expire)
    try:
        _, conn = await loop.create_connection(
            lambda: Conn(loop, MAX_UPSTREAM_HEAD), hop.proxy.host, hop.proxy.port
        )
    except asyncio.CancelledError:
        if expired and task.uncancel() == 0:
            raise UpstreamError(Failure.TIMEOUT, "the upstream proxy did not answer", 504) from None
        raise
    except OSError:
        raise UpstreamError(Failure.CONNECT, "the upstream proxy could not be reached") from None
    finally:
        timer.cancel()
    return conn


async def open_tunnel(hop: Hop, host: str, port: int, timeout: float) -> Conn:
    """A byte stream to ``host:port`` through the proxy, ready for the client's bytes."""
    conn = await connect(hop, timeout)
    conn.expire_in(timeout)  # the handshake gets a deadline of its own
    try:
        if hop.socks:
            await _socks5(conn, hop, host, port)
        else:
            await _http_connect(conn, hop, host, port)
    except TimeoutError:
        # The proxy took the connection but not the target in time: the target is slow (or
        # the proxy is), and another proxy would most likely wait as long.
        conn.close_now()
        raise UpstreamError(
            Failure.TARGET, "the upstream proxy did not reach it in time", 504
        ) from None
    except UpstreamError:
        conn.close_now()
        raise
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        conn.close_now()
        raise UpstreamError(Failure.CONNECT, "the upstream proxy broke off") from None
    except BaseException:  # cancelled (shutdown): the connection goes with the request
        conn.close_now()
        raise
    conn.expire_in(None)
    return conn


async def _http_connect(conn: Conn, hop: Hop, host: str, port: int) -> None:
    target = authority(host, port).encode()
    head = [b"CONNECT ", target, b" HTTP/1.1\r\nHost: ", target, b"\r\n"]
    conn.write(b"".join([*head, hop.authorization, b"\r\n"]))
    answer = await conn.readuntil(b"\r\n\r\n")
    status = status_of(answer)
    if 200 <= status < 300:
        return
    if status in (401, 407):  # tinyproxy answers a wrong password with 401
        raise UpstreamError(Failure.CONNECT, "the upstream proxy refused the worker's login")
    if status == 504:
        raise UpstreamError(Failure.TARGET, "the upstream proxy timed out reaching it", 504)
    raise UpstreamError(Failure.TARGET, f"the upstream proxy answered {status}")


def status_of(head: bytes) -> int:
    """The status code of an HTTP answer head (ValueError when it is not one)."""
    line = head.split(b"\r\n", 1)[0]
    version, _, rest = line.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(rest) < 3 or not rest[:3].isdigit():
        raise ValueError("not an HTTP/1 answer")
    return int(rest[:3])


#: SOCKS5 reply codes (RFC 1928 §6) the worker tells apart.
_SOCKS_TIMEOUT = 0x06  # TTL expired: the target did not answer in time
_SOCKS_REPLIES = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}


async def _socks5(conn: Conn, hop: Hop, host: str, port: int) -> None:
    method = 0x02 if hop.login is not None else 0x00
    conn.write(bytes([5, 1, method]))
    version, chosen = await conn.readexactly(2)
    if version != 5 or chosen != method:
        raise UpstreamError(Failure.CONNECT, "the upstream proxy refused the worker's login")
    if hop.login is not None:
        user, password = hop.login.username.encode(), hop.login.password.encode()
        if len(user) > 255 or len(password) > 255:
            raise UpstreamError(Failure.CONNECT, "the upstream login is too long for SOCKS5")
        conn.write(bytes([1, len(user)]) + user + bytes([len(password)]) + password)
        _, status = await conn.readexactly(2)
        if status != 0:
            raise UpstreamError(Failure.CONNECT, "the upstream proxy refused the worker's login")
    conn.write(b"\x05\x01\x00" + socks_address(host) + port.to_bytes(2, "big"))
    version, reply, _, kind = await conn.readexactly(4)
    if version != 5 or reply not in _SOCKS_REPLIES | {0}:
        raise ValueError("not a SOCKS5 reply")
    # The bound address that follows is read whole so the tunnel starts at the target's bytes.
    size = {1: 4, 4: 16}.get(kind)
    if size is None:
        if kind != 3:
            raise ValueError("not a SOCKS5 address type")
        size = (await conn.readexactly(1))[0]
    await conn.readexactly(size + 2)
    if reply == _SOCKS_TIMEOUT:
        raise UpstreamError(Failure.TARGET, "the upstream proxy timed out reaching it", 504)
    if reply != 0:
        raise UpstreamError(Failure.TARGET, f"the upstream proxy answered SOCKS5 code {reply}")


def socks_address(host: str) -> bytes:
    """A SOCKS5 DST.ADDR: an IP literal as itself, a name for the proxy to resolve."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.encode()
        if not 0 < len(name) <= 255:
            raise UpstreamError(Failure.TARGET, "the target's name is too long") from None
        return bytes([3, len(name)]) + name
    return (b"\x01" if address.version == 4 else b"\x04") + address.packed
