"""Text responses: one proxy per line, in one of the shapes vendors use.

``host:port``, ``host:port:user:pass``, ``user:pass@host:port`` and ``host:port,SECONDS`` (seconds
left, Kuaidaili ``f_et=1`` and Juliang ``ip_remain=1``); an IPv6 host goes in brackets. A body
whose first line is ``ERROR(code): message`` is the vendor's error (Kuaidaili's text form).
Each line is parsed or dropped by its reason; at most ``max_entries`` distinct proxies are
taken, the others counted as :data:`DropReason.OVER_CAP` (``ParsedResponse.take``), and once
that many are taken (or four listings per place read) the lines left are counted so without
being parsed. Lines are read
one at a time from a body of at most :data:`MAX_BODY` bytes. A body that is not
UTF-8 is a :class:`MalformedResponse` and nothing of it is taken.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from activity.providers.entries import (
    Dropped,
    DropReason,
    ParsedResponse,
    ProxyEntry,
    checked_host,
    checked_login,
    checked_port,
    checked_protocol,
)
from activity.providers.errors import MalformedResponse, NextStep, VendorError
from activity.providers.expiry import ExpiryForm, ExpiryRule

#: The longest line parsed (host 253, port, user and password 256 each, seconds).
MAX_LINE = 800
#: The largest body parsed (fetch.py reads at most its max_bytes, 64 MiB at the most).
MAX_BODY = 64 * 1024 * 1024
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]:")  # a line's bracketed host, not a JSON list
_ERROR = re.compile(r"ERROR\((-?\w{1,32})\)\s*:?\s*(.*)", re.DOTALL)


class LineFormat(StrEnum):
    HOST_PORT = "host:port"
    HOST_PORT_USER_PASS = "host:port:user:pass"  # noqa: S105  (a shape's name, not a password)
    USER_PASS_AT_HOST_PORT = "user:pass@host:port"  # noqa: S105
    HOST_PORT_SECONDS = "host:port,seconds"


@dataclass(frozen=True, slots=True)
class TextFormat:
    """How one upstream's text responses read: the shape of a line, the protocol its proxies
    speak, their expiry, the most entries taken from one response, and what the vendor's error
    codes mean (an unknown code: retry later)."""

    line: LineFormat
    protocol: str
    expiry: ExpiryRule
    max_entries: int
    vendor_codes: Mapping[str, NextStep] = field(default_factory=dict)
    #: Take loopback and private addresses (the demo's local proxies); refused otherwise.
    allow_local_hosts: bool = False
    #: What stands between two proxies when it is not a line break (a vendor's ``sep`` option:
    #: a space, ``|``, ``;``, ``,``...); None: line breaks.
    separator: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.line, LineFormat):
            raise ValueError(f"line must be one of {', '.join(LineFormat)}")
        checked_protocol(self.protocol)
        if self.line is LineFormat.HOST_PORT_SECONDS and self.expiry.form not in (
            ExpiryForm.SECONDS_LEFT,
            ExpiryForm.NONE,
        ):
            raise ValueError("host:port,seconds lines give seconds left: use seconds_left")
        if not isinstance(self.max_entries, int) or not 1 <= self.max_entries <= 100_000:
            raise ValueError("max_entries must be 1 to 100000")
        if self.separator is not None and (
            not isinstance(self.separator, str)
            or not 1 <= len(self.separator) <= 4
            or any(ch.isalnum() or ch in ":@[]." for ch in self.separator)
            or (self.separator == "," and self.line is LineFormat.HOST_PORT_SECONDS)
        ):
            raise ValueError("separator must be 1-4 characters that no proxy line holds")

    def parse(self, body: bytes, sent_at: datetime) -> ParsedResponse:
        """The entries of ``body``, a response to a request sent at ``sent_at``.

        A body that is not lines of proxies at all (JSON, an HTML error page, lines none of
        which has the configured shape) is a :class:`MalformedResponse`, not a response whose
        every entry was dropped."""
        if len(body) > MAX_BODY:
            raise MalformedResponse(f"the text response is over {MAX_BODY:,} bytes")
        try:
            text = body.decode("utf-8-sig")  # a byte order mark is not part of the first line
        except UnicodeDecodeError:
            raise MalformedResponse("the text response is not UTF-8") from None
        lines = (line.strip() for line in self._pieces(text))
        first = next((line for line in lines if line), None)
        if first is None:
            return ParsedResponse()
        if error := _ERROR.fullmatch(first[:MAX_LINE]):
            code, message = error.groups()
            raise VendorError(code, message, self.vendor_codes.get(code, NextStep.RETRY_LATER))
        if first.startswith(("{", "<")) or (first.startswith("[") and not _IPV6.match(first)):
            raise MalformedResponse("the text response is JSON or HTML, not lines")
        parsed = ParsedResponse()
        for line in itertools.chain((first,), lines):
            if not line:
                continue
            if parsed.full(self.max_entries):  # counted, not parsed
                parsed.dropped[DropReason.OVER_CAP] += 1
                continue
            try:
                parsed.take(self.parse_line(line, sent_at), self.max_entries)
            except Dropped as dropped:
                parsed.dropped[dropped.reason] += 1
        if not parsed.entries and set(parsed.dropped) == {DropReason.MALFORMED}:
            raise MalformedResponse("no line of the text response has the configured shape")
        return parsed

    def _pieces(self, text: str) -> Iterator[str]:
        """The body's proxies one at a time: its lines (``\n``, ``\r\n`` or ``\r``), each
        split at ``separator`` when one is set."""
        for line in io.StringIO(text, newline=None):
            if self.separator is None:
                yield line
            else:
                yield from line.split(self.separator)

    def parse_line(self, line: str, sent_at: datetime) -> ProxyEntry:
        """One line's entry; :class:`Dropped` with the reason it is not taken."""
        if len(line) > MAX_LINE:
            raise Dropped(DropReason.TOO_LONG)
        if "://" in line:  # a URL: its scheme would read as a login
            raise Dropped(DropReason.MALFORMED)
        username = password = seconds = None
        if self.line is LineFormat.HOST_PORT:
            host, port = split_host_port(line)
        elif self.line is LineFormat.HOST_PORT_SECONDS:
            address, _, seconds = line.partition(",")
            host, port = split_host_port(address.strip())
            seconds = seconds.strip()
        elif self.line is LineFormat.USER_PASS_AT_HOST_PORT:
            login, at, address = line.rpartition("@")
            if not at:
                raise Dropped(DropReason.MALFORMED)
            username, _, password = login.partition(":")
            host, port = split_host_port(address)
        else:
            host, port, username, password = _host_port_user_pass(line)
        username, password = checked_login(username, password)
        return ProxyEntry(
            host=checked_host(host, self.allow_local_hosts),
            port=checked_port(port),
            protocol=self.protocol,
            expires_at=self.expiry.expires_at(seconds or None, sent_at),
            username=username,
            password=password,
        )


def split_host_port(text: str) -> tuple[str, str]:
    """``host:port`` or ``[ipv6]:port`` into its two parts (not yet checked)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if not rest.startswith(":"):
            raise Dropped(DropReason.MALFORMED)
        return host, rest[1:]
    host, colon, port = text.rpartition(":")
    if not colon or ":" in host:  # an IPv6 host without brackets cannot be told from its port
        raise Dropped(DropReason.MALFORMED)
    return host, port


def _host_port_user_pass(line: str) -> tuple[str, str, str, str]:
    """``host:port:user:pass``; the password may hold ``:``, the username may not."""
    if line.startswith("["):
        host, _, rest = line[1:].partition("]")
        parts = rest.split(":", 3)
        if len(parts) != 4 or parts[0]:
            raise Dropped(DropReason.MALFORMED)
        return host, parts[1], parts[2], parts[3]
    parts = line.split(":", 3)
    if len(parts) != 4:
        raise Dropped(DropReason.MALFORMED)
    return parts[0], parts[1], parts[2], parts[3]
