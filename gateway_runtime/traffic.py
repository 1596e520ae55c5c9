"""What a gateway worker carried, per (client, upstream) pair, for its runtime reports
(docs/gateway.md "The control API": reports).

The proxy server asks ``record(client, upstream)`` once per connection and increments the
record's fields directly for as long as the connection lasts (a tunnel may hold its record for
hours): the hot path is one dictionary lookup and plain integer additions. ``take`` runs
between reports and hands out what each record gained since the previous take, as the wire's
``ClientTraffic``: it compares a record with what was already handed out of it (its
``_taken``), never swaps a record out, so a connection's record stays the one counted.

Bounds. At most ``max_pairs`` named pairs (100,000 by default). A new pair past that bound is
counted under the client ``OTHER`` for its upstream: its upstream's figures stay whole, only
its client is not told apart. Those ``(OTHER, upstream)`` records are at most ``max_others``
(1,000); past them too, a pair is counted under ``(OTHER, OTHER)``, the one record always
admitted. So the table holds at most ``max_pairs + max_others + 1`` records, and nothing the
server counts is ever dropped. A record leaves the table at a take that finds nothing new in it
and no connection holding it (CPython's reference count says whether anything but the table
refers to it): whatever it counts next would have to come through ``record`` again, which
makes a new one.

A take hands out at most ``max_entries`` pairs; the rest stay for the next take, whole. The
pairs handed out go to the back of the table's order, so a table with more pairs than one
report carries is reported in turn, none starved. A figure larger than ``MAX_COUNTER`` (the
wire's bound; a day of a failing control plane at 10 Gbit/s) is handed out ``MAX_COUNTER`` at
a time.

Confined to one event loop, like the snapshot store: no locks.
"""

from __future__ import annotations

import sys

from gateway_runtime.wire import TRAFFIC_COUNTS, ClientTraffic
from gateway_runtime.wire.limits import MAX_COUNTER, OTHER

#: Named (client, upstream) pairs the table holds at most: thousands in practice (clients times
#: the upstreams each uses); the bound only stops a runaway from growing the worker's memory.
MAX_PAIRS = 100_000
#: ``(OTHER, upstream)`` records past MAX_PAIRS: one per upstream, at most this many.
MAX_OTHERS = 1_000

_ZERO = (0,) * len(TRAFFIC_COUNTS)
#: A record's references when only the table holds it, as counted inside ``take``: the
#: table's value, the loop's variable and ``getrefcount``'s own argument.
_ONLY_THE_TABLE = 3


class TrafficRecord:
    """One (client, upstream) pair's running totals: the server increments the fields. What
    each counts is ``ClientTraffic``'s (gateway_runtime/wire/types.py)."""

    __slots__ = (
        "_taken",
        "bytes_down",
        "bytes_up",
        "failed_closed",
        "failed_connect",
        "failed_timeout",
        "failed_upstream",
        "requests",
        "tunnels",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.tunnels = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.failed_connect = 0
        self.failed_timeout = 0
        self.failed_upstream = 0
        self.failed_closed = 0
        #: The totals already handed out by ``take``, in ``TRAFFIC_COUNTS`` order.
        self._taken: tuple[int, ...] = _ZERO

    def totals(self) -> tuple[int, ...]:
        """The fields in ``TRAFFIC_COUNTS`` order (the wire's)."""
        return (
            self.requests,
            self.tunnels,
            self.bytes_up,
            self.bytes_down,
            self.failed_connect,
            self.failed_timeout,
            self.failed_upstream,
            self.failed_closed,
        )

    def __repr__(self) -> str:
        figures = ", ".join(f"{n}={v}" for n, v in zip(TRAFFIC_COUNTS, self.totals(), strict=True))
        return f"TrafficRecord({figures})"


class TrafficCounter:
    def __init__(self, max_pairs: int = MAX_PAIRS, max_others: int = MAX_OTHERS) -> None:
        self._max_pairs = max_pairs
        self._max_others = max_others
        #: (client, upstream) -> record; dict order is the order takes hand pairs out in.
        self._records: dict[tuple[str, str], TrafficRecord] = {}
        self._named = 0
        self._others = 0

    def __len__(self) -> int:
        return len(self._records)

    def record(self, client: str, upstream: str) -> TrafficRecord:
        """The live record of the pair (made on first use; past the bounds, the shared record
        it is counted under)."""
        found = self._records.get((client, upstream))
        if found is not None:
            return found
        if self._named < self._max_pairs:
            self._named += 1
            return self._new((client, upstream))
        other = (OTHER, upstream)
        found = self._records.get(other)
        if found is not None:
            return found
        if self._others < self._max_others:
            self._others += 1
            return self._new(other)
        return self._records.get((OTHER, OTHER)) or self._new((OTHER, OTHER))

    def _new(self, key: tuple[str, str]) -> TrafficRecord:
        made = self._records[key] = TrafficRecord()
        return made

    def take(self, max_entries: int) -> tuple[ClientTraffic, ...]:
        """What at most ``max_entries`` pairs gained since the previous take (the others keep
        theirs for the next); records no connection holds and with nothing new leave."""
        taken: list[ClientTraffic] = []
        handed: list[tuple[str, str]] = []
        idle: list[tuple[str, str]] = []
        for key in list(self._records):
            # Not items(): its iterator keeps the last pair it gave, a reference of its own.
            record = self._records[key]
            totals = record.totals()
            if totals == record._taken:
                if sys.getrefcount(record) <= _ONLY_THE_TABLE:
                    idle.append(key)
                continue
            if len(taken) >= max_entries:
                continue
            delta = tuple(
                min(now - before, MAX_COUNTER)
                for now, before in zip(totals, record._taken, strict=True)
            )
            record._taken = tuple(a + b for a, b in zip(record._taken, delta, strict=True))
            taken.append(ClientTraffic(key[0], key[1], *delta))
            handed.append(key)
        for key in idle:
            del self._records[key]
            self._forget(key)
        for key in handed:  # to the back: the pairs not handed out go first next time
            self._records[key] = self._records.pop(key)
        return tuple(taken)

    def _forget(self, key: tuple[str, str]) -> None:
        if key[0] != OTHER:
            self._named -= 1
        elif key[1] != OTHER:
            self._others -= 1
