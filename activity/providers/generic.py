"""The generic readers an upstream configures itself when no preset fits: a JSON list found by
paths, or text lines of one shape (``reader`` settings, checked by building them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from typing import Any

from activity.providers.expiry import ExpiryForm, ExpiryRule
from activity.providers.json_api import EntryFields, JsonFormat
from activity.providers.lines import LineFormat, TextFormat
from activity.providers.presets import Format, UpstreamOptions

#: The names a JSON reader's ``fields`` may give a path for (EntryFields's own).
FIELD_NAMES = frozenset(
    f.name for f in dataclass_fields(EntryFields) if f.name not in ("protocols", "port_by_protocol")
)
JSON_KEYS = frozenset(
    {
        "list_path",
        "fields",
        "expiry",
        "success_path",
        "success_value",
        "error_code_path",
        "error_message_path",
    }
)
TEXT_KEYS = frozenset({"line", "expiry"})


def _text(settings: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = settings.get(key, default)
    if value is not None and (not isinstance(value, str) or not value or len(value) > 200):
        raise ValueError(f"{key} must be a non-empty string of at most 200 characters")
    return value


def _expiry(settings: Mapping[str, Any], options: UpstreamOptions) -> ExpiryRule:
    form = _text(settings, "expiry", ExpiryForm.NONE.value)
    if form not in {f.value for f in ExpiryForm}:
        raise ValueError(f"expiry must be one of {', '.join(ExpiryForm)}")
    return ExpiryRule(ExpiryForm(form), options.default_lifetime, options.zone or "UTC")


def json_reader(settings: Mapping[str, Any], options: UpstreamOptions) -> Format:
    """``{"list_path": "data.proxy_list", "fields": {"host": "ip", "port": "port", ...},
    "expiry": "unix_seconds", "success_path": "code", "success_value": "0"}``; ValueError
    naming what is wrong."""
    unknown = set(settings) - JSON_KEYS
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
    list_path = _text(settings, "list_path")
    if list_path is None:
        raise ValueError("list_path is required: where the list of proxies is, e.g. data")
    given = settings.get("fields", {})
    if not isinstance(given, dict) or not all(
        isinstance(v, str) and v and len(v) <= 200 for v in given.values()
    ):
        raise ValueError('fields must map field names to paths, e.g. {"host": "ip"}')
    if set(given) - FIELD_NAMES:
        raise ValueError(f"fields may name {', '.join(sorted(FIELD_NAMES))}")
    return JsonFormat(
        list_path=list_path,
        protocol=options.protocol,
        expiry=_expiry(settings, options),
        max_entries=options.max_entries,
        fields=EntryFields(**given),
        success_path=_text(settings, "success_path"),
        success_value=_text(settings, "success_value", "0") or "0",
        error_code_path=_text(settings, "error_code_path"),
        error_message_path=_text(settings, "error_message_path"),
        allow_local_hosts=options.allow_local_hosts,
    )


def text_reader(settings: Mapping[str, Any], options: UpstreamOptions) -> Format:
    """``{"line": "host:port:user:pass", "expiry": "none"}`` (the line shapes of LineFormat)."""
    unknown = set(settings) - TEXT_KEYS
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
    line = _text(settings, "line", LineFormat.HOST_PORT.value)
    if line not in {f.value for f in LineFormat}:
        raise ValueError(f"line must be one of {', '.join(LineFormat)}")
    shape = LineFormat(line)
    default = "seconds_left" if shape is LineFormat.HOST_PORT_SECONDS else "none"
    expiry = _expiry({"expiry": settings.get("expiry", default)}, options)
    return TextFormat(
        shape,
        options.protocol,
        expiry,
        options.max_entries,
        allow_local_hosts=options.allow_local_hosts,
        separator=options.separator,
    )
