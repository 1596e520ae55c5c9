"""The events of the usage stream: one flat, typed shape per kind, checked on both sides.

A stream entry carries a batch of events (a producer process sends what it queued in one
``XADD``): one field ``e``, a JSON array of ``[kind, at_ms, {fields}]``, at most
``MAX_ENTRY_EVENTS`` events and ``MAX_ENTRY_BYTES`` bytes. Producers build each event with
:func:`encode_event`, which refuses a field the kind does not have or a value out of its shape;
the consumer reads an entry with :func:`decode_entry`: an entry it cannot read at all raises
:class:`MalformedEvent`, an event in it that does not check is refused alone (with a reason a
dead-letter entry keeps) and the entry's other events still count.

No field may hold a secret or a proxy's address: events carry IDs, labels, counts and
durations only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from activity.labels import is_kept_label
from activity.types import LABEL_PATTERN, Outcome, ProxyState
from gateway_runtime.wire.limits import OTHER

_LABEL = re.compile(LABEL_PATTERN)
#: A drop reason or an extract's outcome: at most 40 characters, as their columns
#: (UpstreamDrops.reason, ClientUsage.outcome); an event PostgreSQL would refuse never checks.
_CODE = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: Largest count or sum one event may carry (sums of milliseconds over a batch fit).
MAX_NUMBER = 10**12
#: Most keys of a map of counts (states, drop reasons) and rows of an extract's draws.
MAX_MAP = 32
MAX_DRAWS = 256
#: Bounds of one encoded event and of one entry (the consumer refuses bigger ones unread).
MAX_EVENT_BYTES = 16_384
MAX_ENTRY_EVENTS = 500
MAX_ENTRY_BYTES = 256 * 1024


class MalformedEvent(ValueError):
    """An entry or event no aggregate can use; ``reason`` is short and names no value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _label(value: object) -> bool:
    return isinstance(value, str) and _LABEL.fullmatch(value) is not None


def _traffic_name(value: object) -> bool:
    """A gateway traffic row's client or upstream: a label, or the worker's ``OTHER`` (pairs
    past its table bound, gateway_runtime/traffic.py)."""
    return value == OTHER or _label(value)


def _code(value: object) -> bool:
    return isinstance(value, str) and _CODE.fullmatch(value) is not None


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_NUMBER


def _flag(value: object) -> bool:
    return type(value) is bool


def _outcome(value: object) -> bool:
    return isinstance(value, str) and value in {o.value for o in Outcome}


def _source(value: object) -> bool:
    return value in ("intake", "recheck")


def _counts(value: object) -> bool:
    """A map of code -> count (proxies by state, entries by drop reason)."""
    return (
        isinstance(value, dict)
        and len(value) <= MAX_MAP
        and all(_code(k) and _count(n) for k, n in value.items())
    )


_STATES = frozenset(state.value for state in ProxyState)


def _states(value: object) -> bool:
    """Proxies by the state a check gave them (UpstreamChecks.result holds a state's name)."""
    return isinstance(value, dict) and _counts(value) and all(k in _STATES for k in value)


def _draw(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 4
        and _label(row[0])
        # A region as its vendor wrote it: at most 64 characters, so ClientDraws.region fits it.
        and (row[1] == "" or is_kept_label(row[1]))
        and _count(row[2])
        and _count(row[3])
    )


def _draws(value: object) -> bool:
    """An extract's proxies by [upstream, region ("" for none), count, sum of their ages since
    fetch in ms]."""
    return isinstance(value, list) and len(value) <= MAX_DRAWS and all(map(_draw, value))


Check = Callable[[object], bool]
#: Kind -> field -> (check, required).
KINDS: dict[str, dict[str, tuple[Check, bool]]] = {
    # An outcome report an extracting client made (pool_admin/api/outcomes.py).
    "outcome": {"upstream": (_label, True), "outcome": (_outcome, True)},
    # One extract call, API or command, answered or refused (pool_admin/api/extracting.py).
    "extract": {
        "client": (_label, True),  # an ApiClient's name: a label
        "outcome": (_code, True),
        "returned": (_count, True),
        "duration_ms": (_count, True),
        "draws": (_draws, False),
    },
    # One provider response written to the pool (pool_admin/fetch_tasks.py): entries received,
    # new lifecycles inserted, refreshed, made available by their intake (checked, or a trusted
    # provider's), and the entries not taken by reason.
    "fetch": {
        "upstream": (_label, True),
        "received": (_count, True),
        "inserted": (_count, True),
        "refreshed": (_count, True),
        "available": (_count, True),
        "dropped": (_counts, False),
    },
    # A round of checks, at intake or rechecks: proxies by the state the check gave, and the
    # sum and number of the latencies measured.
    "check": {
        "upstream": (_label, True),
        "source": (_source, True),
        "states": (_states, True),
        "latency_ms": (_count, True),
        "timed": (_count, True),
    },
    # A fetch that failed (pool_admin/fetch_tasks.py): its error code (the vendor's
    # fetch_failed, http_status, vendor_error, malformed_response..., or our_side).
    "fetch_failed": {"upstream": (_label, True), "error": (_code, True)},
    # Records the pool removed at their hard expiry, used (extracted or assigned) or not.
    "expired": {"upstream": (_label, True), "used": (_count, True), "unused": (_count, True)},
    # One ownership manager tick that ran (pool_admin/gateway_tasks.py): how long it took,
    # the lapsed leases its sweep expired (every group's: a lease's group is not read) and
    # whether a bound or the lost lease stopped it short.
    "gateway_tick": {
        "duration_ms": (_count, True),
        "expired": (_count, True),
        "cut_short": (_flag, True),
    },
    # What one tick did for a group (only a group it did something for): proxies assigned,
    # leases renewed, drains begun, proxies released, candidates another took first.
    "gateway_ownership": {
        "group": (_label, True),
        "assigned": (_count, True),
        "renewed": (_count, True),
        "drains_begun": (_count, True),
        "released": (_count, True),
        "refused": (_count, True),
    },
    # What a gateway worker of the group carried for one client through one upstream's proxies
    # since its previous accepted report (pool_admin/metrics/gateway_events.py): requests,
    # tunnels, bytes each way, failures by kind (gateway_runtime/wire/types.py ClientTraffic).
    "gateway_traffic": {
        "group": (_label, True),
        "client": (_traffic_name, True),
        "upstream": (_traffic_name, True),
        "requests": (_count, True),
        "tunnels": (_count, True),
        "bytes_up": (_count, True),
        "bytes_down": (_count, True),
        "failed_connect": (_count, True),
        "failed_timeout": (_count, True),
        "failed_upstream": (_count, True),
        "failed_closed": (_count, True),
    },
    # Snapshots a gateway worker of the group refused since its previous accepted report (its
    # draining registry was full; it kept serving its older view).
    "gateway_snapshots_refused": {"group": (_label, True), "refused": (_count, True)},
}


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    at_ms: int
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Refused:
    """An event of an entry that does not check: where it was, why, and what it was."""

    index: int
    reason: str
    raw: bytes


@dataclass(slots=True)
class DecodedEntry:
    """An entry's events that check, with their ``positions`` in the entry, and the refused."""

    events: list[Event] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)


def encoded(event: Event) -> bytes:
    """An event as an entry carries it (what a dead-letter entry keeps of it)."""
    return orjson.dumps([event.kind, event.at_ms, dict(event.fields)])


def _check(kind: object, at_ms: object, fields: object) -> None:
    spec = KINDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise MalformedEvent("unknown kind")
    if not (type(at_ms) is int and 0 < at_ms < 10**14):
        raise MalformedEvent("bad time")
    if not isinstance(fields, dict):
        raise MalformedEvent(f"{kind}: fields are not an object")
    for name in fields:
        if name not in spec:
            raise MalformedEvent(f"{kind}: unknown field {str(name)[:32]!r}")
    for name, (check, required) in spec.items():
        if name not in fields:
            if required:
                raise MalformedEvent(f"{kind}: missing {name}")
        elif not check(fields[name]):
            raise MalformedEvent(f"{kind}: bad {name}")


def encode_event(kind: str, at_ms: int, fields: Mapping[str, Any]) -> bytes:
    """One event as it goes into an entry; ``MalformedEvent`` for one the consumer would
    refuse."""
    fields = dict(fields)
    _check(kind, at_ms, fields)
    raw = orjson.dumps([kind, at_ms, fields])
    if len(raw) > MAX_EVENT_BYTES:
        raise MalformedEvent(f"{kind}: too large")
    return raw


def entry_of(events: list[bytes]) -> dict[str, bytes]:
    """The stream entry of encoded events (the caller keeps within the entry's bounds)."""
    return {"e": b"[" + b",".join(events) + b"]"}


def decode_entry(entry: Mapping[bytes, bytes]) -> DecodedEntry:
    """One stream entry's events, each checked; ``MalformedEvent`` for an unreadable entry."""
    if sum(len(k) + len(v) for k, v in entry.items()) > MAX_ENTRY_BYTES:
        raise MalformedEvent("entry too large")
    if set(entry) != {b"e"}:
        raise MalformedEvent("not an event entry")
    try:
        items = orjson.loads(entry[b"e"])
    except ValueError:
        raise MalformedEvent("unreadable") from None
    if not isinstance(items, list):
        raise MalformedEvent("not a list of events")
    if len(items) > MAX_ENTRY_EVENTS:
        raise MalformedEvent("too many events")
    decoded = DecodedEntry()
    for index, item in enumerate(items):
        try:
            if not (isinstance(item, list) and len(item) == 3):
                raise MalformedEvent("not an event")
            kind, at_ms, fields = item
            _check(kind, at_ms, fields)
        except MalformedEvent as exc:
            decoded.refused.append(Refused(index, exc.reason, orjson.dumps(item)))
        else:
            decoded.events.append(Event(kind, at_ms, fields))
            decoded.positions.append(index)
    return decoded
