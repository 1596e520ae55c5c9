"""The events of the usage stream: one flat, typed shape per kind, checked on both sides.

An entry holds three fields: ``k`` (the kind), ``t`` (when, Unix milliseconds) and ``d`` (the
kind's fields as compact JSON). Producers build entries with :func:`encode`, which refuses a
field the kind does not have; the consumer reads them with :func:`decode`, which raises
:class:`MalformedEvent` (with a reason a dead-letter entry keeps) for anything else. No field
may hold a secret or a proxy's address: events carry IDs, labels, counts and durations only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from activity.types import LABEL_PATTERN, Outcome

_LABEL = re.compile(LABEL_PATTERN)
#: Largest count or duration one event may carry (a day in ms; a batch of a million).
MAX_NUMBER = 86_400_000
#: Longest encoded entry: the consumer refuses bigger ones unread.
MAX_ENTRY_BYTES = 2_048


class MalformedEvent(ValueError):
    """An entry no aggregate can use; ``reason`` is short and names no value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _label(value: object) -> bool:
    return isinstance(value, str) and _LABEL.fullmatch(value) is not None


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_NUMBER


def _outcome(value: object) -> bool:
    return isinstance(value, str) and value in {o.value for o in Outcome}


#: Kind -> field -> (check, required).
KINDS: dict[str, dict[str, tuple[Any, bool]]] = {
    # An outcome report an extracting client made (pool_admin/api/outcomes.py).
    "outcome": {"upstream": (_label, True), "outcome": (_outcome, True)},
}


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    at_ms: int
    fields: Mapping[str, Any]


def _check(kind: str, at_ms: object, fields: Mapping[str, Any]) -> None:
    spec = KINDS.get(kind)
    if spec is None:
        raise MalformedEvent("unknown kind")
    if not (type(at_ms) is int and 0 < at_ms < 10**14):
        raise MalformedEvent("bad time")
    for name in fields:
        if name not in spec:
            raise MalformedEvent(f"{kind}: unknown field {name[:32]!r}")
    for name, (check, required) in spec.items():
        if name not in fields:
            if required:
                raise MalformedEvent(f"{kind}: missing {name}")
        elif not check(fields[name]):
            raise MalformedEvent(f"{kind}: bad {name}")


def encode(kind: str, at_ms: int, fields: Mapping[str, Any]) -> dict[str, bytes]:
    """The stream entry of one event; ``MalformedEvent`` for one the consumer would refuse."""
    _check(kind, at_ms, fields)
    return {"k": kind.encode(), "t": str(at_ms).encode(), "d": orjson.dumps(dict(fields))}


def decode(entry: Mapping[bytes, bytes]) -> Event:
    """One stream entry's event, checked."""
    if sum(len(k) + len(v) for k, v in entry.items()) > MAX_ENTRY_BYTES:
        raise MalformedEvent("entry too large")
    if set(entry) != {b"k", b"t", b"d"}:
        raise MalformedEvent("not an event entry")
    try:
        kind = entry[b"k"].decode()
        at_ms = int(entry[b"t"])
        fields = orjson.loads(entry[b"d"])
    except (UnicodeDecodeError, ValueError):
        raise MalformedEvent("unreadable") from None
    if not isinstance(fields, dict):
        raise MalformedEvent("fields are not an object")
    _check(kind, at_ms, fields)
    return Event(kind, at_ms, fields)
