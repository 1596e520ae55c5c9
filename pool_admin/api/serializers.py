"""Request and response bodies of the client API (the ARCHITECTURE "Public surface" shapes)."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from activity import ExtractedProxy, ExtractMode, PoolOptions
from activity.labels import MAX_LABEL, BadLabel, clean_label
from activity.types import LABEL_MAX_LENGTH, LABEL_PATTERN, PROTOCOLS

#: The pool's bounds, as the API's pool has them (pool_admin/bootstrap.py leaves them at their
#: defaults): the API refuses what the pool would, with the API's own field errors.
POOL_BOUNDS = PoolOptions()
#: The pool's largest extract count; a client's own limit is checked by the view (403).
MAX_COUNT = POOL_BOUNDS.max_extract_count
#: Longest min_remaining_s: the pool believes no provider TTL longer than this.
MAX_REMAINING_S = int(POOL_BOUNDS.max_proxy_ttl.total_seconds())
LABEL_REGEX = rf"\A{LABEL_PATTERN}\Z"


class StrictSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Refuses fields it does not declare (a typo must not silently widen a request)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


class StrictSerializerSchema(OpenApiSerializerExtension):
    """The schema of a :class:`StrictSerializer` says so: ``additionalProperties: false``."""

    target_class = StrictSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(
            self.target, direction, bypass_extensions=True
        )
        schema["additionalProperties"] = False
        return schema


def _label(help_text: str) -> serializers.RegexField:
    return serializers.RegexField(
        LABEL_REGEX,
        required=False,
        allow_null=True,
        max_length=LABEL_MAX_LENGTH,
        help_text=help_text,
    )


class VendorLabelField(serializers.CharField):
    """A region or carrier as vendors label proxies (activity/labels.py): 1-64 printable
    characters, matched whatever their case (``us`` finds ``US``)."""

    def __init__(self, help_text: str) -> None:
        super().__init__(
            required=False,
            allow_null=True,
            trim_whitespace=False,
            max_length=MAX_LABEL * 4,
            help_text=help_text,
        )

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return clean_label(value)
        except BadLabel as exc:
            raise serializers.ValidationError(f"Not a label: {exc}.") from None


def choice_field(choices: list[str], **kwargs: Any) -> serializers.ChoiceField:
    """A ChoiceField whose error names the valid choices (DRF's says only that the input is not
    one of them)."""
    listed = ", ".join(f'"{c}"' for c in choices)
    return serializers.ChoiceField(
        choices=choices,
        error_messages={
            "invalid_choice": f'"{{input}}" is not a valid choice; use one of {listed}.'
        },
        **kwargs,
    )


class ExtractFiltersSerializer(StrictSerializer):
    protocol = choice_field(
        sorted(PROTOCOLS),
        required=False,
        allow_null=True,
        help_text="Omitted: any protocol the client is allowed.",
    )
    region = VendorLabelField(
        "Region label, e.g. 'us' (any case), or as the vendor wrote it. Omitted: any region "
        "the client is allowed."
    )
    carrier = VendorLabelField("Carrier label (any case). Omitted: any carrier.")
    upstream = _label("Upstream name. Omitted: any upstream the client is allowed.")


#: What an extract body may leave out: ``{}`` asks for one proxy, partial.
EXTRACT_DEFAULTS: dict[str, Any] = {"count": 1, "mode": ExtractMode.PARTIAL.value}


class ExtractRequestSerializer(StrictSerializer):
    count = serializers.IntegerField(
        min_value=1, max_value=MAX_COUNT, default=EXTRACT_DEFAULTS["count"]
    )
    mode = choice_field(
        [m.value for m in ExtractMode],
        default=EXTRACT_DEFAULTS["mode"],
        help_text="`partial` (the default) returns what there is, up to `count`; "
        "`all_or_nothing` exactly `count` or none.",
    )
    filters = ExtractFiltersSerializer(required=False)
    min_remaining_s = serializers.IntegerField(
        min_value=0,
        max_value=MAX_REMAINING_S,
        required=False,
        help_text="Only proxies usable for at least this many seconds.",
    )


# The fast path's field names come from the serializers; its value rules are theirs, restated
# (tests/pool_admin/api/test_body.py checks the two agree on generated bodies).
_TOP_FIELDS = frozenset(ExtractRequestSerializer().fields)
_FILTER_FIELDS = frozenset(ExtractFiltersSerializer().fields)
_MODES = frozenset(m.value for m in ExtractMode)
_LABEL = re.compile(LABEL_REGEX)


def _plain_int(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _plain_filters(filters: Any) -> bool:
    if type(filters) is not dict or not filters.keys() <= _FILTER_FIELDS:
        return False
    for name, value in filters.items():
        if value is None:
            continue
        if type(value) is not str:
            return False
        if name == "protocol":
            if value not in PROTOCOLS:
                return False
        elif not _LABEL.search(value):
            return False
    return True


def validate_extract_body(data: Any) -> dict[str, Any]:
    """``data`` as :class:`ExtractRequestSerializer` validates it, or its ``ValidationError``.

    A body of plain values that the serializer would accept unchanged (JSON integers in range,
    a known mode, string or null filters matching their rules, no unknown field) is returned
    as it is, without building a serializer (about a tenth of a request's CPU time); anything
    else goes through the serializer, so every error and every coercion is exactly its own.
    """
    if (
        type(data) is dict
        and data.keys() <= _TOP_FIELDS
        and ("count" not in data or _plain_int(data["count"], 1, MAX_COUNT))
        and ("mode" not in data or (type(data["mode"]) is str and data["mode"] in _MODES))
        and ("filters" not in data or _plain_filters(data["filters"]))
        and (
            "min_remaining_s" not in data or _plain_int(data["min_remaining_s"], 0, MAX_REMAINING_S)
        )
    ):
        return EXTRACT_DEFAULTS | data
    body = ExtractRequestSerializer(data=data)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)


class ProxySerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.CharField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    protocol = serializers.CharField()
    username = serializers.CharField(allow_null=True)
    password = serializers.CharField(allow_null=True)
    expires_at = serializers.DateTimeField()
    upstream = serializers.CharField()
    region = serializers.CharField(allow_null=True)
    carrier = serializers.CharField(allow_null=True)


class ExtractResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    proxies = ProxySerializer(many=True)
    requested = serializers.IntegerField()
    returned = serializers.IntegerField()
    replayed = serializers.BooleanField()
    generation = serializers.CharField(
        help_text=(
            "The pool generation these proxies come from. It changes when the pool's Redis "
            "loses its data (a restart): proxies held from an earlier generation may then be "
            "handed to another client, since exclusivity does not carry over."
        )
    )


def proxy_body(p: ExtractedProxy) -> dict[str, Any]:
    return {
        "id": p.proxy_id,
        "host": p.host,
        "port": p.port,
        "protocol": p.protocol,
        "username": p.username,
        "password": p.password,
        "expires_at": p.expires_at.isoformat().replace("+00:00", "Z"),
        "upstream": p.upstream_id,
        "region": p.region,
        "carrier": p.carrier,
    }


class UpstreamInventorySerializer(serializers.Serializer):  # type: ignore[type-arg]
    upstream = serializers.CharField()
    enabled = serializers.BooleanField()
    available = serializers.BooleanField(
        help_text="False when the pool could not count within its scan budget (then the "
        "numbers are null); retry later."
    )
    extractable = serializers.IntegerField(
        allow_null=True,
        help_text="Proxies an extract could draw now: checked AVAILABLE, held by no one, "
        "usable (before this client's gateway reserve).",
    )
    unextracted = serializers.IntegerField(
        allow_null=True,
        help_text="Records not yet extracted, in any health state (being checked, failing "
        "their checks, held by a gateway worker): the fetch side's measure, not what can be "
        "drawn.",
    )
    managed = serializers.IntegerField(
        allow_null=True,
        help_text="Records the pool still manages (fetched, checking, available, suspect, "
        "draining).",
    )
    available_slots = serializers.IntegerField(
        allow_null=True,
        help_text="Free connection slots of its available proxies (gateway workers' capacity).",
    )


class InventoryResponseSerializer(serializers.Serializer):  # type: ignore[type-arg]
    upstreams = UpstreamInventorySerializer(many=True)
