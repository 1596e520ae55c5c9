"""The JSON adapter's rules (activity/providers/json_api.py), on two vendor shapes (Kuaidaili's
getdps, Webshare's list); every preset's own shape is in test_presets.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from activity.providers import (
    DropReason,
    EntryFields,
    ExpiryForm,
    ExpiryRule,
    JsonFormat,
    LineFormat,
    MalformedResponse,
    VendorError,
)
from activity.providers.presets import PRESETS, UpstreamOptions

SENT = datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)  # 12:00 in Beijing
LIFETIME = timedelta(minutes=10)


def body(document: object) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


KUAIDAILI = PRESETS["kuaidaili_getdps_json"].format(UpstreamOptions("http", LIFETIME, 100))
WEBSHARE = PRESETS["webshare_list"].format(UpstreamOptions("http", LIFETIME, 100))


def json_format(list_path: str, form: ExpiryForm = ExpiryForm.NONE, **shape: Any) -> JsonFormat:
    """A JSON format for HTTP proxies, at most 10 entries a response."""
    expiry = ExpiryRule(form, LIFETIME)
    return JsonFormat(list_path=list_path, protocol="http", expiry=expiry, max_entries=10, **shape)


def test_an_address_field_stands_for_host_and_port():
    fields = EntryFields(host=None, port=None, address="proxy", expiry="ttl")
    fmt = json_format("data", ExpiryForm.SECONDS_LEFT, fields=fields)
    parsed = fmt.parse(body({"data": [{"proxy": "1.2.3.4:80", "ttl": 60}, {"proxy": 5}]}), SENT)
    assert [(e.host, e.port) for e in parsed.entries] == [("1.2.3.4", 80)]
    assert parsed.dropped == {DropReason.MALFORMED: 1}


def test_a_body_that_is_not_json_or_has_no_list_is_malformed():
    for bad in (
        b"<html>502 Bad Gateway</html>",
        b"[" * 100_000,
        b'{"code": 0, "data": {"proxy_list": 5}}',
    ):
        with pytest.raises(MalformedResponse):
            KUAIDAILI.parse(bad, SENT)


def test_an_empty_list_is_no_entries_and_an_absent_one_is_malformed():
    """Kuaidaili answers code 0 with an empty data when nothing is left to extract."""
    assert KUAIDAILI.parse(body({"code": 0, "msg": "", "data": ""}), SENT).entries == []
    assert KUAIDAILI.parse(body({"code": 0, "data": {"proxy_list": None}}), SENT).entries == []
    for absent in ({"code": 0}, {"code": 0, "data": {"count": 0}}):
        with pytest.raises(MalformedResponse):
            KUAIDAILI.parse(body(absent), SENT)


def test_at_most_max_entries_are_taken_and_the_rest_counted():
    document = {
        "code": 0,
        "data": {"proxy_list": [f"11.0.{i // 250}.{i % 250 + 1}:80,60" for i in range(1000)]},
    }
    small = json_format(
        "data.proxy_list", ExpiryForm.SECONDS_LEFT, string_entries=LineFormat.HOST_PORT_SECONDS
    )
    parsed = small.parse(body(document), SENT)
    assert len(parsed.entries) == 10 and parsed.dropped == {DropReason.OVER_CAP: 990}


def test_the_cap_counts_distinct_proxies_not_listings():
    """50 listings of one proxy and one other, a cap of 10: both proxies are taken (before:
    the other was dropped as over_cap); the repeats go to the reconciler, which keeps one."""
    listed = ["11.0.0.1:80,60"] * 50 + ["11.0.0.2:80,60"]
    small = json_format(
        "data.proxy_list", ExpiryForm.SECONDS_LEFT, string_entries=LineFormat.HOST_PORT_SECONDS
    )
    parsed = small.parse(body({"code": 0, "data": {"proxy_list": listed}}), SENT)
    assert {e.host for e in parsed.entries} == {"11.0.0.1", "11.0.0.2"}
    assert parsed.dropped == {}


def test_entries_of_the_wrong_kind_or_with_bad_fields_are_dropped_by_reason():
    document = {
        "results": [
            "1.2.3.4:80",  # a string where objects are expected
            {
                "valid": True,
                "proxy_address": "1.2.3.4",
                "port": "80",
                "username": 7,
            },  # a login that is not text
            {"valid": True, "proxy_address": "1.2.3.4", "port": True},  # a bool is not a port
            {"valid": True, "proxy_address": "1.2.3.4", "port": 80, "country_code": "x" * 65},
            {"valid": True, "proxy_address": "1.2.3.4", "port": "81"},  # ports as strings are taken
        ]
    }
    parsed = WEBSHARE.parse(body(document), SENT)
    assert [e.port for e in parsed.entries] == [81]
    assert parsed.dropped == {
        DropReason.MALFORMED: 1,
        DropReason.BAD_CREDENTIAL: 1,
        DropReason.BAD_PORT: 1,
        DropReason.TOO_LONG: 1,
    }


def test_a_format_without_host_and_port_paths_is_refused():
    with pytest.raises(ValueError, match="host and port"):
        EntryFields(host=None)


def test_success_may_be_a_json_true():
    """Zhima's envelope also says ``"success": true``; JSON's ``true``, not Python's ``True``."""
    by_flag = json_format("data", success_path="success", success_value="true")
    entry = {"ip": "1.2.3.4", "port": 80}
    assert len(by_flag.parse(body({"success": True, "data": [entry]}), SENT).entries) == 1
    for refused in (False, "false", None):
        with pytest.raises(VendorError):
            by_flag.parse(body({"success": refused, "data": [entry]}), SENT)


def test_a_protocol_read_per_entry_goes_through_the_vendors_names():
    fields = EntryFields(protocol="protocol", protocols={"socks": "socks5"})
    per_entry = json_format("items", fields=fields)
    items = [
        {"ip": "1.2.3.4", "port": 80, "protocol": "HTTP"},
        {"ip": "1.2.3.5", "port": 1080, "protocol": "SOCKS"},
        {"ip": "1.2.3.6", "port": 21, "protocol": "FTP"},
        {"ip": "1.2.3.7", "port": 80, "protocol": 5},
    ]
    parsed = per_entry.parse(body({"items": items}), SENT)
    assert [(e.host, e.protocol) for e in parsed.entries] == [
        ("1.2.3.4", "http"),
        ("1.2.3.5", "socks5"),
    ]
    assert parsed.dropped == {DropReason.BAD_PROTOCOL: 2}


def test_a_body_repeating_one_proxy_is_not_parsed_to_its_end():
    """Duplicates do not count toward the cap, but the parse stops at four listings a place,
    1,000 at least: a body of 50,000 copies of one proxy costs 1,000 parses, the rest counted
    unread (before: each of them parsed, 0.8 s of CPU for an 8 MiB body)."""
    listed = ["11.0.0.1:80,60"] * 50_000
    small = json_format(
        "data.proxy_list", ExpiryForm.SECONDS_LEFT, string_entries=LineFormat.HOST_PORT_SECONDS
    )
    parsed = small.parse(body({"code": 0, "data": {"proxy_list": listed}}), SENT)
    assert len(parsed.entries) == 1_000 and parsed.dropped == {DropReason.OVER_CAP: 49_000}
