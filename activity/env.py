"""Typed readers for environment variables that fail fast, naming the variable.

No Django import, so they are testable on their own. Error messages never repeat a value that
might be a secret (URLs are shown with their password masked).
"""

from __future__ import annotations

import base64
import binascii
import os
from urllib.parse import urlsplit

from activity.redact import redact_url
from activity.redis_url import SENTINEL_SCHEME, RedisURLError, is_sentinel_url, parse_sentinel_url

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class EnvError(ValueError):
    """A configuration variable is missing or malformed."""


def env_str(name: str, default: str | None = None) -> str:
    """The variable's value, or ``default``; missing without a default is an error."""
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise EnvError(f"{name} is required but not set")
        return default
    return value


def env_bool(name: str, default: bool = False) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (case-insensitive); anything else is an error."""
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise EnvError(f"{name} must be one of 1/0/true/false/yes/no/on/off, got {value!r}")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (optionally at least ``minimum``, at most ``maximum``)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise EnvError(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise EnvError(f"{name} must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise EnvError(f"{name} must be <= {maximum}, got {number}")
    return number


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated list; blanks are dropped, and an empty result is an error."""
    items = [item.strip() for item in env_str(name, default).split(",") if item.strip()]
    if not items:
        raise EnvError(f"{name} must list at least one value")
    return items


def env_url(name: str, default: str, schemes: frozenset[str]) -> str:
    """A URL whose scheme is one of ``schemes`` and that names a host (or a unix socket, or
    for ``redis+sentinel://`` its Sentinels and master: activity/redis_url.py)."""
    value = env_str(name, default)
    if is_sentinel_url(value) and SENTINEL_SCHEME in schemes:
        try:
            parse_sentinel_url(value)
        except RedisURLError as exc:
            raise EnvError(f"{name}: {exc}: {redact_url(value)}") from None
        return value
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a non-numeric port
    except ValueError:
        raise EnvError(f"{name} is not a valid URL: {redact_url(value)}") from None
    if parts.scheme not in schemes:
        allowed = ", ".join(sorted(schemes))
        raise EnvError(f"{name} must use one of the schemes {allowed}: {redact_url(value)}")
    if not parts.hostname and parts.scheme != "unix":
        raise EnvError(f"{name} must name a host: {redact_url(value)}")
    return value


def env_secret(name: str, dev_default: str, allow_dev_default: bool) -> str:
    """A secret that may fall back to a development value only when ``allow_dev_default``."""
    value = os.environ.get(name, "")
    if value:
        return value
    if allow_dev_default:
        return dev_default
    raise EnvError(f"{name} is required when DEBUG is off and POOL_DEV is not set")


def check_fernet_key(name: str, value: str) -> str:
    """Require urlsafe base64 of exactly 32 bytes (a Fernet key), without echoing the value."""
    try:
        raw = base64.urlsafe_b64decode(value.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raw = b""
    if len(raw) != 32:
        raise EnvError(f"{name} must be urlsafe base64 of 32 bytes (a Fernet key)")
    return value


def check_fernet_keys(name: str, value: str) -> tuple[str, ...]:
    """Comma-separated Fernet keys, newest first: the first encrypts, every one decrypts.

    Several keys let an operator rotate: put the new key first, re-encrypt, drop the old one.
    """
    keys = tuple(item.strip() for item in value.split(",") if item.strip())
    if not keys:
        raise EnvError(f"{name} must list at least one Fernet key")
    for position, key in enumerate(keys, start=1):
        try:
            check_fernet_key(name, key)
        except EnvError:
            if len(keys) == 1:
                raise
            raise EnvError(
                f"{name} must be urlsafe base64 of 32 bytes (a Fernet key) in each "
                f"comma-separated item; item {position} is not"
            ) from None
    return keys
