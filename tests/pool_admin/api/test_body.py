"""The extract body's fast validation agrees with ExtractRequestSerializer on every input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from pool_admin.api import serializers
from pool_admin.api.serializers import ExtractRequestSerializer, validate_extract_body

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 1_005),
    st.integers(86_395, 86_405),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["partial", "all_or_nothing", "some", "", " partial", "1", "2.0", "5 "]),
    st.sampled_from(["http", "socks5", "ftp", "us", "not a label", "a" * 64, "a" * 65, "-x"]),
    st.text(max_size=8),
)
filters = st.one_of(
    scalars,
    st.dictionaries(
        st.sampled_from(["protocol", "region", "carrier", "upstream", "country"]), scalars
    ),
)
bodies = st.one_of(
    scalars,
    st.lists(scalars, max_size=2),
    st.fixed_dictionaries(
        {"count": scalars, "mode": scalars},
        optional={"filters": filters, "min_remaining_s": scalars, "colour": scalars},
    ),
    st.dictionaries(st.sampled_from(["count", "mode", "filters", "min_remaining_s"]), scalars),
)


def by_serializer(data):
    body = ExtractRequestSerializer(data=data)
    if body.is_valid():
        return "ok", dict(body.validated_data)
    return "error", body.errors


def by_fast_path(data):
    try:
        return "ok", validate_extract_body(data)
    except ValidationError as exc:
        return "error", exc.detail


def normal(result):
    kind, value = result
    if kind == "ok" and isinstance(value.get("filters"), dict):
        value = {**value, "filters": dict(value["filters"])}
    return kind, value


@settings(max_examples=500, deadline=None)
@given(bodies)
def test_fast_validation_agrees_with_the_serializer(data):
    assert normal(by_fast_path(data)) == normal(by_serializer(data))


@pytest.mark.parametrize(
    "data",
    [
        {"count": 1, "mode": "partial"},
        {"count": 1000, "mode": "all_or_nothing", "min_remaining_s": 86_400},
        {"count": 3, "mode": "partial", "filters": {}},
        {"count": 3, "mode": "partial", "filters": {"protocol": "socks5", "region": None}},
        {"count": 3, "mode": "partial", "filters": {"region": "us", "upstream": "acme-us"}},
    ],
)
def test_plain_bodies_pass_unchanged_without_a_serializer(data, monkeypatch):
    assert normal(by_serializer(data)) == ("ok", data)
    monkeypatch.setattr(serializers, "ExtractRequestSerializer", None)  # not called
    assert validate_extract_body(data) == data
