"""Which proxy a gateway client's connection goes through: among the snapshot's proxies that
the client may use and its username asks for, one with room, spreading the load; or, for a
sticky session, the proxy the session already has while it lasts.

Spreading the load, the rule: among the matching proxies (``candidates.CandidateIndex``: found
once per snapshot, not per connection) that have room, are usable and did not fail for this
request,

* with at most ``SCAN_UP_TO`` of them, the least loaded relative to its ``max_concurrency``,
  ties at random;
* with more, the less loaded (relative) of two drawn at random, "the power of two random
  choices". Scanning every candidate costs O(n) per connection, far too much at 10,000 proxies
  and hundreds of thousands of connections a second; one random draw is O(1) but lets the
  busiest proxy drift O(log n / log log n) above the mean; two draws keep it within about
  log log n of the mean (Azar, Broder, Karlin, Upfal 1994; Mitzenmacher 2001) for two reads
  more. When both are full or unusable (or the request excludes exits), up to ``DRAWS``
  more are made, the first with room taken (the less loaded of the first two when both
  have); when none has room, every candidate is scanned (least loaded, ties at random), so
  ``NO_CAPACITY`` is answered only after every candidate was looked at: O(n) only when
  (nearly) all are full.

One clock reading per choice serves every check in it (the store's ``take`` is given it).

A sticky session (``session-<id>`` in the username) keeps its proxy while the proxy is in the
snapshot and usable, for its lifetime (``sesstime``, else ``default_lifetime``) and while it is
not idle longer than ``idle`` (60 s, as Oxylabs), never past the proxy's ``usable_until``. When
its proxy is gone, ``flex`` (the default) moves it to another matching proxy and ``strict``
refuses (the worker answers 502); ``errors-N`` moves it after N consecutive upstream failures
in either mode. Sessions are kept in a bounded table (``max_sessions``, the least recently
used dropped first), and each client holds at most ``max_sessions_per_client`` of them (past
it, that client's own least recently used is dropped): one client making session names by the
thousand cannot push every other client's sessions out.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType

from gateway_runtime.candidates import CandidateIndex, allowed, matches
from gateway_runtime.snapshot_store import Hold, SnapshotStore, Ticket, View
from gateway_runtime.username import ClientRequest, FailureMode
from gateway_runtime.wire import GatewayClient, SnapshotProxy

__all__ = ["Chosen", "Decision", "Refusal", "Selector", "allowed", "matches"]

MAX_SESSIONS = 100_000
MAX_SESSIONS_PER_CLIENT = 10_000
#: Candidates up to which every one is compared (as cheap as drawing, and exact).
SCAN_UP_TO = 8
#: Random draws before scanning every candidate (two of them the rule, the rest for full ones).
DRAWS = 8
_NOTHING: Mapping[str, Hold] = MappingProxyType({})


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


class Selector:
    def __init__(
        self,
        store: SnapshotStore,
        clock: Callable[[], datetime],
        *,
        idle: timedelta = timedelta(seconds=60),
        default_lifetime: timedelta = timedelta(minutes=10),
        max_sessions: int = MAX_SESSIONS,
        max_sessions_per_client: int = MAX_SESSIONS_PER_CLIENT,
        rng: random.Random | None = None,
    ) -> None:
        self._store, self._clock = store, clock
        self._idle, self._default_lifetime = idle, default_lifetime
        self._max_sessions = max_sessions
        self._max_per_client = max_sessions_per_client
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        #: Each client's session IDs, least recently used first (its own bound).
        self._of_client: dict[str, OrderedDict[str, None]] = {}
        self._rng = rng or random.Random()  # noqa: S311 (load spreading, not a secret)
        # The served view's index and the answers made for it (a Chosen is a value: one per
        # proxy and decision serves every connection of the view). Replaced with the view.
        self._holds: Mapping[str, Hold] | None = None
        self._index = CandidateIndex(_NOTHING)
        self._plain: dict[Hold, Chosen] = {}
        self._hits: dict[Hold, Chosen] = {}

    def choose(
        self,
        view: View,
        client: GatewayClient,
        request: ClientRequest,
        exclude: frozenset[str] = frozenset(),
        now: datetime | None = None,
    ) -> Chosen | Refusal:
        """A proxy for one connection, reserved; ``exclude``: exits that already failed for
        this request (a retry never goes back to one); ``now``: the caller's clock reading, if
        it has one (else the selector's clock)."""
        holds = self._store.holds(view)
        index = self._index if holds is self._holds else self._index_of(holds)
        found = index.candidates(client, request)
        if found is None:
            return Refusal.FORBIDDEN
        if now is None:
            now = self._clock()
        if not request.session:  # the common case, kept short
            hold = self._pick(found, now, exclude)
            ticket = None if hold is None else self._store.take(hold, now)
            if hold is None or ticket is None:
                return Refusal.NO_CAPACITY
            chosen = self._plain.get(hold)
            if chosen is None:
                chosen = self._plain[hold] = Chosen(hold.proxy, ticket, Decision.NONE)
            return chosen
        key = (client.name, request.session)
        decision = Decision.NEW
        session = self._sessions.get(key)
        if session is not None and self._live(session, now):
            decision = Decision.MOVED
            if not self._too_many_errors(session, request):
                hold = index.holds.get(session.proxy_id)
                ticket = None
                if hold is not None and hold.proxy_id not in exclude:
                    ticket = self._store.take(hold, now)
                if hold is not None and ticket is not None:
                    session.last_used = now
                    self._sessions.move_to_end(key)
                    self._of_client[key[0]].move_to_end(key[1])
                    chosen = self._hits.get(hold)
                    if chosen is None:
                        chosen = self._hits[hold] = Chosen(hold.proxy, ticket, Decision.HIT)
                    return chosen
                if request.failure_mode is FailureMode.STRICT:
                    return Refusal.STICKY_GONE  # gone, full, or failed for this request
        hold = self._pick(found, now, exclude)
        ticket = None if hold is None else self._store.take(hold, now)
        if hold is None or ticket is None:
            return Refusal.NO_CAPACITY
        lifetime = request.session_lifetime or self._default_lifetime
        ends = min(now + lifetime, hold.proxy.usable_until)
        self._remember(key, _Session(hold.proxy_id, ends, now))
        return Chosen(hold.proxy, ticket, decision)

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

    def _index_of(self, holds: Mapping[str, Hold] | None) -> CandidateIndex:
        """A new view's candidate index (``holds``: its, or None for a view no longer served:
        an empty index, not kept, for nothing new starts on such a view)."""
        if holds is None:
            return CandidateIndex(_NOTHING)
        self._holds, self._index = holds, CandidateIndex(holds)
        self._plain, self._hits = {}, {}
        return self._index

    def _pick(self, found: Sequence[Hold], now: datetime, exclude: frozenset[str]) -> Hold | None:
        """A candidate with room, by the module's rule; None only when none has."""
        n = len(found)
        if n <= SCAN_UP_TO:
            return self._least_loaded(found, now, exclude)
        rand = self._rng.random
        if not exclude:  # the common case, unrolled: two draws, the less loaded if it has room
            a, b = found[int(rand() * n)], found[int(rand() * n)]
            if a.used * b.maximum > b.used * a.maximum:
                a, b = b, a
            if a.used < a.maximum and now < a.deadline:
                return a
            if b.used < b.maximum and now < b.deadline:
                return b
        best = None
        for draw in range(DRAWS):
            hold = found[int(rand() * n)]
            if (
                hold.used < hold.maximum
                and now < hold.deadline
                and hold.proxy_id not in exclude
                and (best is None or hold.used * best.maximum < best.used * hold.maximum)
            ):
                best = hold
            if draw and best is not None:
                return best
        return self._least_loaded(found, now, exclude)

    def _least_loaded(
        self, found: Sequence[Hold], now: datetime, exclude: frozenset[str]
    ) -> Hold | None:
        """Every candidate looked at: the least loaded with room, ties at random."""
        best, ties = None, 0
        for hold in found:
            if hold.used >= hold.maximum or now >= hold.deadline or hold.proxy_id in exclude:
                continue
            if best is None or hold.used * best.maximum < best.used * hold.maximum:
                best, ties = hold, 1
            elif hold.used * best.maximum == best.used * hold.maximum:
                ties += 1
                if self._rng.random() * ties < 1:  # each of the tied kept with chance 1/ties
                    best = hold
        return best

    def _remember(self, key: tuple[str, str], session: _Session) -> None:
        client, name = key
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        own = self._of_client.setdefault(client, OrderedDict())
        own[name] = None
        own.move_to_end(name)
        if len(own) > self._max_per_client:
            oldest, _ = own.popitem(last=False)  # the client's own least recently used
            del self._sessions[(client, oldest)]
        while len(self._sessions) > self._max_sessions:
            (evicted, evicted_name), _ = self._sessions.popitem(last=False)
            theirs = self._of_client[evicted]
            del theirs[evicted_name]
            if not theirs:
                del self._of_client[evicted]
