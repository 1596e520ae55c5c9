"""One fetch end to end (activity/filling.py) on both pools: a vendor answering over HTTP with
real local forward proxies (tinyproxy, microsocks) in Webshare's shape, the proxies put in the
pool, checked through themselves, marked, and extracted with their passwords."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
import redis

from activity import ManualClock, MemoryPool, PoolOptions, RedisPool
from activity.checker import CheckTarget
from activity.credentials import FetchCredentials, NoCredentials
from activity.errors import StoreUnavailable
from activity.filling import FetchInterrupted, FillReport, UpstreamFill, fill, intake_timeout
from activity.providers.entries import DropReason
from activity.providers.errors import MalformedResponse, NextStep, VendorError
from activity.providers.fetch import (
    CompressedAnswer,
    FetchFailed,
    FetchLimits,
    HttpStatusError,
    ResponseTooLarge,
)
from activity.providers.presets import PRESETS, UpstreamOptions
from activity.reconciler import UpstreamTarget
from activity.types import ExtractFilters, ExtractMode, ExtractRequest, Outcome, OutcomeReport
from tests.harness.check_target import closed_port
from tests.harness.faulty_pool import StoreFailsOnSecondWrite
from tests.harness.vendor_server import vendor_server
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = pytest.mark.slow


@pytest.fixture(params=["memory", "redis"])
def pool_of(request):
    """A pool whose resolver is the fetch's credentials store, as the fetch worker's is."""
    credentials = FetchCredentials(NoCredentials())
    clock = ManualClock()
    if request.param == "memory":
        return MemoryPool(PoolOptions(), clock=clock, credentials=credentials), credentials, clock
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=10)
    request.addfinalizer(client.close)
    options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}")
    pool = RedisPool(client, options, clock=clock, credentials=credentials)
    request.addfinalizer(pool.close)
    return pool, credentials, clock


def plan(url: str, protocol: str, check: CheckTarget | None) -> UpstreamFill:
    options = UpstreamOptions(protocol, timedelta(minutes=5), 100, allow_local_hosts=True)
    return UpstreamFill(
        target=UpstreamTarget(f"demo-{protocol}", 10, timedelta(seconds=5)),
        url=url,
        format=PRESETS["webshare_list"].format(options),
        count_param="page_size",
        check=check,
        check_timeout=2,
    )


def test_fetched_proxies_are_checked_through_themselves_and_only_working_ones_handed_out(
    pool_of, proxies, target
):
    pool, credentials, clock = pool_of
    http, socks = proxies
    dead = closed_port()
    check = CheckTarget(target.url())
    reports = []
    for protocol, listed in (
        ("http", webshare((http.port, "demo1", "pw1"), (dead, "demo1", "pw1"),
                          (http.port, "demo9", "wrong"))),
        ("socks5", webshare((socks.port, "demo2", "pw2"))),
    ):  # fmt: skip
        with vendor(listed) as url:
            reports.append(fill(clock.now(), plan(url, protocol, check), pool=pool,
                                credentials=credentials, clock=clock,
                                operation_id=f"fill-{protocol}", proxy_budget=100))  # fmt: skip
    assert reports[0].reconcile.inserted == 3 and reports[0].checked == 3
    assert reports[0].states == {"available": 1, "unhealthy": 2}  # refused, wrong password
    assert reports[1].states == {"available": 1}
    assert credentials.held() == 0  # every fetched password forgotten once written
    taken = pool.extract(ExtractRequest(client_id="c1", count=10, mode=ExtractMode.PARTIAL))
    got = sorted((p.protocol, p.port, p.username, p.password) for p in taken.proxies)
    assert got == [("http", http.port, "demo1", "pw1"), ("socks5", socks.port, "demo2", "pw2")]
    # An extracted proxy forwards a request to a loopback target.
    before = target.requests
    [through] = [p for p in taken.proxies if p.protocol == "http"]
    proxy_url = f"http://{through.username}:{through.password}@127.0.0.1:{through.port}"
    with httpx.Client(proxy=proxy_url) as via:
        assert via.get(target.url()).status_code == 204
    assert target.requests == before + 1


def test_a_trusted_provider_skips_the_probe(pool_of):
    pool, credentials, clock = pool_of
    with vendor(webshare((closed_port(), "x", "y"))) as url:
        report = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                      clock=clock, operation_id="op", proxy_budget=100)  # fmt: skip
    assert (report.checked, report.states) == (0, {"available": 1})
    [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
    assert proxy.username == "x"


def test_clients_failures_outweigh_a_trusted_provider_but_not_a_passing_check(
    pool_of, proxies, target
):
    """Passive health: an exit two clients timed out on comes back SUSPECT; a trusted provider
    does not make it AVAILABLE again, a check that passes does."""
    pool, credentials, clock = pool_of
    http, _ = proxies
    listed = webshare((http.port, "demo1", "pw1"))  # Webshare's list: 5 minutes to live

    def trusted_fill(url: str, operation_id: str) -> FillReport:
        return fill(clock.now(), plan(url, "http", None), pool=pool,
                    credentials=credentials, clock=clock,
                    operation_id=operation_id, proxy_budget=100)  # fmt: skip

    for turn in range(2):
        with vendor(listed) as url:
            trusted_fill(url, f"op{turn}")
        [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
        pool.report_outcome(OutcomeReport("c1", proxy.proxy_id, Outcome.TIMEOUT, clock.now()))
        clock.advance(timedelta(minutes=6))  # expired: the vendor hands it out anew
    with vendor(listed) as url:
        trusted = trusted_fill(url, "op2")
        assert (trusted.reconcile.suspect, trusted.health.ignored) == (1, 1)
        assert pool.extract(ExtractRequest(client_id="c1", count=1)).proxies == ()
        clock.advance(timedelta(minutes=6))
        checked = fill(clock.now(), plan(url, "http", CheckTarget(target.url())), pool=pool,
                       credentials=credentials, clock=clock, operation_id="op3",
                       proxy_budget=100)  # fmt: skip
    assert (checked.reconcile.suspect, checked.states) == (1, {"available": 1})
    assert len(pool.extract(ExtractRequest(client_id="c1", count=1)).proxies) == 1


def test_a_full_upstream_and_a_spent_budget_ask_the_vendor_nothing(pool_of, proxies):
    pool, credentials, clock = pool_of
    http, _ = proxies
    listed = webshare(*[(http.port, f"demo{n}", "pw") for n in range(10)])
    with vendor(listed) as url:
        first = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                     clock=clock, operation_id="op1", proxy_budget=100)  # fmt: skip
        assert first.reconcile.inserted == 10 and len(url.asked) == 1  # max_size 10: full
        full = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                    clock=clock, operation_id="op2", proxy_budget=100)  # fmt: skip
        assert (full.reconcile.deficit, full.reconcile.asked) == (0, 0) and full.health is None
        assert len(url.asked) == 1
    other = UpstreamTarget("other", 10, timedelta(seconds=5))
    with vendor(listed) as url:
        spent = fill(clock.now(), replace(plan(url, "http", None), target=other), pool=pool,
                     credentials=credentials, clock=clock, operation_id="op3",
                     proxy_budget=100, take_budget=lambda n: 0)  # fmt: skip
        assert spent.reconcile.asked == 0 and url.asked == []


def test_a_response_ten_times_max_size_fills_to_max_size_only(pool_of):
    pool, credentials, clock = pool_of
    many = webshare(*[(20_000 + n, f"u{n}", f"p{n}") for n in range(100)])
    with vendor(many) as url:
        report = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                      clock=clock, operation_id="op", proxy_budget=1000)  # fmt: skip
    assert (report.reconcile.asked, report.reconcile.received) == (10, 100)
    assert report.reconcile.inserted == 10 and report.reconcile.beyond_ask == 90
    assert pool.upstream_inventory("demo-http").managed == 10
    assert credentials.held() == 0


@pytest.mark.parametrize(
    ("path", "error", "step"),
    [
        ("/declared-huge", ResponseTooLarge, NextStep.RETRY_LATER),  # 200 MB declared
        ("/trickle", FetchFailed, NextStep.RETRY_LATER),  # a byte every 0.1 s
        ("/status/500", HttpStatusError, NextStep.RETRY_LATER),
        ("/status/429", HttpStatusError, NextStep.BACK_OFF),
        ("/ok", MalformedResponse, NextStep.RETRY_LATER),  # JSON, not Webshare's shape
        ("/gzip", CompressedAnswer, NextStep.RETRY_LATER),
    ],
)
def test_vendor_faults_are_typed_bounded_and_write_nothing(pool_of, path, error, step):
    pool, credentials, clock = pool_of
    limits = FetchLimits(total_timeout=1.0, read_timeout=1.0)
    fast = replace(plan("http://x/", "http", None), limits=limits)
    with vendor_server() as base:
        started = time.monotonic()
        with pytest.raises(error) as caught:
            fill(clock.now(), replace(fast, url=base + path), pool=pool, credentials=credentials,
                 clock=clock, operation_id="op", proxy_budget=100)  # fmt: skip
        assert time.monotonic() - started < 5
    assert caught.value.next_step is step
    assert pool.upstream_inventory("demo-http").managed == 0


def test_a_vendor_saying_the_balance_is_gone_is_a_typed_refusal_to_disable(pool_of):
    pool, credentials, clock = pool_of
    options = UpstreamOptions("http", timedelta(minutes=5), 100, allow_local_hosts=True)
    refusing = {"code": -16, "msg": "订单已过期", "data": {}}  # Kuaidaili: order expired
    with vendor(refusing) as url:
        kdl = replace(plan(url, "http", None),
                      format=PRESETS["kuaidaili_getdps_json"].format(options))  # fmt: skip
        with pytest.raises(VendorError) as caught:
            fill(clock.now(), kdl, pool=pool, credentials=credentials,
                 clock=clock, operation_id="op", proxy_budget=100)  # fmt: skip
    assert (caught.value.vendor_code, caught.value.next_step) == ("-16", NextStep.DISABLE)
    assert pool.upstream_inventory("demo-http").managed == 0


def test_entries_with_bad_ports_or_hosts_are_dropped_by_reason_and_the_rest_taken(pool_of):
    pool, credentials, clock = pool_of
    listed = webshare((20_001, "a", "b"), (0, "c", "d"), (70_000, "e", "f"))
    bad_host = {"id": "x", "username": "g", "password": "h", "proxy_address": "not a host",
                "port": 80, "valid": True}  # fmt: skip
    listed["results"].append(bad_host)
    with vendor(listed) as url:
        report = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                      clock=clock, operation_id="op", proxy_budget=100)  # fmt: skip
    assert report.reconcile.inserted == 1
    assert sum(report.reconcile.dropped.values()) == 3
    assert set(report.reconcile.dropped) <= {DropReason.BAD_PORT, DropReason.BAD_HOST}


def test_a_proxy_that_cannot_be_checked_as_listed_is_unhealthy_not_a_failed_fetch(
    pool_of, proxies, target
):
    """A SOCKS5 login over 255 bytes passes the parser but no SOCKS5 handshake can carry it."""
    pool, credentials, clock = pool_of
    _, socks = proxies
    listed = webshare((socks.port, "demo2", "pw2"), (socks.port, "u" * 256, "pw"))
    with vendor(listed) as url:
        report = fill(clock.now(), plan(url, "socks5", CheckTarget(target.url())), pool=pool,
                      credentials=credentials, clock=clock, operation_id="op",
                      proxy_budget=100)  # fmt: skip
    assert report.reconcile.inserted == 2
    assert report.states == {"available": 1, "unhealthy": 1} and report.checked == 1
    assert credentials.held() == 0


@pytest.mark.parametrize(
    ("configured", "remaining", "expected"),
    [(5.0, 30.0, 1.5), (5.0, 600.0, 5.0), (5.0, 10.0, 1.0), (0.5, 10.0, 0.5), (2.0, 60.0, 2.0)],
)
def test_an_intake_check_costs_at_most_a_twentieth_of_a_short_life(configured, remaining, expected):
    """research/providers.md 5.2: a 30 s proxy gets 1.5 s, not the upstream's 5 s."""
    assert intake_timeout(configured, remaining) == pytest.approx(expected)


def proxy_seller(ports: list[int], date_end: str) -> dict:
    items = [
        {"id": str(n), "ip": "127.0.0.1", "protocol": "HTTP", "port_http": port,
         "port_socks": port + 1, "login": f"l{n}", "password": "pw", "country": "DE",
         "date_end": date_end}
        for n, port in enumerate(ports)
    ]  # fmt: skip
    return {"status": "success", "data": {"items": items}, "errors": []}


def test_proxies_that_live_for_weeks_fill_the_pool_and_each_listing_renews_them(pool_of):
    """Proxy-Seller's 30-day proxies: each lives in the pool at most its maximum (a day, less
    a minute for clocks) from the fetch that listed it, and the next listing renews it
    (before: every one was refused as "rejected" and the upstream stayed at 0)."""
    pool, credentials, clock = pool_of
    ends = (clock.now() + timedelta(days=30)).strftime("%d.%m.%Y")
    options = UpstreamOptions("http", timedelta(minutes=5), 100, allow_local_hosts=True)
    seller = replace(plan("http://x/", "http", None),
                     format=PRESETS["proxy_seller_list"].format(options))  # fmt: skip
    lifetime = PoolOptions().max_proxy_ttl - timedelta(minutes=1)
    with vendor(proxy_seller([20_001, 20_011, 20_021], ends)) as url:
        first = fill(clock.now(), replace(seller, url=url), pool=pool, credentials=credentials,
                     clock=clock, operation_id="op1", proxy_budget=100)  # fmt: skip
        assert (first.reconcile.inserted, first.reconcile.rejected) == (3, 0)
        [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
        assert proxy.expires_at == clock.now() + lifetime
        clock.advance(timedelta(hours=20))
        again = fill(clock.now(), replace(seller, url=url), pool=pool, credentials=credentials,
                     clock=clock, operation_id="op2", proxy_budget=100)  # fmt: skip
    assert again.reconcile.refreshed == 2  # the extracted one is the client's now
    clock.advance(timedelta(hours=20))  # 40 h after the first fetch, 20 h after the renewal
    assert pool.upstream_inventory("demo-http").managed == 2
    assert len(pool.extract(ExtractRequest(client_id="c2", count=5,
                                           mode=ExtractMode.PARTIAL)).proxies) == 2  # fmt: skip


def test_labels_as_vendors_send_them_fill_the_pool_and_match_in_any_case(pool_of):
    """Webshare's country_code with a space and Zhima's Chinese city and carrier (``cs=1``,
    ``ys=1``): before, one such entry failed the whole fetch as invalid_batch."""
    from zoneinfo import ZoneInfo

    pool, credentials, clock = pool_of
    listed = webshare((20_001, "a", "b"), (20_002, "c", "d"))
    listed["results"][1]["country_code"] = "United  States"  # as sent, two spaces
    with vendor(listed) as url:
        report = fill(clock.now(), plan(url, "http", None), pool=pool, credentials=credentials,
                      clock=clock, operation_id="ws", proxy_budget=100)  # fmt: skip
    assert report.reconcile.inserted == 2
    expires = (clock.now() + timedelta(minutes=3)).astimezone(ZoneInfo("Asia/Shanghai"))
    zhima = {"code": 0, "success": True, "msg": "0", "data": [
        {"ip": "127.0.0.1", "port": 20_003, "expire_time": f"{expires:%Y-%m-%d %H:%M:%S}",
         "city": "广东省广州市", "isp": "电信"},
    ]}  # fmt: skip
    options = UpstreamOptions("http", timedelta(minutes=5), 100, allow_local_hosts=True)
    with vendor(zhima) as url:
        zhima_plan = replace(plan(url, "http", None), url=url,
                             format=PRESETS["zhima_getip_json"].format(options))  # fmt: skip
        report = fill(clock.now(), zhima_plan, pool=pool, credentials=credentials, clock=clock,
                      operation_id="zm", proxy_budget=100)  # fmt: skip
    assert report.reconcile.inserted == 1
    [us] = pool.extract(ExtractRequest(client_id="c1", count=5, mode=ExtractMode.PARTIAL,
                                       filters=ExtractFilters(region="us"))).proxies  # fmt: skip
    [spaced] = pool.extract(ExtractRequest(client_id="c1", count=5, mode=ExtractMode.PARTIAL,
                                           filters=ExtractFilters(region="UNITED STATES"))
                            ).proxies  # fmt: skip
    [gz] = pool.extract(ExtractRequest(client_id="c1", count=5, mode=ExtractMode.PARTIAL,
                                       filters=ExtractFilters(region="广东省广州市",
                                                              carrier="电信"))).proxies  # fmt: skip
    assert (us.region, spaced.region, gz.region, gz.carrier) == (
        "US",
        "United States",
        "广东省广州市",
        "电信",
    )


def test_only_what_the_pool_took_in_is_checked_and_counted(pool_of, proxies, target):
    """Before: a fetch probed and counted every proxy it wrote, the ones the pool refused
    (another upstream's exit) and refreshed (already checked) too: "100% of N checks passed"
    with none of them taken."""
    pool, credentials, clock = pool_of
    http, _ = proxies
    listed = webshare((http.port, "demo1", "pw1"))
    check = CheckTarget(target.url())
    other = UpstreamTarget("other", 10, timedelta(seconds=5))

    def fetch(operation_id: str, upstream: UpstreamTarget | None = None) -> FillReport:
        fill_plan = plan(url, "http", check)
        if upstream is not None:
            fill_plan = replace(fill_plan, target=upstream)
        return fill(clock.now(), fill_plan, pool=pool, credentials=credentials, clock=clock,
                    operation_id=operation_id, proxy_budget=100)  # fmt: skip

    with vendor(listed) as url:
        first = fetch("op1")
        refused = fetch("op2", other)  # the same exit, held by demo-http
        refreshed = fetch("op3")
    assert (first.reconcile.inserted, first.checked, first.states) == (1, 1, {"available": 1})
    assert (refused.reconcile.conflicts, refused.checked, refused.states) == (1, 0, {})
    assert (refreshed.reconcile.refreshed, refreshed.checked, refreshed.states) == (1, 0, {})


def test_a_fetch_the_store_stops_half_way_checks_what_it_wrote_and_says_so(pool_of):
    """600 proxies, the store failing at the second batch of 500: the first 500 are in the
    pool, and made available (a trusted provider) before the failure is raised, with a report
    that says so. Before: the failure propagated with 500 proxies written and left unchecked."""
    pool, credentials, clock = pool_of
    options = UpstreamOptions("http", timedelta(minutes=5), 1_000, allow_local_hosts=True)
    many = webshare(*[(20_000 + n, f"u{n}", "pw") for n in range(600)])
    with vendor(many) as url:
        big = replace(plan(url, "http", None), format=PRESETS["webshare_list"].format(options),
                      target=UpstreamTarget("demo-http", 1_000, timedelta(seconds=5)))  # fmt: skip
        with pytest.raises(FetchInterrupted) as caught:
            fill(clock.now(), big, pool=StoreFailsOnSecondWrite(pool), credentials=credentials,
                 clock=clock, operation_id="op", proxy_budget=1_000)  # fmt: skip
    report = caught.value.report
    assert isinstance(caught.value.cause, StoreUnavailable)
    assert (report.reconcile.inserted, report.states) == (500, {"available": 500})
    assert pool.upstream_inventory("demo-http").available_slots == 500
    assert credentials.held() == 0  # every fetched password forgotten all the same
