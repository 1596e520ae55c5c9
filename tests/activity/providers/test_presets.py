"""Every preset (activity/providers/presets.py) parses its vendor's documented response (the
sources are named there) into the right entries and ``expires_at``, zones included, and reads
the vendor's errors with the next step the preset gives them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from activity.providers import DropReason, MalformedResponse, NextStep, VendorError
from activity.providers.presets import PRESETS, UpstreamOptions

SENT = datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)  # 12:00 in Beijing
LIFETIME = timedelta(minutes=10)


def preset(name: str, protocol: str = "http", zone: str | None = None):
    return PRESETS[name].format(UpstreamOptions(protocol, LIFETIME, 100, zone))


def body(document: object) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


def test_the_eight_presets_each_with_a_title_and_a_known_zone():
    assert set(PRESETS) == {
        "kuaidaili_getdps_json", "kuaidaili_getdps_text", "juliang_postpay_text",
        "zhima_getip_json", "xiequ_json", "webshare_list", "proxy_seller_list", "thordata_isp",
    }  # fmt: skip
    for name, each in PRESETS.items():
        assert each.name == name and each.title
        each.format(UpstreamOptions("http", LIFETIME, 10))  # builds: its zone is known


def test_kuaidaili_getdps_json_and_text_with_seconds_left_and_their_errors():
    document = {
        "msg": "",
        "code": 0,
        "data": {
            "count": 2,
            "dedup_count": 2,
            "order_left_count": 998,
            "proxy_list": ["113.74.108.51:16816,175", "49.87.220.109:18745,92"],
        },
    }
    text = b"113.74.108.51:16816,175\r\n49.87.220.109:18745,92"
    expected = [
        ("113.74.108.51", 16816, SENT + timedelta(seconds=175)),
        ("49.87.220.109", 18745, SENT + timedelta(seconds=92)),
    ]
    for name, sent in (("kuaidaili_getdps_json", body(document)), ("kuaidaili_getdps_text", text)):
        parsed = preset(name).parse(sent, SENT)
        assert [(e.host, e.port, e.expires_at) for e in parsed.entries] == expected, name
    with pytest.raises(VendorError) as caught:
        preset("kuaidaili_getdps_json").parse(
            body({"code": -3, "msg": "参数错误", "data": ""}), SENT
        )
    assert (caught.value.vendor_code, caught.value.vendor_message) == ("-3", "参数错误")
    assert caught.value.next_step is NextStep.DISABLE
    with pytest.raises(VendorError) as caught:
        preset("kuaidaili_getdps_text").parse("ERROR(-51): 提取频率过快".encode(), SENT)
    assert caught.value.next_step is NextStep.BACK_OFF


def test_a_text_preset_takes_the_upstreams_separator():
    options = UpstreamOptions("http", LIFETIME, 100, separator="|")
    parsed = (
        PRESETS["kuaidaili_getdps_text"].format(options).parse(b"1.2.3.4:80,5|1.2.3.5:81,6", SENT)
    )
    assert [e.port for e in parsed.entries] == [80, 81]


def test_juliang_postpay_text_with_seconds_left():
    (entry,) = preset("juliang_postpay_text").parse(b"114.98.162.2:48581,281", SENT).entries
    assert (entry.host, entry.port, entry.expires_at) == (
        "114.98.162.2",
        48581,
        SENT + timedelta(seconds=281),
    )


def test_zhima_getip_json_in_beijing_time_with_city_and_isp():
    document = {
        "code": 0,
        "msg": "0",
        "success": True,
        "data": [
            {
                "ip": "1.2.3.4",
                "port": 4231,
                "expire_time": "2026-12-01 12:25:33",
                "city": "杭州",
                "isp": "电信",
                "outip": "1.2.3.5",
            }
        ],
    }
    (entry,) = preset("zhima_getip_json", "socks5").parse(body(document), SENT).entries
    assert (entry.host, entry.port, entry.protocol) == ("1.2.3.4", 4231, "socks5")
    assert entry.expires_at == datetime(2026, 12, 1, 4, 25, 33, tzinfo=UTC)
    assert (entry.region, entry.carrier) == ("杭州", "电信")
    for code, step in (
        ("121", NextStep.DISABLE),
        ("113", NextStep.DISABLE),
        ("115", NextStep.RETRY_LATER),
    ):
        with pytest.raises(VendorError) as caught:
            preset("zhima_getip_json").parse(
                body({"code": int(code), "msg": "x", "data": []}), SENT
            )
        assert caught.value.next_step is step


def test_xiequ_trusts_code_not_its_success_string():
    xiequ = preset("xiequ_json")
    document = {"code": 0, "success": "true", "data": [{"IP": "1.2.3.4", "Port": 5678}]}
    (entry,) = xiequ.parse(body(document), SENT).entries
    assert (entry.host, entry.port, entry.expires_at) == ("1.2.3.4", 5678, SENT + LIFETIME)
    with pytest.raises(VendorError) as caught:
        xiequ.parse(body({"code": -1, "success": "true", "data": []}), SENT)
    assert (caught.value.vendor_code, caught.value.next_step) == ("-1", NextStep.RETRY_LATER)


def test_webshare_list_with_logins_and_no_expiry_and_a_residential_entry_without_address():
    document = {
        "count": 2,
        "next": None,
        "previous": None,
        "results": [
            {
                "id": "d-1",
                "username": "u",
                "password": "p",
                "proxy_address": "1.2.3.4",
                "port": 8168,
                "valid": True,
                "country_code": "US",
                "city_name": "Ashburn",
                "asn_number": 7922,
            },
            {
                "id": "d-2",
                "username": "u",
                "password": "p",
                "proxy_address": None,
                "port": 80,
                "valid": True,
                "country_code": "US",
            },
            {"id": "d-3", "proxy_address": "1.2.3.5", "port": 80, "valid": False},
        ],
    }
    parsed = preset("webshare_list").parse(body(document), SENT)
    assert [(e.host, e.username, e.password, e.region, e.expires_at) for e in parsed.entries] == [
        ("1.2.3.4", "u", "p", "US", SENT + LIFETIME)
    ]
    assert parsed.dropped == {DropReason.BAD_HOST: 1, DropReason.INVALID: 1}
    with pytest.raises(MalformedResponse):  # an answer without the list is not "none left"
        preset("webshare_list").parse(body({"detail": "Invalid token."}), SENT)


def test_proxy_seller_envelope_with_a_date_only_expiry_in_utc_or_the_upstreams_zone():
    document = {
        "status": "success",
        "data": {
            "items": [
                {
                    "id": "0678564",
                    "order_id": "123456",
                    "ip": "31.6.33.97",
                    "protocol": "HTTP",
                    "port_socks": 12346,
                    "port_http": 12345,
                    "login": "l",
                    "password": "pw",
                    "country": "DE",
                    "date_end": "15.12.2026",
                }
            ]
        },
        "errors": [],
    }
    (entry,) = preset("proxy_seller_list").parse(body(document), SENT).entries
    assert (entry.host, entry.port, entry.username, entry.region) == (
        "31.6.33.97",
        12345,
        "l",
        "DE",
    )
    assert entry.expires_at == datetime(2026, 12, 16, tzinfo=UTC)
    (moscow,) = (
        preset("proxy_seller_list", zone="Europe/Moscow").parse(body(document), SENT).entries
    )
    assert moscow.expires_at == datetime(2026, 12, 15, 21, tzinfo=UTC)
    error = {
        "status": "error",
        "data": None,
        "errors": [{"message": "Request limit reached", "code": 503, "customData": None}],
    }
    with pytest.raises(VendorError) as caught:
        preset("proxy_seller_list").parse(body(error), SENT)
    assert (caught.value.vendor_code, caught.value.next_step) == ("503", NextStep.BACK_OFF)
    assert caught.value.vendor_message == "Request limit reached"
    bad_key = {
        "status": "error",
        "data": None,
        "errors": [{"message": "Error api key", "code": 503}],
    }
    with pytest.raises(VendorError) as caught:
        preset("proxy_seller_list").parse(body(bad_key), SENT)
    assert caught.value.next_step is NextStep.DISABLE  # a revoked key alerts, it does not wait
    (socks,) = preset("proxy_seller_list", "socks5").parse(body(document), SENT).entries
    assert (socks.protocol, socks.port) == ("socks5", 12346)


def test_thordata_isp_list_with_unix_seconds():
    expire = int((SENT + timedelta(days=30)).timestamp())
    document = {
        "code": 200,
        "msg": "ok",
        "data": [
            {
                "startTime": 1700000000,
                "expireTime": expire,
                "ip": "5.6.7.8",
                "port": 6666,
                "user": "u",
                "pwd": "p",
                "country": "US",
            }
        ],
    }
    (entry,) = preset("thordata_isp").parse(body(document), SENT).entries
    assert (entry.host, entry.username, entry.password) == ("5.6.7.8", "u", "p")
    assert entry.expires_at == SENT + timedelta(days=30)
    with pytest.raises(VendorError) as caught:
        preset("thordata_isp").parse(body({"code": 111, "msg": "request again in 2 seconds"}), SENT)
    assert caught.value.next_step is NextStep.BACK_OFF
