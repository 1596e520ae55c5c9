"""The checker through real forward proxies: Debian's tinyproxy (HTTP, Basic auth) and
microsocks (SOCKS5, user/password), to a real check URL server on loopback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from activity.checker import (
    CheckTarget,
    Failure,
    ProxyEndpoint,
    check_all,
    health_of,
    probe,
    probe_all,
)
from activity.types import ProxyState
from pool_admin.forward_proxies import Microsocks, Tinyproxy
from tests.harness.check_target import CheckTargetServer, check_target

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls_target() -> Iterator[CheckTargetServer]:
    with check_target(tls=True) as server:
        yield server


@pytest.fixture(scope="module")
def http_proxy(tmp_path_factory) -> Iterator[Tinyproxy]:
    with Tinyproxy(tmp_path_factory.mktemp("tinyproxy"), "checker", "s3cret") as proxy:
        yield proxy  # type: ignore[misc]


@pytest.fixture(scope="module")
def socks_proxy(tmp_path_factory) -> Iterator[Microsocks]:
    with Microsocks(tmp_path_factory.mktemp("microsocks"), "checker", "s3cret") as proxy:
        yield proxy  # type: ignore[misc]


def endpoint(proxy, password: str = "s3cret", username: str = "checker") -> ProxyEndpoint:
    return ProxyEndpoint("127.0.0.1", proxy.port, proxy.protocol, username, password)


def check(proxy: ProxyEndpoint, target: CheckTarget, timeout: float = 5):
    return asyncio.run(probe(proxy, target, timeout))


@pytest.mark.parametrize("connect", [False, True])
def test_an_http_proxy_passes_by_absolute_get_and_by_connect(http_proxy, target, connect):
    before = target.requests
    result = check(endpoint(http_proxy), CheckTarget(target.url(), connect=connect))
    assert result.ok and result.status == 204 and result.failure is None
    assert result.latency_ms is not None and 0 <= result.latency_ms < 5000
    assert target.requests == before + 1  # it really reached the target


def test_a_socks5_proxy_passes_with_its_credentials(socks_proxy, target):
    result = check(endpoint(socks_proxy), CheckTarget(target.url()))
    assert result.ok and result.status == 204


@pytest.mark.parametrize("kind", ["http", "socks5"])
def test_https_goes_through_the_tunnel_and_is_verified(http_proxy, socks_proxy, tls_target, kind):
    proxy = endpoint(http_proxy if kind == "http" else socks_proxy)
    trusted = CheckTarget(tls_target.url(), tls=tls_target.tls_client_context())
    assert check(proxy, trusted).ok
    # The default trust store does not know the self-signed certificate: a TLS failure.
    assert check(proxy, CheckTarget(tls_target.url())).failure is Failure.TLS


@pytest.mark.parametrize("kind", ["http", "http-connect", "socks5"])
def test_wrong_credentials_are_an_auth_failure(http_proxy, socks_proxy, target, kind):
    proxy = endpoint(socks_proxy if kind == "socks5" else http_proxy, password="wrong")
    result = check(proxy, CheckTarget(target.url(), connect=kind == "http-connect"))
    assert (result.ok, result.failure) == (False, Failure.AUTH)
    missing = ProxyEndpoint("127.0.0.1", proxy.port, proxy.protocol)
    no_credentials = check(missing, CheckTarget(target.url(), connect=kind == "http-connect"))
    assert no_credentials.failure is Failure.AUTH


def test_a_proxy_that_refuses_connections_is_refused_and_unhealthy(target):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # bound, never listening: connections refused
        result = check(ProxyEndpoint("127.0.0.1", closed_port, "http"), CheckTarget(target.url()))
    assert result.failure is Failure.REFUSED and result.latency_ms is None
    update = health_of("p1", result, datetime.now(UTC), ProxyState.FETCHED)
    assert update.state is ProxyState.UNHEALTHY and update.failure_reason == "check_refused"


def test_a_target_that_never_answers_times_out_within_the_deadline(http_proxy, socks_proxy, target):
    for proxy in (endpoint(http_proxy), endpoint(socks_proxy)):
        started = asyncio.run(_timed(probe(proxy, CheckTarget(target.url("/slow")), 0.5)))
        result, took = started
        assert result.failure is Failure.TIMEOUT and 0.4 < took < 2


async def _timed(call):
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await call
    return result, loop.time() - started


def test_the_target_status_decides_and_an_unreachable_target_is_the_proxys_error(
    http_proxy, socks_proxy, target
):
    assert check(endpoint(http_proxy), CheckTarget(target.url("/status/404"))).failure is (
        Failure.STATUS
    )
    ok_404 = CheckTarget(target.url("/status/404"), expect=frozenset({404}))
    assert check(endpoint(socks_proxy), ok_404).ok
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}/check"
        for proxy, connect in ((http_proxy, False), (http_proxy, True), (socks_proxy, False)):
            result = check(endpoint(proxy), CheckTarget(nowhere, connect=connect))
            assert result.failure is Failure.PROXY_ERROR, (proxy.protocol, connect, result)


def test_a_server_that_is_not_a_proxy_is_a_protocol_failure(target):
    # The check target itself, spoken to as a SOCKS5 proxy: an HTTP server's bytes back.
    result = check(ProxyEndpoint("127.0.0.1", target.port, "socks5"), CheckTarget(target.url()),
                   timeout=2)  # fmt: skip
    assert result.failure in (Failure.PROTOCOL, Failure.TIMEOUT)


def test_many_checks_at_bounded_concurrency_keep_their_order(http_proxy, socks_proxy, target):
    good = [endpoint(http_proxy), endpoint(socks_proxy)] * 50
    bad = [endpoint(http_proxy, password="wrong")] * 5
    results = asyncio.run(probe_all(good + bad, CheckTarget(target.url()), concurrency=20,
                                    timeout=5))  # fmt: skip
    assert [r.ok for r in results] == [True] * 100 + [False] * 5


def test_a_first_soft_failure_is_suspect_and_a_second_unhealthy(http_proxy, target):
    now = datetime.now(UTC)
    result = check(endpoint(http_proxy), CheckTarget(target.url("/status/500")))
    first = health_of("p1", result, now, ProxyState.AVAILABLE)
    assert first.state is ProxyState.SUSPECT and first.failure_reason == "check_proxy_error_500"
    assert health_of("p1", result, now, ProxyState.SUSPECT).state is ProxyState.UNHEALTHY
    passed = check(endpoint(http_proxy), CheckTarget(target.url()))
    back = health_of("p1", passed, now, ProxyState.SUSPECT)
    assert back.state is ProxyState.AVAILABLE and back.latency_ms == passed.latency_ms


def test_the_password_is_not_in_the_endpoint_repr_or_a_result(http_proxy, target):
    proxy = endpoint(http_proxy, password="wrong-but-secret")
    assert "wrong-but-secret" not in repr(proxy)
    assert "wrong-but-secret" not in repr(check(proxy, CheckTarget(target.url())))


@pytest.mark.parametrize(
    "bad",
    [
        lambda: ProxyEndpoint("127.0.0.1", 0, "http"),
        lambda: ProxyEndpoint("127.0.0.1", 80, "ftp"),
        lambda: ProxyEndpoint("127.0.0.1", 80, "http", "user", None),
        lambda: ProxyEndpoint("127.0.0.1", 80, "socks5", "u" * 256, "p"),
        lambda: CheckTarget("ftp://127.0.0.1/"),
        lambda: CheckTarget("http://user:pw@127.0.0.1/"),
        lambda: asyncio.run(
            probe_all([], CheckTarget("http://127.0.0.1/"), concurrency=0, timeout=1)
        ),
    ],
)
def test_bad_input_is_refused(bad):
    with pytest.raises(ValueError):
        bad()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_checks_run_to_their_end_on_either_loop(loop, tmp_path):
    """check_all: the checks on an event loop of their own, uvloop by default."""
    with Tinyproxy(tmp_path, "demo1", "pw1") as proxy, check_target() as target:
        endpoints = [ProxyEndpoint("127.0.0.1", proxy.port, "http", "demo1", "pw1"),
                     ProxyEndpoint("127.0.0.1", proxy.port, "http", "demo1", "nope")]  # fmt: skip
        results = check_all(endpoints, CheckTarget(target.url()), concurrency=2, timeout=5,
                            loop=loop)  # fmt: skip
    assert [r.ok for r in results] == [True, False]
    with pytest.raises(ValueError, match="loop must be one of"):
        check_all(endpoints, CheckTarget(target.url()), concurrency=2, timeout=5, loop="trio")


@pytest.mark.parametrize("peer", ["169.254.169.254", "0.0.0.0", "::ffff:169.254.169.254"])
def test_a_name_that_leads_where_no_proxy_may_be_gets_no_request(http_proxy, target, monkeypatch,
                                                                 peer):  # fmt: skip
    """A vendor's host name can resolve to the cloud metadata address: the connection tells
    where the name led, and nothing is sent there (UNHEALTHY at once). The connection here is
    to a real local proxy whose address the socket reports as ``peer``."""
    real_open = asyncio.open_connection

    async def leads_to_peer(*args, **kwargs):
        reader, writer = await real_open(*args, **kwargs)
        original = writer.get_extra_info
        writer.get_extra_info = lambda name, default=None: (  # type: ignore[method-assign]
            (peer, 80) if name == "peername" else original(name, default)
        )
        return reader, writer

    monkeypatch.setattr(asyncio, "open_connection", leads_to_peer)
    before = target.requests
    result = check(endpoint(http_proxy), CheckTarget(target.url()))
    assert (result.ok, result.failure) == (False, Failure.ADDRESS)
    assert target.requests == before  # the proxy was asked nothing
    now = datetime.now(UTC)
    assert health_of("p1", result, now, ProxyState.FETCHED).state is ProxyState.UNHEALTHY
