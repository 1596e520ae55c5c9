"""The client's address behind a trusted reverse proxy (pool_admin/proxy_headers.py): taken
from X-Real-IP only when the peer is a trusted proxy; from anyone else the proxy headers are
dropped before the application sees them."""

from __future__ import annotations

import pytest

from pool_admin.proxy_headers import TrustedProxies, parse_networks


def seen(environ: dict, networks: tuple = parse_networks(["127.0.0.1/32", "10.0.0.0/8"])):
    got: dict = {}

    def app(env, start_response):
        got.update(env)
        return [b""]

    TrustedProxies(app, networks)(environ, lambda *a: None)
    return got


def request(peer: str, **headers: str) -> dict:
    return {"REMOTE_ADDR": peer, "wsgi.url_scheme": "http", **headers}


def test_a_trusted_proxy_gives_the_client_address_and_scheme():
    environ = request("127.0.0.1", HTTP_X_REAL_IP="198.51.100.7", HTTP_X_FORWARDED_PROTO="https")
    got = seen(environ)
    assert (got["REMOTE_ADDR"], got["wsgi.url_scheme"]) == ("198.51.100.7", "https")
    assert environ["REMOTE_ADDR"] == "198.51.100.7"  # in place: the access log sees it too
    assert seen(request("10.1.2.3", HTTP_X_REAL_IP="2001:db8::1"))["REMOTE_ADDR"] == "2001:db8::1"


def test_anyone_else_keeps_its_own_address_and_loses_the_headers():
    got = seen(request("192.0.2.5", HTTP_X_REAL_IP="127.0.0.1", HTTP_X_FORWARDED_PROTO="https",
                       HTTP_X_FORWARDED_FOR="127.0.0.1"))  # fmt: skip
    assert (got["REMOTE_ADDR"], got["wsgi.url_scheme"]) == ("192.0.2.5", "http")
    assert not {"HTTP_X_REAL_IP", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_FOR"} & set(got)


def test_nothing_trusted_by_default_and_nonsense_from_a_proxy_is_ignored():
    got = seen(request("127.0.0.1", HTTP_X_REAL_IP="198.51.100.7"), networks=())
    assert got["REMOTE_ADDR"] == "127.0.0.1" and "HTTP_X_REAL_IP" not in got
    got = seen(request("127.0.0.1", HTTP_X_REAL_IP="evil, 1.2.3.4", HTTP_X_FORWARDED_PROTO="ftp"))
    assert (got["REMOTE_ADDR"], got["wsgi.url_scheme"]) == ("127.0.0.1", "http")


def test_a_bad_network_is_named():
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33' is not a network"):
        parse_networks(["127.0.0.1/32", "10.0.0.0/33"])
