"""The worker's request path with real sockets and real upstream proxies (Debian's tinyproxy
with Basic auth, microsocks with username/password), a snapshot installed by the test: plain
HTTP on kept-alive connections, CONNECT to an HTTPS target, SOCKS5 both ways, the refusals,
and what the traffic counter saw."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from gateway_runtime.wire import Credential
from pool_admin.forward_proxies import Tinyproxy
from tests.gateway.local_worker import API_KEY, LocalWorker, client, proxy, snapshot


@pytest.fixture(scope="module")
def worker(tinyproxy, microsocks):
    logins = (
        Credential("c1", "gwuser", "gwpass1"),
        Credential("c2", "gwuser", "gwpass2"),
        Credential("c3", "gwuser", "wrong"),
    )
    proxies = (
        proxy("t1", tinyproxy.port),
        proxy("t2", tinyproxy.port),
        proxy(
            "s1", microsocks.port, "socks5", credential_ref="c2", region="de", upstream="acme-de"
        ),
        proxy("bad", tinyproxy.port, credential_ref="c3", upstream="broken"),
    )
    clients = (
        client("shop", allowed_upstreams=frozenset({"acme-us", "acme-de"})),
        client("eu-only", allowed_regions=frozenset({"de"})),
        client("tester", allowed_upstreams=frozenset({"broken"})),
    )
    with LocalWorker() as running:
        running.install(snapshot(1, proxies, logins, clients))
        yield running


def test_plain_http_on_a_kept_alive_connection(worker, target):
    with httpx.Client(proxy=worker.proxy_url("shop-country-us")) as http:
        answers = [http.get(target.url("/echo")) for _ in range(6)]
    for answer in answers:
        assert answer.status_code == 200
        seen = answer.json()
        assert "proxy-authorization" not in seen["headers"]  # neither ours nor tinyproxy's
        assert seen["target"] == "/echo"
    assert "x-gateway-session" not in answers[0].headers


def test_chunked_answers_and_request_bodies(worker, target):
    with httpx.Client(proxy=worker.proxy_url("shop-country-us")) as http:
        assert http.get(target.url("/chunked")).text == "hello world"
        posted = http.post(target.url("/echo"), content=b"x" * 100_000)
        assert posted.json()["body"] == 100_000
        small = http.post(target.url("/echo"), content=b"y" * 10)
        assert small.json()["body"] == 10
        assert http.get(target.url("/bytes/300000")).content == b"x" * 300_000


def test_connect_to_an_https_target(worker, tls_target):
    with httpx.Client(
        proxy=worker.proxy_url("shop-country-us"), verify=tls_target.client_context()
    ) as http:
        answer = http.get(tls_target.url("/echo"))
    assert answer.status_code == 200
    assert answer.json()["method"] == "GET"


def test_through_a_socks5_upstream(worker, target, tls_target):
    url = worker.proxy_url("shop-protocol-socks5")
    with httpx.Client(proxy=url) as http:
        assert http.get(target.url("/echo")).status_code == 200
    with httpx.Client(proxy=url, verify=tls_target.client_context()) as http:
        assert http.get(tls_target.url("/echo")).status_code == 200


def test_curl_through_the_http_and_the_socks5_listeners(worker, target, tls_target):
    done = subprocess.run(
        ["curl", "-sS", "-x", f"http://127.0.0.1:{worker.http_port}",
         "--proxy-user", f"shop:{API_KEY}", target.url("/echo")],
        capture_output=True, timeout=20, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout)["method"] == "GET"
    done = subprocess.run(
        ["curl", "-sS", "--cacert", str(tls_target.cert), "--socks5-hostname",
         f"127.0.0.1:{worker.socks_port}", "--proxy-user", f"shop-cc-de:{API_KEY}",
         tls_target.url("/echo")],
        capture_output=True, timeout=20, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout)["method"] == "GET"


def test_a_sticky_session_keeps_its_proxy(worker, target):
    with httpx.Client(proxy=worker.proxy_url("shop-country-us-session-abc1")) as http:
        decisions = [http.get(target.url("/echo")).headers["x-gateway-session"] for _ in range(4)]
    assert decisions == ["new", "hit", "hit", "hit"]


@pytest.mark.parametrize(
    ("username", "key", "status", "reason"),
    [
        ("shop", "wrong-key", 407, "wrong API key"),
        ("nobody", API_KEY, 407, "no client of that name"),
        ("shop-colour-red", API_KEY, 407, "unknown parameter 'colour'"),
        ("eu-only-country-us", API_KEY, 403, "may not use"),
        ("shop-country-jp", API_KEY, 503, "no proxy matching"),
    ],
)
def test_refusals_say_why(worker, target, username, key, status, reason):
    with httpx.Client(proxy=worker.proxy_url(username, key)) as http:
        answer = http.get(target.url("/echo"))
    assert answer.status_code == status
    assert reason in answer.text
    if status == 407:
        assert answer.headers["proxy-authenticate"].startswith("Basic")


def test_no_credentials_is_407_and_mail_ports_are_403(worker):
    with httpx.Client(proxy=f"http://127.0.0.1:{worker.http_port}") as http:
        assert http.get("http://127.0.0.1:9/").status_code == 407
    with httpx.Client(proxy=worker.proxy_url("shop")) as http:
        refused = http.get("http://127.0.0.1:25/")
    assert refused.status_code == 403 and "port 25" in refused.text


def test_an_upstream_refusing_the_workers_login_is_a_502(worker, tls_target):
    """tinyproxy answers a wrong login with 401 to CONNECT; the client, whose own login was
    right, is told the upstream failed."""
    context = tls_target.client_context()
    with (
        httpx.Client(proxy=worker.proxy_url("tester"), verify=context) as http,
        pytest.raises(httpx.ProxyError, match="502"),
    ):
        http.get(tls_target.url("/echo"))


def test_kept_upstream_connections_the_upstream_dropped_cause_no_error(tmp_path, target):
    """tinyproxy restarted between requests drops every kept connection; the next requests
    go on new ones, none answered with an error."""
    with Tinyproxy(tmp_path, "gwuser", "gwpass1") as upstream, LocalWorker() as worker:
        worker.install(
            snapshot(1, (proxy("p1", upstream.port),), (Credential("c1", "gwuser", "gwpass1"),),
                     (client("shop"),))
        )  # fmt: skip
        with httpx.Client(proxy=worker.proxy_url("shop")) as http:
            for _ in range(3):
                assert [http.get(target.url()).status_code for _ in range(5)] == [200] * 5
                assert worker.call(lambda: len(worker.gateway.kept)) == 1
                upstream.stop()
                upstream.start()


@pytest.mark.parametrize("username", ["shop-protocol-http", "shop-protocol-socks5"])
def test_the_target_sees_the_urls_host_not_the_clients_host_header(worker, target, username):
    with httpx.Client(proxy=worker.proxy_url(username)) as http:
        seen = http.get(target.url(), headers={"Host": "evil.example"}).json()
    assert seen["headers"]["host"] == f"127.0.0.1:{target.port}"
