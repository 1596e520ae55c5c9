"""Target hosts of outcome reports: one normal form, so one ban is one quarantine entry.

A target host is a DNS name or an IP address, nothing else: no scheme, port, path, user or
spaces. DNS names are lowercased and lose a trailing dot; internationalised names must come in
their ASCII (punycode) form; IP addresses are stored in their compressed form (IPv6 may come in
brackets). A quarantine is per host, never per port: a site that bans an exit bans it whatever
port the client used.
"""

from __future__ import annotations

import ipaddress
import re

#: The longest DNS name (RFC 1035), and the default of ``PoolOptions.max_host_length``.
MAX_HOST_LENGTH = 253
# One DNS label: letters, digits, '-' and '_' (seen in real names), not starting or ending in '-'.
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def normalize_host(value: object, max_length: int = MAX_HOST_LENGTH) -> str:
    """The normal form of a host name or IP address; ValueError (secret-free) if it is none."""
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty host name or IP address")
    if len(value) > max_length:
        raise ValueError(f"must be at most {max_length} characters")
    if not value.isascii():
        raise ValueError("must be ASCII (give an internationalised name in punycode)")
    host = value.lower()
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    if "%" not in host:  # a zone ID names an interface of the client, not a target
        try:
            return ipaddress.ip_address(host).compressed
        except ValueError:
            pass
    if bracketed:
        raise ValueError("brackets are only for an IPv6 address")
    name = host.removesuffix(".")
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise ValueError("must be a host name or IP address, without scheme, port or path")
    return name
