"""One health check: a real request through a proxy to a check URL, on asyncio streams.

HTTP proxies are asked either with an absolute-URI ``GET`` (a plain ``http://`` check URL) or
with ``CONNECT`` (always for ``https://``, and for ``http://`` when asked), SOCKS5 proxies with
the RFC 1928 handshake and RFC 1929 username/password; over a tunnel the check URL's own
request follows (after TLS for ``https://``). The check passes when the check URL's status is in
``expect``. Only the status line and headers are read (at most ``MAX_HEAD`` bytes), never the
body; the whole check, connection included, has one deadline (``timeout``).

What a failure is (:class:`Failure`) is told from where it happened, never from free text:
``refused`` (no TCP connection to the proxy), ``address`` (the proxy's name led to an address
no proxy may be at: nothing is sent), ``timeout``, ``auth`` (the proxy refused the
credentials: 407, or 401 as tinyproxy answers a wrong password, or SOCKS5's refusal; so a check
URL must not ask for authentication itself), ``proxy_error`` (the proxy could not reach the
target: CONNECT or SOCKS5 refused, 500/502/503/504), ``status`` (the target answered another
status), ``protocol`` (a reply that is not HTTP or SOCKS5, a head over the limit, a connection
closed mid-reply), ``tls``.

A proxy's password is sent to the proxy and nowhere else: never in a result, a log or an error.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import ssl
import time
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

from activity.addresses import never

#: Most bytes of a status line and headers read from the proxy or the target.
MAX_HEAD = 16_384
_GATEWAY_ERRORS = frozenset({500, 502, 503, 504})


class Failure(StrEnum):
    REFUSED = "refused"
    #: The proxy's host name led to an address no proxy may be at (activity/addresses.py):
    #: connected to, nothing sent.
    ADDRESS = "address"
    TIMEOUT = "timeout"
    AUTH = "auth"
    PROXY_ERROR = "proxy_error"
    STATUS = "status"
    PROTOCOL = "protocol"
    TLS = "tls"


@dataclass(frozen=True)
class ProxyEndpoint:
    """A proxy to check through; ``protocol`` ``http`` or ``socks5``."""

    host: str
    port: int
    protocol: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.protocol not in ("http", "socks5"):
            raise ValueError("protocol must be http or socks5")
        if not 0 < self.port < 65536:
            raise ValueError("port must be 1-65535")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password come together")
        user, password = (self.username or "").encode(), (self.password or "").encode()
        if (
            self.protocol == "socks5"
            and self.username is not None
            and not (0 < len(user) < 256 and len(password) < 256)
        ):
            raise ValueError("SOCKS5 credentials are 1-255 bytes each")

    @classmethod
    def of(
        cls, host: str, port: int, pool_protocol: str, username: str | None, password: str | None
    ) -> ProxyEndpoint:
        """The endpoint of a pool proxy: its protocol as the pool names it (``socks5``,
        ``socks5h``, ... are probed over SOCKS5, the rest as HTTP proxies). ValueError when it
        cannot be probed as given (a SOCKS5 login over 255 bytes)."""
        protocol = "socks5" if pool_protocol.startswith("socks") else "http"
        return cls(host, port, protocol, username, password)


@dataclass(frozen=True)
class CheckTarget:
    """Where a check goes: an ``http://`` or ``https://`` URL, the statuses that pass, and
    whether an ``http://`` URL goes through an HTTP proxy by CONNECT too."""

    url: str
    expect: frozenset[int] = frozenset(range(200, 300))
    connect: bool = False
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a check URL is http:// or https:// with a host")
        if parts.username or parts.password:
            raise ValueError("a check URL carries no credentials")

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def https(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def path(self) -> str:
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    #: Milliseconds from the connection's start to the check URL's status line (passed or
    #: not); None when it never came.
    latency_ms: int | None = None
    failure: Failure | None = None
    #: The check URL's status, when it answered.
    status: int | None = None


class _Failed(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


async def probe(proxy: ProxyEndpoint, target: CheckTarget, timeout: float) -> ProbeResult:
    """Check ``target`` through ``proxy`` within ``timeout`` seconds."""
    started = time.perf_counter()
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            try:
                reader, writer = await asyncio.open_connection(
                    proxy.host, proxy.port, limit=MAX_HEAD
                )
            except OSError as exc:
                raise _Failed(Failure.REFUSED) from exc
            if _led_nowhere_allowed(writer):
                raise _Failed(Failure.ADDRESS)
            try:
                status = await _through(proxy, target, reader, writer)
            except ssl.SSLError as exc:
                raise _Failed(Failure.TLS) from exc
            except (
                OSError,
                EOFError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                ValueError,
            ) as exc:
                raise _Failed(Failure.PROTOCOL) from exc
    except TimeoutError:
        return ProbeResult(False, failure=Failure.TIMEOUT)
    except _Failed as failed:
        return ProbeResult(False, failure=failed.failure)
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
    latency = round((time.perf_counter() - started) * 1000)
    if status in target.expect:
        return ProbeResult(True, latency, None, status)
    if proxy.protocol == "http" and not _tunnelled(proxy, target):
        if status in (401, 407):
            return ProbeResult(False, latency, Failure.AUTH, status)
        if status in _GATEWAY_ERRORS:
            return ProbeResult(False, latency, Failure.PROXY_ERROR, status)
    return ProbeResult(False, latency, Failure.STATUS, status)


def _led_nowhere_allowed(writer: asyncio.StreamWriter) -> bool:
    """Whether the connection went where no proxy may be: a vendor's host name can lead to the
    cloud metadata address, which must never get a request (the parser checks the addresses
    it is given; only the connection knows where a name led)."""
    peer = writer.get_extra_info("peername")
    try:
        return never(ipaddress.ip_address(peer[0]))
    except (TypeError, ValueError, IndexError):
        return False  # not an IP socket (a test's pipe): nothing to tell


def _tunnelled(proxy: ProxyEndpoint, target: CheckTarget) -> bool:
    return proxy.protocol == "socks5" or target.https or target.connect


async def _through(
    proxy: ProxyEndpoint,
    target: CheckTarget,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> int:
    """The check URL's status, asked through the proxy on this connection."""
    if not _tunnelled(proxy, target):
        writer.write(_request(f"http://{target.authority}{target.path}", target, proxy))
        return _status(await reader.readuntil(b"\r\n\r\n"))
    if proxy.protocol == "http":
        writer.write(
            f"CONNECT {target.authority} HTTP/1.1\r\nHost: {target.authority}\r\n".encode()
            + _proxy_auth(proxy)
            + b"\r\n"
        )
        answer = _status(await reader.readuntil(b"\r\n\r\n"))
        if answer in (401, 407):
            raise _Failed(Failure.AUTH)
        if not 200 <= answer < 300:
            raise _Failed(Failure.PROXY_ERROR)
    else:
        await _socks5(proxy, target, reader, writer)
    if target.https:
        context = target.tls or ssl.create_default_context()
        await writer.start_tls(context, server_hostname=target.host)
    writer.write(_request(target.path, target, None))
    return _status(await reader.readuntil(b"\r\n\r\n"))


def _request(path: str, target: CheckTarget, proxy: ProxyEndpoint | None) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: {target.authority}\r\nUser-Agent: proxy-pool-check\r\n"
    auth = _proxy_auth(proxy) if proxy is not None else b""
    return head.encode() + auth + b"Connection: close\r\n\r\n"


def _proxy_auth(proxy: ProxyEndpoint) -> bytes:
    if proxy.username is None or proxy.password is None:
        return b""
    pair = f"{proxy.username}:{proxy.password}".encode()
    return b"Proxy-Authorization: Basic " + base64.b64encode(pair) + b"\r\n"


def _status(head: bytes) -> int:
    """The status code of an HTTP response head (ValueError when it is not one)."""
    line = head.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(line) < 2 or not line[0].startswith(b"HTTP/1.") or not line[1].isdigit():
        raise ValueError("not an HTTP response")
    return int(line[1])


async def _socks5(
    proxy: ProxyEndpoint,
    target: CheckTarget,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """RFC 1928's greeting and CONNECT, with RFC 1929's username/password when given."""
    writer.write(b"\x05\x02\x00\x02" if proxy.username is not None else b"\x05\x01\x00")
    version, method = await reader.readexactly(2)
    if version != 5:
        raise ValueError("not a SOCKS5 reply")
    if method == 0x02 and proxy.username is not None and proxy.password is not None:
        user, password = proxy.username.encode(), proxy.password.encode()
        writer.write(b"\x01" + bytes([len(user)]) + user + bytes([len(password)]) + password)
        if (await reader.readexactly(2))[1] != 0:
            raise _Failed(Failure.AUTH)
    elif method != 0x00:  # 0xFF: none acceptable (credentials needed), or one not offered
        raise _Failed(Failure.AUTH)
    writer.write(b"\x05\x01\x00" + _socks_address(target.host) + target.port.to_bytes(2, "big"))
    version, reply, _, kind = await reader.readexactly(4)
    if version != 5:
        raise ValueError("not a SOCKS5 reply")
    if reply != 0:
        raise _Failed(Failure.PROXY_ERROR)
    if kind == 0x01:
        await reader.readexactly(4 + 2)
    elif kind == 0x04:
        await reader.readexactly(16 + 2)
    elif kind == 0x03:
        await reader.readexactly((await reader.readexactly(1))[0] + 2)
    else:
        raise ValueError("a SOCKS5 reply with an unknown address type")


def _socks_address(host: str) -> bytes:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.encode("idna")
        return b"\x03" + bytes([len(name)]) + name
    return (b"\x01" if address.version == 4 else b"\x04") + address.packed
