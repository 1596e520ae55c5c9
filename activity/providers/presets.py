"""Named configurations of the generic adapters for real vendor shapes, selectable per upstream.

Each shape is the one its vendor documents: Kuaidaili (kuaidaili.com/dps/apidoc/ and
kuaidaili.com/doc/api/return/), Juliang (juliangip.com/help/api/postpay/), Webshare
(apidocs.webshare.io/proxy-list), Proxy-Seller (docs.proxy-seller.com, API v1 "Retrieve active
proxy"), Thordata (doc.thordata.com, interface documentation); Zhima's and Xiequ's are as public
clients read them (github.com/GiaoGiaoCat/zhima, github.com/camofy/camofy
``src/cloud/provider.rs``).

A preset fixes what the vendor fixes (where the list and fields are, how success and errors
read, the expiry form and the zone its times are in, what its error codes mean); the upstream
gives the rest (:class:`UpstreamOptions`: the protocol its proxies speak, the lifetime of an
entry without expiry, the most entries taken from one response, and the zone when it differs).
Error codes map to next steps by what the vendor says each code means: order or balance gone,
a caller not whitelisted, a bad request: disable and alert; rate limited: back off; nothing
available now: retry later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from activity.providers.errors import NextStep
from activity.providers.expiry import ExpiryForm, ExpiryRule
from activity.providers.json_api import EntryFields, JsonFormat
from activity.providers.lines import LineFormat, TextFormat

Format = JsonFormat | TextFormat

#: Kuaidaili's codes (getdps): order expired/expired/refunded, bad request/order/arguments,
#: not a DPS order, blocked: disable; frequency limit: back off; none available: retry.
_KUAIDAILI: Mapping[str, NextStep] = {
    **dict.fromkeys(("2", "-15", "-16", "-1", "-2", "-3", "-5", "-14"), NextStep.DISABLE),
    "-51": NextStep.BACK_OFF,
    "3": NextStep.RETRY_LATER,
}
#: The Zhima / Pinyi / IPIDEA platform: caller not whitelisted, no balance: disable; retry.
_ZHIMA: Mapping[str, NextStep] = {
    "113": NextStep.DISABLE,
    "117": NextStep.DISABLE,
    "121": NextStep.DISABLE,
    "115": NextStep.RETRY_LATER,
}
#: Thordata's extraction codes (the same family): retry in 2 s, empty; allowlist failed,
#: account abnormal, package expired.
_THORDATA: Mapping[str, NextStep] = {
    "111": NextStep.BACK_OFF,
    "114": NextStep.RETRY_LATER,
    **dict.fromkeys(("117", "118", "121"), NextStep.DISABLE),
}
#: Proxy-Seller: 503 is a bad key, a caller's IP not allowed, or the request limit (told apart
#: by the message); 22002 a bad type.
_PROXY_SELLER: Mapping[str, NextStep] = {"503": NextStep.DISABLE, "22002": NextStep.DISABLE}
_PROXY_SELLER_MESSAGES: Mapping[str, NextStep] = {"request limit": NextStep.BACK_OFF}


@dataclass(frozen=True, slots=True)
class UpstreamOptions:
    """What an upstream sets whatever its preset (``zone``: None, the preset's)."""

    protocol: str
    default_lifetime: timedelta
    max_entries: int
    zone: str | None = None
    #: Take loopback and private proxy addresses (the demo provider's local proxies).
    allow_local_hosts: bool = False
    #: Text presets: what stands between two proxies when the upstream's request asks for
    #: something else than line breaks (Kuaidaili's ``sep``).
    separator: str | None = None


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: str
    #: The zone the vendor's times without an offset are in.
    zone: str
    build: Callable[[UpstreamOptions, str], Format]

    def format(self, options: UpstreamOptions) -> Format:
        """This preset's adapter for an upstream; ValueError when ``options`` do not fit."""
        return self.build(options, options.zone or self.zone)


Builder = Callable[[UpstreamOptions, str], Format]


def _json(form: ExpiryForm, **shape: Any) -> Builder:
    """A JSON preset: the vendor's ``shape`` (JsonFormat's fields) with its expiry ``form``."""

    def build(o: UpstreamOptions, zone: str) -> Format:
        expiry = ExpiryRule(form, o.default_lifetime, zone)
        return JsonFormat(
            protocol=o.protocol,
            max_entries=o.max_entries,
            expiry=expiry,
            allow_local_hosts=o.allow_local_hosts,
            **shape,
        )

    return build


def _seconds_lines(codes: Mapping[str, NextStep]) -> Builder:
    """A text preset of ``host:port,seconds`` lines."""

    def build(o: UpstreamOptions, zone: str) -> Format:
        expiry = ExpiryRule(ExpiryForm.SECONDS_LEFT, o.default_lifetime, zone)
        return TextFormat(
            LineFormat.HOST_PORT_SECONDS,
            o.protocol,
            expiry,
            o.max_entries,
            codes,
            allow_local_hosts=o.allow_local_hosts,
            separator=o.separator,
        )

    return build


#: Success is ``code`` equal to ``value``; the error's code and message are ``code``, ``msg``.
def _code_is(value: str, codes: Mapping[str, NextStep]) -> dict[str, Any]:
    return {
        "success_path": "code",
        "success_value": value,
        "error_code_path": "code",
        "error_message_path": "msg",
        "vendor_codes": codes,
    }


_KUAIDAILI_JSON = _json(
    ExpiryForm.SECONDS_LEFT,
    list_path="data.proxy_list",
    string_entries=LineFormat.HOST_PORT_SECONDS,
    **_code_is("0", _KUAIDAILI),
)
_ZHIMA_JSON = _json(
    ExpiryForm.LOCAL_DATETIME,
    list_path="data",
    fields=EntryFields(expiry="expire_time", region="city", carrier="isp"),
    **_code_is("0", _ZHIMA),
)
# Xiequ's "success" is a string that can say "true" beside an error code: code decides.
_XIEQU_JSON = _json(
    ExpiryForm.NONE,
    list_path="data",
    fields=EntryFields(host="IP", port="Port"),
    **_code_is("0", {}),
)
_WEBSHARE_LIST = _json(
    ExpiryForm.NONE,
    list_path="results",
    fields=EntryFields(
        host="proxy_address",
        username="username",
        password="password",  # noqa: S106 - a field name, not a password
        region="country_code",
        valid="valid",
    ),
)
_PROXY_SELLER_LIST = _json(
    ExpiryForm.DATE_ONLY,
    list_path="data.items",
    fields=EntryFields(
        port="port_http",
        port_by_protocol={"socks5": "port_socks"},
        username="login",
        password="password",  # noqa: S106 - a field name, not a password
        expiry="date_end",
        region="country",
    ),
    success_path="status",
    success_value="success",
    error_code_path="errors.0.code",
    error_message_path="errors.0.message",
    vendor_codes=_PROXY_SELLER,
    vendor_messages=_PROXY_SELLER_MESSAGES,
)
_THORDATA_ISP = _json(
    ExpiryForm.UNIX_SECONDS,
    list_path="data",
    fields=EntryFields(
        username="user",
        password="pwd",  # noqa: S106 - a field name, not a password
        expiry="expireTime",
        region="country",
    ),
    **_code_is("200", _THORDATA),
)


PRESETS: Mapping[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "kuaidaili_getdps_json",
            "Kuaidaili getdps, JSON, f_et=1",
            "Asia/Shanghai",
            _KUAIDAILI_JSON,
        ),
        # Text presets read one proxy per line, or per UpstreamOptions.separator.
        Preset(
            "kuaidaili_getdps_text",
            "Kuaidaili getdps, text, f_et=1",
            "Asia/Shanghai",
            _seconds_lines(_KUAIDAILI),
        ),
        Preset(
            "juliang_postpay_text",
            "Juliang postpay/getips, text, ip_remain=1",
            "Asia/Shanghai",
            _seconds_lines({}),
        ),
        Preset(
            "zhima_getip_json",
            "Zhima getip, JSON (type=2, ts=1, ys=1, cs=1)",
            "Asia/Shanghai",
            _ZHIMA_JSON,
        ),
        Preset("xiequ_json", "Xiequ GetIp, JSON", "Asia/Shanghai", _XIEQU_JSON),
        Preset("webshare_list", "Webshare proxy/list (one page)", "UTC", _WEBSHARE_LIST),
        # Proxy-Seller's dates name no zone; UTC unless the upstream says otherwise.
        Preset("proxy_seller_list", "Proxy-Seller proxy/list/{type}", "UTC", _PROXY_SELLER_LIST),
        Preset("thordata_isp", "Thordata ISP queryListIsp", "UTC", _THORDATA_ISP),
    )
}
