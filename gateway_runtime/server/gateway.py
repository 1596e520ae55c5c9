"""The request path both listeners share: which snapshot, which client, whether it may start
another request, and an upstream connection for it (a proxy chosen, reached, retried on another
proxy when reaching one fails, never the same exit twice), all from local state.

A refusal is an ``Answer``: the HTTP status, the reason the client is told, and the SOCKS5
reply code the same refusal takes on the SOCKS listener.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway_runtime.selection import Chosen, Decision, Refusal, Selector
from gateway_runtime.server.admission import Admission
from gateway_runtime.server.config import Limits
from gateway_runtime.server.kept import Connection, KeptConnections, Key
from gateway_runtime.server.logins import LoginRefused, Logins
from gateway_runtime.server.upstream import Failure, Hop, UpstreamError, connect, open_tunnel
from gateway_runtime.snapshot_store import SnapshotStore, View
from gateway_runtime.traffic import TrafficCounter, TrafficRecord
from gateway_runtime.username import ClientRequest
from gateway_runtime.wire import Credential, GatewayClient, SnapshotProxy

# SOCKS5 reply codes (RFC 1928 §6).
SOCKS_FAILURE = 0x01
SOCKS_NOT_ALLOWED = 0x02
SOCKS_HOST_UNREACHABLE = 0x04
SOCKS_TIMEOUT = 0x06


class Answer(Exception):
    """A request refused or failed: what the client is told."""

    def __init__(
        self,
        status: int,
        reason: str,
        socks: int = SOCKS_FAILURE,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(reason)
        self.status, self.reason, self.socks, self.headers = status, reason, socks, headers


def stale() -> Answer:
    return Answer(503, "the gateway has no current snapshot; try again shortly", headers=_SOON)


def busy() -> Answer:
    return Answer(503, "the gateway is at its connection limit", headers=(("Retry-After", "1"),))


_SOON = (("Retry-After", "5"),)
#: A selection's refusal as the client hears it: status, reason, SOCKS5 reply.
_REFUSALS = {
    Refusal.FORBIDDEN: (
        403,
        "a parameter asks for what this client may not use",
        SOCKS_NOT_ALLOWED,
    ),
    Refusal.NO_CAPACITY: (503, "no proxy matching the request has room now", SOCKS_FAILURE),
    Refusal.STICKY_GONE: (
        502,
        "the session's proxy is gone (sessionmode strict)",
        SOCKS_HOST_UNREACHABLE,
    ),
}


@dataclass(slots=True)
class Stats:
    """What the worker's /metrics shows, counted as it happens (plain integers: no lock on the
    request path)."""

    connections_open: int = 0
    connections_accepted: int = 0
    connections_refused: int = 0
    requests: int = 0
    tunnels: int = 0
    answers: dict[int, int] = field(default_factory=dict)
    upstream_failures: dict[str, int] = field(default_factory=dict)
    retried_on_fresh_connection: int = 0

    def answered(self, status: int) -> None:
        self.answers[status] = self.answers.get(status, 0) + 1

    def failed(self, failure: Failure) -> None:
        self.upstream_failures[failure] = self.upstream_failures.get(failure, 0) + 1


@dataclass(slots=True)
class Dialed:
    """An upstream connection serving one request or tunnel."""

    connection: Connection
    proxy: SnapshotProxy
    decision: Decision
    record: TrafficRecord
    #: Where the connection is kept after the request (None: a tunnel, never kept).
    key: Key | None
    #: The ``Proxy-Authorization`` header line for an HTTP proxy (empty without a login).
    login: bytes = b""


class Gateway:
    def __init__(
        self,
        store: SnapshotStore,
        selector: Selector,
        traffic: TrafficCounter,
        limits: Limits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.selector, self.traffic, self.limits = store, selector, traffic, limits
        self.logins = Logins(limits.login_cache)
        self.admission = Admission(clock)
        self.kept = KeptConnections(
            store,
            limits.upstream_idle_timeout,
            limits.upstream_idle_per_proxy,
            limits.upstream_idle_total,
            clock,
        )
        self.stats = Stats()
        #: Shutting down: no new connection is accepted.
        self.closing = False
        self._hops_of: View | None = None
        self._credentials: dict[str, Credential] = {}
        self._hops: dict[str, Hop] = {}

    # ------------------------------------------------------------------ connections
    def accept(self) -> bool:
        """A client connection arrives: counted, or False at the worker's connection limit
        (the listener answers and closes it at once, so descriptors stay bounded)."""
        stats = self.stats
        if self.closing or stats.connections_open >= self.limits.max_connections:
            stats.connections_refused += 1
            return False
        stats.connections_open += 1
        stats.connections_accepted += 1
        return True

    def closed(self, client_name: str | None) -> None:
        """The connection accepted ends; ``client_name``: the client it counted against."""
        self.stats.connections_open -= 1
        if client_name is not None:
            self.admission.leave(client_name)

    # ------------------------------------------------------------------ checks
    def view(self) -> View:
        view = self.store.view()
        if view is None:
            raise stale()
        return view

    def target_allowed(self, port: int) -> None:
        if port in self.limits.deny_ports:
            raise Answer(403, f"port {port} is not served by this gateway", SOCKS_NOT_ALLOWED)

    def login_basic(self, view: View, header: bytes | None) -> tuple[GatewayClient, ClientRequest]:
        try:
            return self.logins.basic(view, header)
        except LoginRefused as exc:
            raise _login_answer(exc.reason) from None

    def login(
        self, view: View, username: str, password: str
    ) -> tuple[GatewayClient, ClientRequest]:
        try:
            return self.logins.check(view, username, password)
        except LoginRefused as exc:
            raise _login_answer(exc.reason) from None

    def start(self, client: GatewayClient) -> None:
        """One request or tunnel of ``client`` begins (its rate)."""
        if not self.admission.take(client):
            raise Answer(
                429,
                f"over this client's {client.requests_per_second} requests per second",
                headers=(("Retry-After", "1"),),
            )

    # ------------------------------------------------------------------ upstream
    async def dial(
        self,
        view: View,
        client: GatewayClient,
        request: ClientRequest,
        host: str,
        port: int,
        *,
        tunnel: bool,
        fresh: bool = False,
        exclude: frozenset[str] = frozenset(),
    ) -> Dialed:
        """An upstream connection to ``host:port`` for the client: a tunnel (``tunnel``, or a
        SOCKS proxy), or a connection to an HTTP proxy for an absolute-URI request, kept
        alive afterwards (``fresh``: never a kept one). Reaching a proxy is tried on up to
        ``connect_attempts`` proxies, never one in ``exclude`` (already failed for it)."""
        failed: set[str] = set(exclude)
        last: UpstreamError | None = None
        for _ in range(self.limits.connect_attempts):
            chosen = self._choose(view, client, request, frozenset(failed))
            if isinstance(chosen, Answer):
                if last is not None and chosen.status == 503:
                    break  # nothing left to try: the client hears the failure, not "no room"
                raise chosen
            proxy, ticket = chosen.proxy, chosen.ticket
            hop = self._hop(view, proxy)
            record = self.traffic.record(client.name, proxy.upstream)
            key: Key | None = None
            login = b""
            if not tunnel:
                key = (proxy.proxy_id, host, port) if hop.socks else proxy.proxy_id
                login = b"" if hop.socks else hop.authorization
                kept = None if fresh else self.kept.take(key, ticket)
                if kept is not None:  # the reserved slot is the kept connection's now
                    return Dialed(kept, proxy, chosen.decision, record, key, login)
            if self.store.crowded(ticket):
                self.kept.shed_proxy(proxy.proxy_id)  # a new connection takes a parked one's place
            try:
                if tunnel or hop.socks:
                    conn = await open_tunnel(hop, host, port, self.limits.connect_timeout)
                else:
                    conn = await connect(hop, self.limits.connect_timeout)
            except BaseException as exc:
                # The slot is freed on every way out, a cancellation (shutdown) included.
                self.store.release(ticket, active=False)
                if not isinstance(exc, UpstreamError):
                    raise
                self.stats.failed(exc.failure)
                _count_failure(record, exc.failure)
                if exc.failure is Failure.TARGET:
                    raise Answer(exc.status, exc.detail, _socks_code(exc)) from None
                self.selector.failed(client.name, request.session)
                failed.add(proxy.proxy_id)
                last = exc
                continue
            self.store.activate(ticket)
            self.selector.succeeded(client.name, request.session)
            return Dialed(Connection(conn, ticket), proxy, chosen.decision, record, key, login)
        assert last is not None
        raise Answer(last.status, last.detail, _socks_code(last))

    def _choose(
        self, view: View, client: GatewayClient, request: ClientRequest, exclude: frozenset[str]
    ) -> Chosen | Answer:
        chosen = self.selector.choose(view, client, request, exclude)
        if isinstance(chosen, Refusal):
            status, reason, socks = _REFUSALS[chosen]
            retry = (("Retry-After", "1"),) if status == 503 else ()
            return Answer(status, reason, socks, retry)
        return chosen

    def finish(self, dialed: Dialed, reusable: bool) -> None:
        """The request or tunnel is over: keep the connection for the next request, or close
        it and free its slot."""
        if reusable and dialed.key is not None:
            self.kept.give(dialed.key, dialed.connection)
        else:
            dialed.connection.conn.close_now()
            self.store.release(dialed.connection.ticket, active=True)

    def _hop(self, view: View, proxy: SnapshotProxy) -> Hop:
        """The proxy as dialed, made once per served snapshot (at most its proxies)."""
        if view is not self._hops_of:
            self._hops_of = view
            self._credentials = {c.ref: c for c in view.snapshot.credentials}
            self._hops = {}
        hop = self._hops.get(proxy.proxy_id)
        if hop is None:
            ref = proxy.credential_ref
            login = None if ref is None else self._credentials.get(ref)
            hop = self._hops[proxy.proxy_id] = Hop.of(proxy, login)
        return hop


def _login_answer(reason: str) -> Answer:
    return Answer(
        407,
        reason,
        headers=(("Proxy-Authenticate", 'Basic realm="proxy-pool gateway"'),),
    )


def _socks_code(error: UpstreamError) -> int:
    if error.status == 504:
        return SOCKS_TIMEOUT
    return SOCKS_HOST_UNREACHABLE if error.failure is Failure.TARGET else SOCKS_FAILURE


def _count_failure(record: TrafficRecord, failure: Failure) -> None:
    if failure is Failure.CONNECT:
        record.failed_connect += 1
    elif failure is Failure.TIMEOUT:
        record.failed_timeout += 1
    else:
        record.failed_upstream += 1
