"""Which proxy a gateway client's connection goes through: among the snapshot's proxies that
the client may use and its username asks for, the least loaded with room (ties at random);
or, for a sticky session, the proxy the session already has while it lasts.

A sticky session (``session-<id>`` in the username) keeps its proxy while the proxy is in the
snapshot and usable, for its lifetime (``sesstime``, else ``default_lifetime``) and while it is
not idle longer than ``idle`` (60 s, as Oxylabs), never past the proxy's ``usable_until``. When
its proxy is gone, ``flex`` (the default) moves it to another matching proxy and ``strict``
refuses (the worker answers 502); ``errors-N`` moves it after N consecutive upstream failures
in either mode. Sessions are kept per client in a bounded table (``max_sessions``, the least
recently used dropped first).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from gateway_runtime.snapshot_store import SnapshotStore, Ticket, View
from gateway_runtime.username import ClientRequest, FailureMode
from gateway_runtime.wire import GatewayClient, SnapshotProxy

MAX_SESSIONS = 100_000


class Decision(StrEnum):
    """What became of the request's sticky session (the worker's response header says it)."""

    NONE = "none"  # no session asked for
    NEW = "new"
    HIT = "hit"
    MOVED = "moved"


class Refusal(StrEnum):
    #: A parameter outside what the client may use (403).
    FORBIDDEN = "forbidden"
    #: No matching proxy has room (503).
    NO_CAPACITY = "no_capacity"
    #: A ``strict`` session's proxy is gone (502).
    STICKY_GONE = "sticky_gone"


@dataclass(frozen=True, slots=True)
class Chosen:
    proxy: SnapshotProxy
    ticket: Ticket
    decision: Decision


@dataclass(slots=True)
class _Session:
    proxy_id: str
    ends_at: datetime
    last_used: datetime
    errors: int = 0


def _folded(value: str | None) -> str | None:
    return None if value is None else value.casefold()


def allowed(client: GatewayClient, request: ClientRequest) -> bool:
    """Whether what the username asks for is within the client's restrictions."""
    regions = {r.casefold() for r in client.allowed_regions}
    if request.region and regions and request.region.casefold() not in regions:
        return False
    upstreams, protocols = client.allowed_upstreams, client.allowed_protocols
    if request.upstream and upstreams and request.upstream not in upstreams:
        return False
    return not (request.protocol and protocols and request.protocol not in protocols)


def matches(proxy: SnapshotProxy, client: GatewayClient, request: ClientRequest) -> bool:
    """Whether the proxy is one the client may use and the request asks for."""
    regions = {r.casefold() for r in client.allowed_regions}
    if client.allowed_upstreams and proxy.upstream not in client.allowed_upstreams:
        return False
    if regions and _folded(proxy.region) not in regions:
        return False
    if client.allowed_protocols and proxy.protocol not in client.allowed_protocols:
        return False
    return (
        (request.region is None or _folded(proxy.region) == request.region.casefold())
        and (request.protocol is None or proxy.protocol == request.protocol)
        and (request.carrier is None or _folded(proxy.carrier) == request.carrier.casefold())
        and (request.upstream is None or proxy.upstream == request.upstream)
    )


class Selector:
    def __init__(
        self,
        store: SnapshotStore,
        clock: Callable[[], datetime],
        *,
        idle: timedelta = timedelta(seconds=60),
        default_lifetime: timedelta = timedelta(minutes=10),
        max_sessions: int = MAX_SESSIONS,
        rng: random.Random | None = None,
    ) -> None:
        self._store, self._clock = store, clock
        self._idle, self._default_lifetime = idle, default_lifetime
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        self._rng = rng or random.Random()  # noqa: S311 (load spreading, not a secret)

    def choose(
        self,
        view: View,
        client: GatewayClient,
        request: ClientRequest,
        exclude: frozenset[str] = frozenset(),
    ) -> Chosen | Refusal:
        """A proxy for one connection, reserved; ``exclude``: exits that already failed for
        this request (a retry never goes back to one)."""
        if not allowed(client, request):
            return Refusal.FORBIDDEN
        now = self._clock()
        key = (client.name, request.session) if request.session else None
        decision = Decision.NONE if key is None else Decision.NEW
        if key is not None:
            session = self._sessions.get(key)
            if session is not None and self._live(session, now):
                decision = Decision.MOVED
                if not self._too_many_errors(session, request):
                    proxy = view.proxies.get(session.proxy_id)
                    ticket = None
                    if proxy is not None and proxy.proxy_id not in exclude:
                        ticket = self._store.reserve(view, proxy.proxy_id)
                    if proxy is not None and ticket is not None:
                        session.last_used = now
                        self._sessions.move_to_end(key)
                        return Chosen(proxy, ticket, Decision.HIT)
                    if request.failure_mode is FailureMode.STRICT:
                        return Refusal.STICKY_GONE  # gone, full, or failed for this request
        chosen = self._least_loaded(view, client, request, exclude)
        if chosen is None:
            return Refusal.NO_CAPACITY
        proxy, ticket = chosen
        if key is not None:
            lifetime = request.session_lifetime or self._default_lifetime
            ends = min(now + lifetime, proxy.usable_until)
            self._remember(key, _Session(proxy.proxy_id, ends, now))
        return Chosen(proxy, ticket, decision)

    def failed(self, client: str, session: str | None) -> None:
        """An upstream failure on the session's proxy (``errors-N`` counts them)."""
        if session is not None and (found := self._sessions.get((client, session))):
            found.errors += 1

    def succeeded(self, client: str, session: str | None) -> None:
        if session is not None and (found := self._sessions.get((client, session))):
            found.errors = 0

    # ------------------------------------------------------------------ helpers
    def _live(self, session: _Session, now: datetime) -> bool:
        """Within its lifetime (and its proxy's use) and not idle too long."""
        return now < session.ends_at and now - session.last_used <= self._idle

    @staticmethod
    def _too_many_errors(session: _Session, request: ClientRequest) -> bool:
        return request.max_errors is not None and session.errors >= request.max_errors

    def _least_loaded(
        self, view: View, client: GatewayClient, request: ClientRequest, exclude: frozenset[str]
    ) -> tuple[SnapshotProxy, Ticket] | None:
        candidates = [
            p
            for p in view.proxies.values()
            if p.proxy_id not in exclude and matches(p, client, request)
        ]
        # Least loaded first, ties at random: a few tries, each reserving or moving on.
        self._rng.shuffle(candidates)
        candidates.sort(key=lambda p: self._store.load(p.proxy_id) / p.max_concurrency)
        for proxy in candidates:
            ticket = self._store.reserve(view, proxy.proxy_id)
            if ticket is not None:
                return proxy, ticket
        return None

    def _remember(self, key: tuple[str, str], session: _Session) -> None:
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)  # the least recently used
