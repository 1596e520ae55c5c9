"""The worker's SOCKS5 listener (RFC 1928), beside its HTTP one: username/password only (RFC
1929; the same username grammar and API key as ``Proxy-Authorization``), ``CONNECT`` only, and
the same route as an HTTP tunnel: the same checks, proxy choice, retries and counts.

A refusal is a SOCKS5 reply code (``Answer.socks``): SOCKS has no room for a reason, so a
client that needs one asks the HTTP listener. A handshake that breaks the protocol (another
version, no acceptable method, a malformed request) is closed without more.
"""

from __future__ import annotations

import asyncio
import ipaddress

from gateway_runtime.server.conn import Conn, relay
from gateway_runtime.server.gateway import Answer, Gateway

SOCKS_VERSION = 5
USERNAME_PASSWORD = 0x02
NO_ACCEPTABLE_METHOD = 0xFF
COMMAND_NOT_SUPPORTED = 0x07
ADDRESS_NOT_SUPPORTED = 0x08
_CONNECT = 0x01


class _Broken(Exception):
    """The client broke the protocol: close without a reply."""


class SocksListener:
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._limits = gateway.limits

    async def serve(self, conn: Conn) -> None:
        if not self._gateway.accept():
            conn.close()
            return
        stats = self._gateway.stats
        admitted: str | None = None
        gateway = self._gateway
        try:
            refused: Answer | None = None
            conn.expire_in(self._limits.socks_handshake_timeout)  # the whole handshake's
            try:
                username, password = await self._greeting(conn)
                try:
                    view = gateway.view()
                    client, request = gateway.login(view, username, password)
                except Answer as answer:
                    if answer.status == 407:
                        stats.answered(407)
                        conn.write(b"\x01\x01")  # RFC 1929: the login failed
                        return
                    refused = answer  # told in the reply to the request
                conn.write(b"\x01\x00")
                host, port = await self._request(conn)
            except (_Broken, TimeoutError, asyncio.IncompleteReadError, OSError):
                return
            try:
                if refused is not None:
                    raise refused
                gateway.target_allowed(port)
                if not gateway.admission.enter(client):
                    raise Answer(429, "the client holds its most connections")
                admitted = client.name
                gateway.start(client)
                dialed = await gateway.dial(view, client, request, host, port, tunnel=True)
            except Answer as answer:
                stats.answered(answer.status)
                conn.write(_reply(answer.socks))
                return
            stats.tunnels += 1
            dialed.record.tunnels += 1
            stats.answered(200)
            try:
                conn.write(_reply(0))
                await relay(
                    conn, dialed.connection.conn, dialed.record, self._limits.tunnel_idle_timeout
                )
            finally:
                gateway.finish(dialed, reusable=False)
        except OSError:
            pass
        finally:
            self._gateway.closed(admitted)
            conn.close_now()

    async def _greeting(self, conn: Conn) -> tuple[str, str]:
        version, count = await conn.readexactly(2)
        if version != SOCKS_VERSION or count == 0:
            raise _Broken
        methods = await conn.readexactly(count)
        if USERNAME_PASSWORD not in methods:
            conn.write(bytes([SOCKS_VERSION, NO_ACCEPTABLE_METHOD]))
            raise _Broken
        conn.write(bytes([SOCKS_VERSION, USERNAME_PASSWORD]))
        # RFC 1929: VER 1, ULEN, UNAME, PLEN, PASSWD.
        version, size = await conn.readexactly(2)
        if version != 1 or size == 0:
            raise _Broken
        username = await conn.readexactly(size)
        size = (await conn.readexactly(1))[0]
        password = await conn.readexactly(size)
        try:
            return username.decode(), password.decode()
        except UnicodeDecodeError:
            conn.write(b"\x01\x01")
            raise _Broken from None

    async def _request(self, conn: Conn) -> tuple[str, int]:
        version, command, _, kind = await conn.readexactly(4)
        if version != SOCKS_VERSION:
            raise _Broken
        if kind == 1:
            host = str(ipaddress.IPv4Address(await conn.readexactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await conn.readexactly(16)))
        elif kind == 3:
            size = (await conn.readexactly(1))[0]
            name = await conn.readexactly(size)
            if not size or not name.isascii() or not all(c > 32 and c != 127 for c in name):
                conn.write(_reply(ADDRESS_NOT_SUPPORTED))
                raise _Broken
            host = name.decode()
        else:
            conn.write(_reply(ADDRESS_NOT_SUPPORTED))
            raise _Broken
        port = int.from_bytes(await conn.readexactly(2), "big")
        if command != _CONNECT:
            conn.write(_reply(COMMAND_NOT_SUPPORTED))
            raise _Broken
        if port == 0:
            conn.write(_reply(ADDRESS_NOT_SUPPORTED))
            raise _Broken
        return host, port


def _reply(code: int) -> bytes:
    """A SOCKS5 reply; the bound address is not the client's business (0.0.0.0:0)."""
    return bytes([SOCKS_VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])
