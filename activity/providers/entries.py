"""One proxy as a provider response gives it, checked, and the reasons an entry is dropped.

An adapter turns each entry of a response into a :class:`ProxyEntry` or a :class:`Dropped`
reason; a response's entries are counted by reason (:class:`ParsedResponse`), never echoed:
an entry can hold a password.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from activity.addresses import allowed
from activity.hosts import normalize_host

#: Protocols a proxy of the pool may speak (the pool's ``protocol`` filter).
PROTOCOLS = frozenset({"http", "https", "socks5"})
#: The longest username or password taken from a vendor.
MAX_CREDENTIAL_LENGTH = 256


class DropReason(StrEnum):
    """Why an entry of a response was not taken (the counts a fetch reports)."""

    BAD_HOST = "bad_host"
    BAD_PORT = "bad_port"
    BAD_CREDENTIAL = "bad_credential"
    BAD_EXPIRY = "bad_expiry"
    EXPIRED = "expired"
    BAD_PROTOCOL = "bad_protocol"
    INVALID = "invalid"  # the vendor itself marks the proxy as not working
    MALFORMED = "malformed"  # not in the configured shape at all
    TOO_LONG = "too_long"  # a line or field past its bound, not parsed
    OVER_CAP = "over_cap"  # past the most entries taken from one response


class Dropped(Exception):
    """An entry is not taken, for ``reason``. Raised inside an adapter, counted by it."""

    def __init__(self, reason: DropReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ProxyEntry:
    """One proxy of a response: where it is, how to log in, until when it serves (UTC)."""

    host: str
    port: int
    protocol: str
    expires_at: datetime
    username: str | None = None
    password: str | None = None
    region: str | None = None
    carrier: str | None = None

    @property
    def exit(self) -> str:
        """What makes it one proxy (its protocol, login name and address): listed twice, it
        is one proxy, whatever else the listings say."""
        return f"{self.protocol}://{self.username or ''}@{self.host}:{self.port}"

    def __repr__(self) -> str:  # never the password
        login = "with login" if self.username is not None else "no login"
        return (
            f"ProxyEntry({self.protocol}://{self.host}:{self.port}, {login}, "
            f"expires_at={self.expires_at.isoformat()})"
        )


#: The most listings an answer is read for (duplicates included): four per place its cap
#: allows, and never fewer than MIN_LISTINGS (a small cap with a vendor's repeats).
LISTINGS_PER_CAP = 4
MIN_LISTINGS = 1_000


@dataclass(slots=True)
class ParsedResponse:
    """The entries taken from one response, and the count of those dropped, by reason."""

    entries: list[ProxyEntry] = field(default_factory=list)
    dropped: Counter[DropReason] = field(default_factory=Counter)
    #: The distinct proxies among ``entries`` (by exit): what an answer's cap counts.
    exits: set[str] = field(default_factory=set, repr=False)

    def take(self, entry: ProxyEntry, cap: int) -> None:
        """Add ``entry`` unless ``cap`` distinct proxies are taken and it is not one of them
        (then it is dropped as OVER_CAP): a vendor listing one proxy 50 times leaves room
        for the others. Another listing of a proxy taken is kept; the reconciler keeps the
        longest-lived of them."""
        if entry.exit not in self.exits:
            if len(self.exits) >= cap:
                self.dropped[DropReason.OVER_CAP] += 1
                return
            self.exits.add(entry.exit)
        self.entries.append(entry)

    def full(self, cap: int) -> bool:
        """Whether reading on is no use: ``cap`` distinct proxies taken, or as many listings read
        as the bound allows (a body repeating one proxy must not cost a parse of each of its
        listings; what is left is counted OVER_CAP unread)."""
        listings = max(cap * LISTINGS_PER_CAP, MIN_LISTINGS)
        return len(self.exits) >= cap or len(self.entries) >= listings


def checked_host(value: object, allow_local: bool = False) -> str:
    """A host in its normal form. An address that is not global, or a ``localhost`` name, is
    refused unless ``allow_local``: vendor APIs are often plain HTTP, and an answer changed on
    its way must not turn the pool's proxies into a way to reach this network. ``allow_local``
    (a local test, the demo's local proxies) admits loopback and the private ranges, never the
    addresses activity/addresses.py names (this host's, link-local: the cloud metadata
    address, multicast, broadcast, reserved). A host name is checked where it leads when the
    checker connects to it (activity/checker/probe.py)."""
    try:
        host = normalize_host(value)
    except ValueError:
        raise Dropped(DropReason.BAD_HOST) from None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name: only localhost names are known to be local here
        if (host == "localhost" or host.endswith(".localhost")) and not allow_local:
            raise Dropped(DropReason.BAD_HOST) from None
        return host
    if not allowed(address, allow_local):
        raise Dropped(DropReason.BAD_HOST)
    return host


def checked_port(value: object) -> int:
    """A TCP port 1-65535 from an int or a string of digits (vendors give both)."""
    if isinstance(value, bool):
        raise Dropped(DropReason.BAD_PORT)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 5:
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= 65535:
        raise Dropped(DropReason.BAD_PORT)
    return value


def checked_credential(value: object) -> str | None:
    """A username or password: None when absent or empty, else printable and bounded."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_CREDENTIAL_LENGTH or not value.isprintable():
        raise Dropped(DropReason.BAD_CREDENTIAL)
    return value


def checked_login(username: object, password: object) -> tuple[str | None, str | None]:
    """A username and password, both or neither (a password alone logs in as nobody)."""
    login = checked_credential(username), checked_credential(password)
    if login[0] is None and login[1] is not None:
        raise Dropped(DropReason.BAD_CREDENTIAL)
    return login


def checked_protocol(value: object) -> str:
    protocol = value.lower() if isinstance(value, str) else None
    if protocol not in PROTOCOLS:
        raise Dropped(DropReason.BAD_PROTOCOL)
    return protocol
