"""Text responses (activity/providers/lines.py), from the vendors' documented shapes:
Kuaidaili ``getdps`` text with ``f_et=1``, Juliang ``postpay/getips`` with ``ip_remain=1``, and
the plain and login-carrying line forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from activity.providers import (
    DropReason,
    ExpiryForm,
    ExpiryRule,
    LineFormat,
    MalformedResponse,
    NextStep,
    TextFormat,
    VendorError,
)

SENT = datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)
TEN_MINUTES = timedelta(minutes=10)


def text_format(line: LineFormat, *, max_entries: int = 100, **codes: NextStep) -> TextFormat:
    form = ExpiryForm.SECONDS_LEFT if line is LineFormat.HOST_PORT_SECONDS else ExpiryForm.NONE
    return TextFormat(
        line=line,
        protocol="http",
        expiry=ExpiryRule(form, TEN_MINUTES),
        max_entries=max_entries,
        vendor_codes=codes,
    )


def test_kuaidaili_and_juliang_lines_with_seconds_left():
    body = b"113.74.108.51:16816,175\r\n49.87.220.109:18745,92\r\n114.98.162.2:48581,281\r\n"
    parsed = text_format(LineFormat.HOST_PORT_SECONDS).parse(body, SENT)
    assert [(e.host, e.port, e.expires_at - SENT) for e in parsed.entries] == [
        ("113.74.108.51", 16816, timedelta(seconds=175)),
        ("49.87.220.109", 18745, timedelta(seconds=92)),
        ("114.98.162.2", 48581, timedelta(seconds=281)),
    ]
    assert not parsed.dropped
    # Without the suffix (f_et=0) the upstream's lifetime applies.
    plain = text_format(LineFormat.HOST_PORT_SECONDS).parse(b"113.74.108.51:16816", SENT)
    assert plain.entries[0].expires_at == SENT + TEN_MINUTES


def test_each_line_form_gives_host_port_and_login():
    cases = {
        LineFormat.HOST_PORT: b"Proxy.Example.com.:8080",
        LineFormat.HOST_PORT_USER_PASS: b"11.0.0.1:3128:alice:pa:ss",
        LineFormat.USER_PASS_AT_HOST_PORT: b"alice:p@ss@11.0.0.1:3128",
    }
    got = {line: text_format(line).parse(body, SENT).entries[0] for line, body in cases.items()}
    assert (got[LineFormat.HOST_PORT].host, got[LineFormat.HOST_PORT].port) == (
        "proxy.example.com",
        8080,
    )
    assert got[LineFormat.HOST_PORT].username is None
    pass_with_colon = got[LineFormat.HOST_PORT_USER_PASS]
    assert (pass_with_colon.username, pass_with_colon.password) == ("alice", "pa:ss")
    at_in_password = got[LineFormat.USER_PASS_AT_HOST_PORT]
    assert (at_in_password.host, at_in_password.username, at_in_password.password) == (
        "11.0.0.1",
        "alice",
        "p@ss",
    )


def test_an_ipv6_host_is_taken_in_brackets_only():
    fmt = text_format(LineFormat.HOST_PORT)
    parsed = fmt.parse(b"[2606:4700::1]:8080\n2606:4700::1:8080\n", SENT)
    assert [(e.host, e.port) for e in parsed.entries] == [("2606:4700::1", 8080)]
    assert parsed.dropped == {DropReason.MALFORMED: 1}
    login = text_format(LineFormat.HOST_PORT_USER_PASS).parse(b"[2606:4700::1111]:1080:u:p", SENT)
    assert (login.entries[0].host, login.entries[0].port) == ("2606:4700::1111", 1080)


def test_bad_lines_are_dropped_and_counted_by_reason_and_the_rest_taken():
    body = "\n".join(
        [
            "11.0.0.1:8080,60",
            "11.0.0.2:0,60",  # port 0
            "11.0.0.3:65536,60",  # port too large
            "11.0.0.4:80a,60",
            "bad host!:8080,60",
            "http://11.0.0.5:8080,60",  # a scheme is not a host
            "11.0.0.6:8080,0",  # expired when sent
            "11.0.0.7:8080,soon",
            "11.0.0.8",  # no port
            "x" * 900 + ":80",  # past the line bound
            "",
            "   ",
            "11.0.0.9:8080,60",
        ]
    ).encode()
    parsed = text_format(LineFormat.HOST_PORT_SECONDS).parse(body, SENT)
    assert [e.host for e in parsed.entries] == ["11.0.0.1", "11.0.0.9"]
    assert parsed.dropped == {
        DropReason.BAD_PORT: 3,
        DropReason.BAD_HOST: 1,
        DropReason.MALFORMED: 2,
        DropReason.EXPIRED: 1,
        DropReason.BAD_EXPIRY: 1,
        DropReason.TOO_LONG: 1,
    }


def test_a_login_that_is_not_printable_or_too_long_drops_the_entry():
    fmt = text_format(LineFormat.USER_PASS_AT_HOST_PORT)
    body = "u:p\x07w@11.0.0.1:80\n" + "u:" + "p" * 300 + "@11.0.0.2:80\nu:@11.0.0.3:80"
    parsed = fmt.parse(body.encode(), SENT)
    assert parsed.dropped == {DropReason.BAD_CREDENTIAL: 2}
    assert [(e.host, e.username, e.password) for e in parsed.entries] == [("11.0.0.3", "u", None)]


def test_at_most_max_entries_are_taken_and_the_rest_counted():
    body = "\n".join(f"11.0.{i // 250}.{i % 250 + 1}:8080" for i in range(1000)).encode()
    parsed = text_format(LineFormat.HOST_PORT, max_entries=100).parse(body, SENT)
    assert len(parsed.entries) == 100
    assert parsed.dropped == {DropReason.OVER_CAP: 900}


@given(st.lists(st.integers(min_value=1, max_value=65535), min_size=1, max_size=50))
def test_every_well_formed_line_is_taken_in_order(ports):
    body = "\r\n".join(f"11.1.1.1:{port}" for port in ports).encode()
    parsed = text_format(LineFormat.HOST_PORT, max_entries=100).parse(body, SENT)
    assert [e.port for e in parsed.entries] == ports and not parsed.dropped


def test_an_error_body_is_the_vendors_error_with_its_next_step():
    """Kuaidaili's text form: ``ERROR(code): msg``; the upstream maps codes to next steps."""
    fmt = text_format(LineFormat.HOST_PORT, **{"-51": NextStep.BACK_OFF, "2": NextStep.DISABLE})
    with pytest.raises(VendorError) as caught:
        fmt.parse("ERROR(-51): 提取频率过快\r\n".encode(), SENT)
    assert (caught.value.vendor_code, caught.value.next_step) == ("-51", NextStep.BACK_OFF)
    assert caught.value.vendor_message == "提取频率过快"
    with pytest.raises(VendorError) as caught:
        fmt.parse(b"ERROR(2): order expired", SENT)
    assert caught.value.next_step is NextStep.DISABLE
    with pytest.raises(VendorError) as caught:  # an unknown code: retry at the next due time
        fmt.parse(b"ERROR(7):\x1b[31m" + b"m" * 500, SENT)
    assert caught.value.next_step is NextStep.RETRY_LATER
    assert "\x1b" not in str(caught.value) and len(caught.value.vendor_message) == 200


def test_a_body_that_is_not_utf8_is_malformed_and_nothing_is_taken():
    with pytest.raises(MalformedResponse):
        text_format(LineFormat.HOST_PORT).parse(b"11.0.0.1:8080\n\xff\xfe", SENT)


def test_an_entrys_repr_never_shows_its_password():
    entry = text_format(LineFormat.HOST_PORT_USER_PASS).parse(b"11.0.0.1:80:u:s3cret", SENT)
    assert "s3cret" not in repr(entry.entries[0]) and "s3cret" not in repr(entry)


def test_a_format_that_cannot_read_its_lines_is_refused():
    with pytest.raises(ValueError, match="seconds_left"):
        TextFormat(
            LineFormat.HOST_PORT_SECONDS, "http", ExpiryRule(ExpiryForm.ISO_8601, TEN_MINUTES), 10
        )
    with pytest.raises(ValueError, match="max_entries"):
        text_format(LineFormat.HOST_PORT, max_entries=0)


def test_a_url_is_not_a_login_line():
    """``http://alice:secret@host:port`` would read as user ``http``, password ``//alice:...``."""
    fmt = text_format(LineFormat.USER_PASS_AT_HOST_PORT)
    parsed = fmt.parse(b"http://alice:secret@1.2.3.4:8080\nalice:secret@1.2.3.4:8080", SENT)
    assert [(e.username, e.password) for e in parsed.entries] == [("alice", "secret")]
    assert parsed.dropped == {DropReason.MALFORMED: 1}


def test_a_password_without_a_username_drops_the_entry():
    for line, body in (
        (LineFormat.HOST_PORT_USER_PASS, b"1.2.3.4:80::secret\n1.2.3.5:80:u:p"),
        (LineFormat.USER_PASS_AT_HOST_PORT, b":secret@1.2.3.4:80\nu:p@1.2.3.5:80"),
    ):
        parsed = text_format(line).parse(body, SENT)
        assert [e.host for e in parsed.entries] == ["1.2.3.5"]
        assert parsed.dropped == {DropReason.BAD_CREDENTIAL: 1}


def test_local_addresses_are_dropped_unless_the_upstream_allows_them():
    hosts = [
        "127.0.0.1",
        "0.0.0.0",
        "169.254.169.254",
        "192.168.1.1",
        "10.0.0.1",
        "localhost",
        "db.localhost",
        "[::1]",
        "224.0.0.1",
        "255.255.255.255",
    ]
    body = "\n".join(f"{host}:8080" for host in [*hosts, "1.2.3.4"]).encode()
    parsed = text_format(LineFormat.HOST_PORT).parse(body, SENT)
    assert [e.host for e in parsed.entries] == ["1.2.3.4"]
    assert parsed.dropped == {DropReason.BAD_HOST: len(hosts)}


@pytest.mark.parametrize(
    ("host", "taken"),
    [
        ("127.0.0.1", True), ("[::1]", True), ("localhost", True), ("db.localhost", True),
        ("10.0.0.1", True), ("172.16.5.4", True), ("192.168.1.1", True), ("[fd00::1]", True),
        ("1.2.3.4", True),
        # Never, even for a local test: what the help text does not name.
        ("0.0.0.0", False), ("[::]", False),  # unspecified: this host, every interface
        ("169.254.169.254", False), ("[fe80::1]", False),  # link-local: cloud metadata
        ("[::ffff:169.254.169.254]", False),  # the same, IPv4-mapped
        ("224.0.0.1", False), ("[ff02::1]", False), ("255.255.255.255", False),  # multicast
        ("240.0.0.1", False), ("100.64.0.1", False),  # reserved, shared (carrier-grade NAT)
    ],
)  # fmt: skip
def test_allowing_local_hosts_admits_loopback_and_private_ranges_only(host, taken):
    """Before: allow_local_hosts admitted every address, and the check dialled the cloud
    metadata address."""
    expiry = ExpiryRule(ExpiryForm.NONE, TEN_MINUTES)
    demo = TextFormat(LineFormat.HOST_PORT, "http", expiry, 100, allow_local_hosts=True)
    parsed = demo.parse(f"{host}:8080".encode(), SENT)
    assert (len(parsed.entries), parsed.dropped) == (
        (1, {}) if taken else (0, {DropReason.BAD_HOST: 1})
    )


def test_a_body_that_is_not_lines_of_proxies_is_malformed_not_all_dropped():
    fmt = text_format(LineFormat.HOST_PORT_SECONDS)
    for body in (
        b'{"code": -51, "msg": "too fast"}',
        b"<html><body>502 Bad Gateway</body></html>",
        b'["1.2.3.4:80"]',
        b"Service temporarily unavailable\nplease retry",
    ):
        with pytest.raises(MalformedResponse):
            fmt.parse(body, SENT)
    # Lines of the right shape whose every entry is dropped are a response, not a malformed one.
    assert fmt.parse(b"1.2.3.4:80,0\n1.2.3.5:0,60", SENT).dropped == {
        DropReason.EXPIRED: 1,
        DropReason.BAD_PORT: 1,
    }


def test_a_byte_order_mark_and_any_line_ending_are_read():
    fmt = text_format(LineFormat.HOST_PORT_SECONDS, **{"-51": NextStep.BACK_OFF})
    parsed = fmt.parse("\ufeff1.2.3.4:80,60\r1.2.3.5:80,60\r\n1.2.3.6:80,60\n".encode(), SENT)
    assert [e.host for e in parsed.entries] == ["1.2.3.4", "1.2.3.5", "1.2.3.6"]
    with pytest.raises(VendorError) as caught:
        fmt.parse("\ufeffERROR(-51): x".encode(), SENT)
    assert caught.value.next_step is NextStep.BACK_OFF


def test_a_body_over_the_bound_is_malformed_before_it_is_read():
    from activity.providers.lines import MAX_BODY

    with pytest.raises(MalformedResponse, match="over"):
        text_format(LineFormat.HOST_PORT).parse(b"1" * (MAX_BODY + 1), SENT)


def test_a_vendor_code_and_message_cannot_forge_a_log_line():
    with pytest.raises(VendorError) as caught:
        text_format(LineFormat.HOST_PORT).parse(b"ERROR(-1): a\nb\x1b[31mc", SENT)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_proxies_separated_by_something_else_than_line_breaks():
    """Vendors let the caller choose the separator (Kuaidaili ``sep``): a space, ``|``..."""
    expiry = ExpiryRule(ExpiryForm.SECONDS_LEFT, TEN_MINUTES)
    for separator in (" ", "|", ";"):
        fmt = TextFormat(LineFormat.HOST_PORT_SECONDS, "http", expiry, 100, separator=separator)
        body = separator.join(["1.2.3.4:80,60", "1.2.3.5:81,61", ""]).encode()
        assert [(e.host, e.port) for e in fmt.parse(body, SENT).entries] == [
            ("1.2.3.4", 80),
            ("1.2.3.5", 81),
        ]
    for bad in (",", ":", "x", "", "12345"):
        with pytest.raises(ValueError, match="separator"):
            TextFormat(LineFormat.HOST_PORT_SECONDS, "http", expiry, 100, separator=bad)


def test_zero_network_addresses_are_refused_even_for_local_tests():
    expiry = ExpiryRule(ExpiryForm.NONE, TEN_MINUTES)
    demo = TextFormat(LineFormat.HOST_PORT, "http", expiry, 100, allow_local_hosts=True)
    assert demo.parse(b"0.1.2.3:8080", SENT).dropped == {DropReason.BAD_HOST: 1}
