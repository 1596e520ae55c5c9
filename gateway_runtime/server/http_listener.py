"""The worker's HTTP/1.1 forward proxy: ``CONNECT`` tunnels (opaque bytes: TLS is never
intercepted) and absolute-URI ``http://`` requests on kept-alive client connections.

Each request carries ``Proxy-Authorization: Basic`` (client name and parameters, API key), is
checked locally, and is routed through a proxy chosen for it: a plain request takes a proxy
per request (rotation, unless its username names a session), a tunnel keeps its one proxy for
its life. The answer says which session decision was made (``X-Gateway-Session``).
Refusals are answered with a status and a one-line reason (docs/gateway.md "Answers").
"""

from __future__ import annotations

import asyncio
import contextlib

from gateway_runtime.selection import Decision
from gateway_runtime.server.conn import Conn, relay
from gateway_runtime.server.gateway import Answer, Dialed, Gateway, busy
from gateway_runtime.server.messages import (
    BadMessage,
    Head,
    Transfer,
    absolute_target,
    answer_has_body,
    authority,
    parse_answer,
    parse_request,
)
from gateway_runtime.server.upstream import Failure
from gateway_runtime.server.upstream import authority as host_port
from gateway_runtime.snapshot_store import View
from gateway_runtime.username import ClientRequest
from gateway_runtime.wire import GatewayClient

SESSION_HEADER = b"X-Gateway-Session"
#: Methods a proxy may send again when a kept upstream connection turns out dropped.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})
#: Refused logins one client connection may make before it is closed.
MAX_LOGIN_REFUSALS = 3
_REASONS = {
    400: b"Bad Request",
    403: b"Forbidden",
    407: b"Proxy Authentication Required",
    408: b"Request Timeout",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
}


class _Connection:
    """One client connection's state across its requests."""

    __slots__ = ("client", "conn", "refused_logins")

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        #: The client the connection counts against (its first request's), once known.
        self.client: str | None = None
        self.refused_logins = 0


class HttpListener:
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._limits = gateway.limits

    async def serve(self, conn: Conn) -> None:
        """One client connection, from accept to close."""
        if not self._gateway.accept():
            _answer(conn, busy(), close=True)
            conn.close()
            return
        connection = _Connection(conn)
        try:
            await self._requests(connection)
        except (OSError, asyncio.IncompleteReadError, BadMessage, _ClientGone):
            pass  # the client or the upstream broke off mid-message: nothing to answer
        finally:
            self._gateway.closed(connection.client)
            conn.close_now()

    async def _requests(self, connection: _Connection) -> None:
        first = True
        while not self._gateway.closing:
            timeout = self._limits.header_timeout if first else self._limits.idle_timeout
            connection.conn.expire_in(timeout)
            try:
                data = await connection.conn.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # closed between requests (or mid-head: nothing to answer)
            except asyncio.LimitOverrunError:
                self._refuse(connection, Answer(431, "the request head is too large"), close=True)
                return
            except TimeoutError:
                if first:
                    self._refuse(
                        connection, Answer(408, "the request head took too long"), close=True
                    )
                return
            first = False
            try:
                head = parse_request(data)
            except BadMessage as exc:
                self._refuse(connection, Answer(400, exc.reason), close=True)
                return
            has_body = bool(head.content_length) or head.chunked
            try:
                if head.method == b"CONNECT":
                    await self._tunnel(connection, head)
                    return
                if not await self._forward(connection, head):
                    return
            except Answer as answer:
                # A refusal before the body was read leaves it unread: the connection closes.
                # So does a connection that keeps presenting logins the worker refuses.
                if answer.status == 407:
                    connection.refused_logins += 1
                close = (
                    has_body
                    or not head.keep_alive
                    or connection.refused_logins >= MAX_LOGIN_REFUSALS
                )
                self._refuse(connection, answer, close=close)
                if close:
                    return
            except BadMessage as exc:
                self._refuse(connection, Answer(400, exc.reason), close=True)
                return

    def _refuse(self, connection: _Connection, answer: Answer, close: bool) -> None:
        self._gateway.stats.answered(answer.status)
        _answer(connection.conn, answer, close)

    # ------------------------------------------------------------------ admission
    def _admit(
        self, connection: _Connection, head: Head
    ) -> tuple[View, GatewayClient, ClientRequest]:
        gateway = self._gateway
        view = gateway.view()
        client, request = gateway.login_basic(view, head.proxy_authorization)
        if connection.client is None:
            if not gateway.admission.enter(client):
                raise Answer(
                    429,
                    f"this client holds its {client.max_connections} connections to this worker",
                )
            connection.client = client.name
        gateway.start(client)
        return view, client, request

    # ------------------------------------------------------------------ CONNECT
    async def _tunnel(self, connection: _Connection, head: Head) -> None:
        try:
            host, port = authority(head.url)
        except BadMessage as exc:
            raise Answer(400, exc.reason) from None
        gateway = self._gateway
        gateway.target_allowed(port)
        view, client, request = self._admit(connection, head)
        dialed = await gateway.dial(view, client, request, host, port, tunnel=True)
        gateway.stats.tunnels += 1
        dialed.record.tunnels += 1
        gateway.stats.answered(200)
        try:
            connection.conn.write(
                b"HTTP/1.1 200 Connection established\r\n"
                + _session_line(dialed.decision)
                + b"\r\n"
            )
            await relay(
                connection.conn,
                dialed.connection.conn,
                dialed.record,
                self._limits.tunnel_idle_timeout,
            )
        finally:
            gateway.finish(dialed, reusable=False)

    # ------------------------------------------------------------------ absolute URI
    async def _forward(self, connection: _Connection, head: Head) -> bool:
        """Carry one request and its answer; whether the client connection may carry more."""
        try:
            host, port, origin = absolute_target(head.url)
        except BadMessage as exc:
            raise Answer(400, exc.reason) from None
        gateway = self._gateway
        gateway.target_allowed(port)
        view, client, request = self._admit(connection, head)
        conn = connection.conn
        if head.expect_continue and (head.content_length or head.chunked):
            conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the worker reads the body itself
        body: bytes | None = b""
        if head.chunked or (head.content_length or 0) > self._limits.retry_body_bytes:
            body = None  # streamed once, on a new connection
        elif head.content_length:
            conn.expire_in(self._limits.idle_timeout)
            body = await conn.readexactly(head.content_length)
        # Only an idempotent request whose body is at hand is ever sent twice (RFC 9110
        # §9.2.2); any other never risks a kept connection the upstream may have dropped.
        retryable = body is not None and head.method in IDEMPOTENT
        refused: set[str] = set()
        for attempt in range(self._limits.connect_attempts):
            dialed = await gateway.dial(
                view, client, request, host, port, tunnel=False,
                fresh=not retryable or attempt > 0, exclude=frozenset(refused),
            )  # fmt: skip
            try:
                return await self._exchange(
                    connection, head, dialed, host, port, origin, body, retryable
                )
            except _StaleKept:
                gateway.stats.retried_on_fresh_connection += 1
            except _LoginRefused:
                gateway.selector.failed(client.name, request.session)
                if not retryable:
                    break
                refused.add(dialed.proxy.proxy_id)  # the next proxy, as a refused CONNECT
        raise Answer(502, "the upstream proxy refused the worker's login or kept closing")

    async def _exchange(
        self,
        connection: _Connection,
        head: Head,
        dialed: Dialed,
        host: str,
        port: int,
        origin: bytes,
        body: bytes | None,
        retryable: bool,
    ) -> bool:
        gateway, limits = self._gateway, self._limits
        upstream = dialed.connection.conn
        client = connection.conn
        record = dialed.record
        reusable = False
        answered = False
        try:
            target = host_port(host, port).encode()
            if isinstance(dialed.key, str):
                # An HTTP proxy: the absolute form, with the proxy's own login.
                line = head.method + b" http://" + target + origin
                login = dialed.login
            else:
                line, login = head.method + b" " + origin, b""  # a SOCKS tunnel to the target
            out = [
                line,
                b" HTTP/1.1\r\n",
                *head.forwarded_headers(host=target if port != 80 else target[:-3]),
                login,
                b"Connection: keep-alive\r\n\r\n",
            ]
            first = b"".join(out)
            record.requests += 1
            gateway.stats.requests += 1
            upstream.write(first if body is None else first + body)
            record.bytes_up += len(first) + (len(body) if body else 0)
            if body is None:
                sending = Transfer(idle_s=limits.idle_timeout)
                try:
                    if head.chunked:
                        await sending.chunked(client, upstream)
                    else:
                        await sending.exactly(client, upstream, head.content_length or 0)
                # What goes wrong reading the client's own body is the client's, not the
                # upstream's: never counted against it.
                except asyncio.IncompleteReadError:
                    raise _ClientGone from None
                except BadMessage as exc:
                    raise Answer(400, exc.reason) from None
                except TimeoutError:
                    raise Answer(408, "the request body did not move in time") from None
                finally:
                    record.bytes_up += sending.sent
            answer, answer_data = await self._answer_head(dialed, retryable)
            while 100 <= answer.status < 200 and answer.status != 101:
                client.write(answer_data)  # 100 Continue, 103 Early Hints: passed on
                answer, answer_data = await self._answer_head(dialed, False)
            if answer.status == 407 and isinstance(dialed.key, str):
                # The HTTP proxy refused the worker's login: not the client's to answer.
                record.failed_connect += 1
                gateway.stats.failed(Failure.CONNECT)
                raise _LoginRefused
            if answer.status == 101:
                raise Answer(
                    502, "the upstream switched protocols, which this gateway does not carry"
                )
            framed = (
                not answer_has_body(head.method, answer.status)
                or answer.chunked
                or answer.content_length is not None
            )
            keep_client = head.keep_alive and framed and not gateway.closing
            status_line = answer_data.split(b"\r\n", 1)[0]
            out_head = b"".join(
                [
                    b"HTTP/1.1" + status_line[8:] + b"\r\n",
                    *answer.forwarded_headers(),
                    _session_line(dialed.decision),
                    b"Connection: keep-alive\r\n\r\n"
                    if keep_client
                    else b"Connection: close\r\n\r\n",
                ]
            )
            gateway.stats.answered(answer.status)
            transfer = Transfer(out_head, limits.idle_timeout)
            try:
                if not answer_has_body(head.method, answer.status):
                    pass
                elif answer.chunked:
                    await transfer.chunked(upstream, client)
                elif answer.content_length is not None:
                    await transfer.exactly(upstream, client, answer.content_length)
                else:  # read to the end, however long, while it keeps moving
                    await transfer.until_closed(upstream, client)
                transfer.flush(client)
            finally:
                answered = transfer.head_sent
                record.bytes_down += len(answer_data) + transfer.sent
            reusable = framed and answer.keep_alive
            return keep_client
        except TimeoutError:
            record.failed_timeout += 1
            if answered:
                raise OSError("timed out mid-answer") from None
            raise Answer(504, "the upstream did not answer in time") from None
        except (OSError, asyncio.IncompleteReadError, BadMessage) as exc:
            if answered:
                record.failed_closed += 1
                raise OSError("broken mid-answer") from None
            if isinstance(exc, _StaleKept):
                raise
            record.failed_upstream += 1
            raise Answer(502, "the upstream broke off before answering") from None
        finally:
            gateway.finish(dialed, reusable)

    async def _answer_head(self, dialed: Dialed, retryable: bool) -> tuple[Head, bytes]:
        upstream = dialed.connection
        upstream.conn.expire_in(self._limits.first_byte_timeout)
        try:
            data = await upstream.conn.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if upstream.reused and retryable and not exc.partial:
                raise _StaleKept from None  # the upstream had dropped the kept connection
            raise
        except ConnectionResetError:
            if upstream.reused and retryable:
                raise _StaleKept from None
            raise
        except asyncio.LimitOverrunError:
            raise BadMessage("the upstream's answer head is too large") from None
        return parse_answer(data), data


class _ClientGone(Exception):
    """The client broke off in the middle of its request's body: nothing to answer."""


class _LoginRefused(Exception):
    """The upstream HTTP proxy answered the worker's login with 407."""


class _StaleKept(OSError):
    """A kept upstream connection closed before answering: the request goes again on a new one."""


def _session_line(decision: Decision) -> bytes:
    if decision is Decision.NONE:
        return b""
    return SESSION_HEADER + b": " + decision.value.encode() + b"\r\n"


def _answer(conn: Conn, answer: Answer, close: bool) -> None:
    body = (answer.reason + "\n").encode()
    lines = [
        b"HTTP/1.1 %d %s\r\n" % (answer.status, _REASONS.get(answer.status, b"Error")),
        b"Content-Type: text/plain; charset=utf-8\r\n",
        b"Content-Length: %d\r\n" % len(body),
        *(f"{name}: {value}\r\n".encode() for name, value in answer.headers),
        b"Connection: close\r\n\r\n" if close else b"Connection: keep-alive\r\n\r\n",
        body,
    ]
    with contextlib.suppress(OSError):
        conn.write(b"".join(lines))
