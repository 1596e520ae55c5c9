"""A gateway client's username (gateway_runtime/username.py): the vendors' hyphenated
key-value grammar, its aliases, the client name found against the snapshot's clients, and a
reason for every refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway_runtime.username import (
    KEYS,
    MAX_USERNAME,
    ClientRequest,
    FailureMode,
    UsernameError,
    format_username,
    parse_username,
)

CLIENTS = {"shop", "shop-1", "crawler.eu", "shop-session-1"}


def test_a_bare_name_asks_for_nothing_in_particular():
    assert parse_username("shop", CLIENTS) == ClientRequest("shop")


def test_the_vendors_grammar_with_its_aliases():
    request = parse_username("shop-1-cc-US-sessid-ab_12-sesstime-10-proto-SOCKS5", CLIENTS)
    assert request == ClientRequest(
        "shop-1", region="US", protocol="socks5", session="ab_12",
        session_lifetime=timedelta(minutes=10),
    )  # fmt: skip
    assert parse_username(
        "shop-country-de-isp-att-pool-acme-session-x-sessionmode-strict-errors-3", CLIENTS
    ) == ClientRequest(
        "shop", region="de", carrier="att", upstream="acme", session="x",
        failure_mode=FailureMode.STRICT, max_errors=3,
    )  # fmt: skip
    assert parse_username("crawler.eu-Region-fr", CLIENTS).region == "fr"  # keys in any case


def test_the_longest_known_client_name_wins():
    assert parse_username("shop-session-1", CLIENTS) == ClientRequest("shop-session-1")
    assert parse_username("shop-session-2", CLIENTS) == ClientRequest("shop", session="2")
    assert parse_username("shop-1-session-1", CLIENTS) == ClientRequest("shop-1", session="1")


@pytest.mark.parametrize(
    ("username", "words"),
    [
        ("", "no username"),
        ("nobody", "no client"),
        ("nobody-country-us", "no client"),
        ("shop-country", "has no value"),
        ("shop-colour-red", "unknown parameter 'colour'"),
        ("shop-country-us-cc-de", "given twice"),
        ("shop-country-u s", "value must be"),
        ("shop-country-" + "u" * 65, "value must be"),
        ("shop-protocol-ftp", "protocol must be one of"),
        ("shop-session-a.b", "session: 1-64"),
        ("shop-sesstime-10", "needs a session"),
        ("shop-mode-strict", "needs a session"),
        ("shop-session-a-sesstime-0", "from 1 to 1440"),
        ("shop-session-a-sesstime-1441", "from 1 to 1440"),
        ("shop-session-a-sesstime-1.5", "whole number"),
        ("shop-session-a-sesstime-\u0661", "value must be"),
        ("shop-session-a-mode-sticky", "flex or strict"),
        ("shop-session-a-errors-101", "from 1 to 100"),
        ("shop-" + "x" * MAX_USERNAME, f"longer than {MAX_USERNAME}"),
    ],
)
def test_each_refusal_says_why(username, words):
    with pytest.raises(UsernameError) as refused:
        parse_username(username, CLIENTS)
    assert words in refused.value.reason


def test_a_refusal_never_echoes_more_than_a_key():
    with pytest.raises(UsernameError) as refused:
        parse_username("shop-" + "k" * 60 + "-v", CLIENTS)
    assert "k" * 33 not in refused.value.reason


_values = st.from_regex(r"[A-Za-z0-9_.:+@]{1,20}", fullmatch=True)
_sessions = st.from_regex(r"[A-Za-z0-9_]{1,20}", fullmatch=True)


@st.composite
def requests(draw):
    session = draw(st.none() | _sessions)
    return ClientRequest(
        client=draw(st.sampled_from(sorted(CLIENTS - {"shop-session-1"}))),
        region=draw(st.none() | _values),
        protocol=draw(st.none() | st.sampled_from(["http", "https", "socks4", "socks5"])),
        carrier=draw(st.none() | _values),
        upstream=draw(st.none() | _values),
        session=session,
        session_lifetime=(
            None if session is None else draw(st.none() | st.integers(1, 1440).map(
                lambda m: timedelta(minutes=m)))
        ),
        failure_mode=FailureMode.FLEX if session is None else draw(st.sampled_from(FailureMode)),
        max_errors=None if session is None else draw(st.none() | st.integers(1, 100)),
    )  # fmt: skip


@given(requests())
def test_what_is_formatted_reads_back_the_same(request):
    assert parse_username(format_username(request), CLIENTS) == request


def test_every_alias_names_a_field_of_the_request():
    assert set(KEYS.values()) <= set(ClientRequest.__dataclass_fields__) - {"client"}
