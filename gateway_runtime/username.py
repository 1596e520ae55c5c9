"""A gateway client's username: its name, then optional hyphenated ``key-value`` parameters,
in the style commercial rotating gateways use (docs/gateway-usernames.md has the grammar with
examples; ../shared/research/gateways.md §2 the vendors it follows):

    shop-1-country-us-session-ab12-sesstime-10

A client name may itself hold hyphens (``shop-1``), so the name is found against the clients
the worker's snapshot knows: the longest known name after which the rest reads as parameters.
Every refusal is a ``UsernameError`` whose ``reason`` the worker sends back in its 407, naming
the parameter, never echoing the whole username (it may hold a mistyped key).
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from gateway_runtime.wire.limits import PROTOCOLS

#: Longest username read at all (the client name is at most 64, its parameters the rest).
MAX_USERNAME = 256
#: A parameter's value: no separator in it, and nothing a header could misread.
VALUE_PATTERN = r"[A-Za-z0-9_.:+@]{1,64}"
#: A sticky session's ID.
SESSION_PATTERN = r"[A-Za-z0-9_]{1,64}"
#: A session's lifetime, in minutes as most vendors write it: 1 minute to 24 hours.
MAX_LIFETIME_MINUTES = 1_440
#: Consecutive upstream errors a ``threshold`` session takes before it moves.
MAX_ERRORS = 100

_VALUE = re.compile(VALUE_PATTERN)
_SESSION = re.compile(SESSION_PATTERN)


class FailureMode(StrEnum):
    """What a sticky session does when its upstream is gone or failing."""

    #: Move to another proxy matching the same parameters (the default, as most vendors).
    FLEX = "flex"
    #: Answer 502 while the sticky proxy is gone: the client decides.
    STRICT = "strict"


class UsernameError(ValueError):
    """A username the worker cannot read; ``reason`` is what its 407 says."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """What a username asks for: the client, and the parameters it gave (None: any)."""

    client: str
    region: str | None = None
    protocol: str | None = None
    carrier: str | None = None
    upstream: str | None = None
    session: str | None = None
    #: The session's lifetime (None: the worker's default); only with a session.
    session_lifetime: timedelta | None = None
    failure_mode: FailureMode = FailureMode.FLEX
    #: Consecutive upstream errors after which a session moves even in ``strict`` mode
    #: (None: never by count).
    max_errors: int | None = None


#: Each key a username may use, by every name it is written with (the aliases vendors use).
KEYS: Mapping[str, str] = {
    "region": "region",
    "country": "region",
    "cc": "region",
    "protocol": "protocol",
    "proto": "protocol",
    "carrier": "carrier",
    "isp": "carrier",
    "upstream": "upstream",
    "pool": "upstream",
    "session": "session",
    "sessid": "session",
    "sessionid": "session",
    "sesstime": "session_lifetime",
    "sessiontime": "session_lifetime",
    "sessionduration": "session_lifetime",
    "lifetime": "session_lifetime",
    "sessionmode": "failure_mode",
    "mode": "failure_mode",
    "errors": "max_errors",
    "maxerrors": "max_errors",
}


def parse_username(username: str, clients: Container[str]) -> ClientRequest:
    """``username`` read against the known client names ``clients``."""
    if not isinstance(username, str) or not username:
        raise UsernameError("no username: give the client's name")
    if len(username) > MAX_USERNAME:
        raise UsernameError(f"the username is longer than {MAX_USERNAME} characters")
    parts = username.split("-")
    first_error: UsernameError | None = None
    # The longest known name first: a name that holds a key word (``shop-session-1``) wins
    # over a shorter one (``shop``) when both are clients.
    for cut in range(len(parts), 0, -1):
        name = "-".join(parts[:cut])
        if name not in clients:
            continue
        try:
            return _parameters(name, parts[cut:])
        except UsernameError as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    raise UsernameError("no client of that name may use the gateway")


def _parameters(client: str, rest: list[str]) -> ClientRequest:
    if len(rest) % 2:
        raise UsernameError(f"parameter {rest[-1][:32]!r} has no value (key-value pairs)")
    given: dict[str, object] = {}
    for key, value in zip(rest[0::2], rest[1::2], strict=True):
        field = KEYS.get(key.lower())
        if field is None:
            raise UsernameError(f"unknown parameter {key[:32]!r}")
        if field in given:
            raise UsernameError(f"parameter {key!r} given twice (or with an alias)")
        given[field] = _value(key, field, value)
    session = given.get("session")
    if session is None:
        for dependent in ("session_lifetime", "failure_mode", "max_errors"):
            if dependent in given:
                raise UsernameError(f"{_written(dependent)} needs a session (session-<id>)")
    return ClientRequest(client=client, **given)  # type: ignore[arg-type]


def _written(field: str) -> str:
    return next(key for key, name in KEYS.items() if name == field)


def _value(key: str, field: str, value: str) -> object:
    if not _VALUE.fullmatch(value):
        raise UsernameError(f"parameter {key!r}: its value must be 1-64 of A-Z a-z 0-9 _ . : + @")
    if field == "protocol":
        protocol = value.lower()
        if protocol not in PROTOCOLS:
            raise UsernameError(f"protocol must be one of {', '.join(sorted(PROTOCOLS))}")
        return protocol
    if field == "session":
        if not _SESSION.fullmatch(value):
            raise UsernameError("session: 1-64 of A-Z a-z 0-9 _")
        return value
    if field == "session_lifetime":
        minutes = _number(key, value, 1, MAX_LIFETIME_MINUTES)
        return timedelta(minutes=minutes)
    if field == "failure_mode":
        try:
            return FailureMode(value.lower())
        except ValueError:
            raise UsernameError(f"{key} must be flex or strict") from None
    if field == "max_errors":
        return _number(key, value, 1, MAX_ERRORS)
    return value  # region, carrier, upstream: matched by the worker against its snapshot


def _number(key: str, value: str, low: int, high: int) -> int:
    if not value.isascii() or not value.isdigit() or not low <= int(value) <= high:
        raise UsernameError(f"{key} must be a whole number from {low} to {high}")
    return int(value)


def format_username(request: ClientRequest) -> str:
    """The canonical username of ``request`` (its keys' first names, in a fixed order)."""
    parts = [request.client]
    for field, value in (
        ("region", request.region),
        ("protocol", request.protocol),
        ("carrier", request.carrier),
        ("upstream", request.upstream),
        ("session", request.session),
    ):
        if value is not None:
            parts += [_written(field), value]
    if request.session_lifetime is not None:
        minutes = int(request.session_lifetime.total_seconds() // 60)
        parts += [_written("session_lifetime"), str(minutes)]
    if request.session is not None and request.failure_mode is not FailureMode.FLEX:
        parts += [_written("failure_mode"), request.failure_mode.value]
    if request.max_errors is not None:
        parts += [_written("max_errors"), str(request.max_errors)]
    return "-".join(parts)
