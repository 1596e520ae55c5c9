"""JSON responses: where the list is, where each field of an entry is, how success is told.

Paths are dotted, with list indices as numbers: ``data.proxy_list``, ``results``,
``data.items``, ``errors.0.code``. An entry is an object whose fields the paths name (Zhima's
``{"ip", "port", "expire_time"}``, Webshare's ``{"proxy_address", "port", "username"}``) or a
string in a line shape (Kuaidaili's ``"113.74.108.51:16816,175"``, read as :mod:`lines` reads a
line). Success is a field's value (``code`` is ``0``, ``status`` is ``"success"``), or only the
HTTP status when no field is named; otherwise the response is the vendor's error, its code and
message read from their paths and its next step from the upstream's code table. A body that is
not JSON, or has no list where the list should be, is a :class:`MalformedResponse`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from activity.labels import BadLabel, LabelTooLong, clean_label
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
from activity.providers.errors import (
    MAX_VENDOR_MESSAGE,
    MalformedResponse,
    NextStep,
    VendorError,
)
from activity.providers.expiry import ExpiryRule
from activity.providers.lines import MAX_BODY, LineFormat, TextFormat, split_host_port

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class EntryFields:
    """Where an object entry keeps each field. ``address`` (``"host:port"``) stands in for
    ``host`` and ``port`` when a vendor gives them together; ``protocol``, when named, is read
    per entry through ``protocols`` (the vendor's value, lowercased, to the pool's)."""

    host: str | None = "ip"
    port: str | None = "port"
    address: str | None = None
    username: str | None = None
    password: str | None = None
    expiry: str | None = None
    region: str | None = None
    carrier: str | None = None
    protocol: str | None = None
    protocols: Mapping[str, str] = field(default_factory=dict)
    #: The port's path for a protocol, when the vendor gives one port per protocol
    #: (Proxy-Seller's ``port_http`` and ``port_socks``); else ``port``.
    port_by_protocol: Mapping[str, str] = field(default_factory=dict)
    #: A field the vendor sets to ``true`` for a working proxy (Webshare's ``valid``): an entry
    #: without it true is dropped as :data:`DropReason.INVALID`.
    valid: str | None = None

    def __post_init__(self) -> None:
        if self.address is None and (self.host is None or self.port is None):
            raise ValueError("an entry needs host and port paths, or an address path")


@dataclass(frozen=True, slots=True)
class JsonFormat:
    """How one upstream's JSON responses read."""

    list_path: str
    protocol: str
    expiry: ExpiryRule
    max_entries: int
    fields: EntryFields = field(default_factory=EntryFields)
    #: How a string entry reads (None: string entries are malformed).
    string_entries: LineFormat | None = None
    #: Success: ``success_path`` holds ``success_value`` (as JSON text: ``0``, ``success``,
    #: ``true``); no path: the HTTP status alone tells.
    success_path: str | None = None
    success_value: str = "0"
    error_code_path: str | None = None
    error_message_path: str | None = None
    vendor_codes: Mapping[str, NextStep] = field(default_factory=dict)
    #: Next steps by a word of the vendor's message, before its code (Proxy-Seller answers 503
    #: for a bad key and for its rate limit alike).
    vendor_messages: Mapping[str, NextStep] = field(default_factory=dict)
    #: Take loopback and private addresses (the demo's local proxies); refused otherwise.
    allow_local_hosts: bool = False

    def __post_init__(self) -> None:
        checked_protocol(self.protocol)
        if not isinstance(self.max_entries, int) or not 1 <= self.max_entries <= 100_000:
            raise ValueError("max_entries must be 1 to 100000")
        if self.string_entries is not None:  # the line shape's own checks
            self._lines()

    def _lines(self) -> TextFormat:
        assert self.string_entries is not None
        return TextFormat(
            self.string_entries,
            self.protocol,
            self.expiry,
            self.max_entries,
            allow_local_hosts=self.allow_local_hosts,
        )

    def parse(self, body: bytes, sent_at: datetime) -> ParsedResponse:
        if len(body) > MAX_BODY:
            raise MalformedResponse(f"the response is over {MAX_BODY:,} bytes")
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise MalformedResponse("the response is not JSON") from None
        self._raise_unless_success(document)
        entries = value_at(document, self.list_path, _MISSING)
        if entries is _MISSING:
            raise MalformedResponse(f"the response has no {self.list_path!r}")
        if entries is None or entries == "":
            entries = []  # the list is there and empty: Kuaidaili's "data": "" when none is left
        if not isinstance(entries, list):
            raise MalformedResponse(f"{self.list_path!r} is not a list")
        lines = self._lines() if self.string_entries is not None else None
        parsed = ParsedResponse()
        for number, entry in enumerate(entries):
            if parsed.full(self.max_entries):
                parsed.dropped[DropReason.OVER_CAP] += len(entries) - number
                break
            try:
                parsed.take(self._entry(entry, lines, sent_at), self.max_entries)
            except Dropped as dropped:
                parsed.dropped[dropped.reason] += 1
        return parsed

    def _raise_unless_success(self, document: object) -> None:
        if self.success_path is None:
            return
        if as_text(value_at(document, self.success_path)) == self.success_value:
            return
        code = as_text(value_at(document, self.error_code_path)) if self.error_code_path else None
        message = value_at(document, self.error_message_path) if self.error_message_path else None
        code = code or "unknown"
        message = message if isinstance(message, str) else ""
        next_step = self.vendor_codes.get(code, NextStep.RETRY_LATER)
        for word, step in self.vendor_messages.items():
            if word.lower() in message[: MAX_VENDOR_MESSAGE * 4].lower():
                next_step = step
                break
        raise VendorError(code, message, next_step)

    def _entry(self, entry: object, lines: TextFormat | None, sent_at: datetime) -> ProxyEntry:
        if isinstance(entry, str) and lines is not None:
            return lines.parse_line(entry.strip(), sent_at)
        if not isinstance(entry, dict):
            raise Dropped(DropReason.MALFORMED)
        paths = self.fields
        if paths.valid is not None and value_at(entry, paths.valid) is not True:
            raise Dropped(DropReason.INVALID)
        protocol = self._protocol(entry)
        if paths.address is not None:
            address = value_at(entry, paths.address)
            if not isinstance(address, str) or "://" in address:
                raise Dropped(DropReason.MALFORMED)
            host, port = split_host_port(address.strip())
        else:
            port_path = paths.port_by_protocol.get(protocol, paths.port)
            host, port = value_at(entry, paths.host), value_at(entry, port_path)
        username, password = checked_login(
            value_at(entry, paths.username), value_at(entry, paths.password)
        )
        return ProxyEntry(
            host=checked_host(host, self.allow_local_hosts),
            port=checked_port(port),
            protocol=protocol,
            expires_at=self.expiry.expires_at(value_at(entry, paths.expiry), sent_at),
            username=username,
            password=password,
            region=_label(value_at(entry, paths.region)),
            carrier=_label(value_at(entry, paths.carrier)),
        )

    def _protocol(self, entry: object) -> str:
        if self.fields.protocol is None:
            return self.protocol
        value = value_at(entry, self.fields.protocol)
        if not isinstance(value, str):
            raise Dropped(DropReason.BAD_PROTOCOL)
        return checked_protocol(self.fields.protocols.get(value.lower(), value.lower()))


def value_at(document: object, path: str | None, absent: Any = None) -> Any:
    """The value at a dotted ``path`` (list indices as numbers), ``absent`` when any step is
    not there."""
    if path is None:
        return absent
    value = document
    for step in path.split("."):
        if value is None or value == "":  # the vendor sent nothing here: empty, not absent
            return None
        if isinstance(value, dict):
            value = value.get(step, _MISSING)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return absent
        if value is _MISSING:
            return absent
    return value


def as_text(value: object) -> str | None:
    """A JSON scalar as its JSON text (``0``, ``true``, ``success``); None for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def _label(value: object) -> str | None:
    """A region or carrier as the vendor wrote it, cleaned (activity/labels.py: ``广东省广州市``
    and ``United States`` are labels): None when absent or blank; the entry dropped when it is
    past its bound, unprintable, or not a string."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise Dropped(DropReason.MALFORMED)
    try:
        return clean_label(value)
    except LabelTooLong:
        raise Dropped(DropReason.TOO_LONG) from None
    except BadLabel:
        raise Dropped(DropReason.MALFORMED) from None
