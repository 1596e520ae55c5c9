"""One fetch end to end (activity/fetch_job.py: ``FetchJob.run``, the path the fetch task
takes) on both pools: a vendor answering over HTTP with real local forward proxies (tinyproxy,
microsocks) in Webshare's shape, the proxies put in the pool, checked through themselves,
marked, and extracted with their passwords; the claim finished as the outcome says."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
import redis

from activity import ManualClock, MemoryPool, PoolOptions, RedisPool
from activity.check_rounds import CheckTally, round_timeout
from activity.checker import CheckTarget
from activity.credentials import FetchCredentials, NoCredentials
from activity.errors import LeaseLost, StoreUnavailable
from activity.fetch_job import FetchInterrupted, FetchJob, FetchPlan, FetchReport
from activity.providers.entries import DropReason
from activity.providers.errors import MalformedResponse, NextStep, ProviderError, VendorError
from activity.providers.fetch import (
    CompressedAnswer,
    FetchFailed,
    FetchLimits,
    HttpStatusError,
    ResponseTooLarge,
)
from activity.providers.presets import PRESETS, UpstreamOptions
from activity.reconciler import UpstreamTarget
from activity.scheduler import AccountLimits, Claim, MemoryScheduler
from activity.types import ExtractFilters, ExtractMode, ExtractRequest, Outcome, OutcomeReport
from tests.harness.check_target import closed_port
from tests.harness.faulty_pool import StoreFailsAfter
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


LEASE = timedelta(minutes=2)
BUDGET = AccountLimits(proxies_per_minute=1_000)


def run(
    pool_of,
    fetch_plan: FetchPlan,
    *,
    pool=None,
    spent: bool = False,
    limits: AccountLimits = BUDGET,
    scheduler: MemoryScheduler | None = None,
) -> FetchReport:
    """One claimed fetch, as the fetch task runs it: the upstream claimed from a scheduler (its
    own unless given; ``spent``: its account's proxy budget for the minute is spent), the job
    run."""
    base, credentials, clock = pool_of
    scheduler = scheduler or MemoryScheduler()
    scheduler.schedule("acme", fetch_plan.target.upstream_id, clock.now())
    claim = scheduler.claim(clock.now(), "acme", limits, LEASE)
    assert isinstance(claim, Claim)
    if spent:
        scheduler.take_proxies(clock.now(), claim, limits, 1_000)
    job = FetchJob(fetch_plan, pool=pool or base, scheduler=scheduler, claim=claim,
                   limits=limits, lease=LEASE, handover=credentials, clock=clock)  # fmt: skip
    return job.run()


def plan(url: str, protocol: str, check: CheckTarget | None) -> FetchPlan:
    options = UpstreamOptions(protocol, timedelta(minutes=5), 100, allow_local_hosts=True)
    return FetchPlan(
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
    pool, credentials, _clock = pool_of
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
            reports.append(run(pool_of, plan(url, protocol, check)))
    assert reports[0].reconcile.inserted == 3 and reports[0].checks.checked == 3
    assert reports[0].checks.states == {"available": 1, "unhealthy": 2}  # refused, wrong password
    assert reports[1].checks.states == {"available": 1}
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
    pool, _credentials, _clock = pool_of
    with vendor(webshare((closed_port(), "x", "y"))) as url:
        report = run(pool_of, plan(url, "http", None))
    assert (report.checks.checked, report.checks.states) == (0, {"available": 1})
    [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
    assert proxy.username == "x"


def test_clients_failures_outweigh_a_trusted_provider_but_not_a_passing_check(
    pool_of, proxies, target
):
    """Passive health: an exit two clients timed out on comes back SUSPECT; a trusted provider
    does not make it AVAILABLE again, a check that passes does."""
    pool, _credentials, clock = pool_of
    http, _ = proxies
    listed = webshare((http.port, "demo1", "pw1"))  # Webshare's list: 5 minutes to live

    def trusted_fill(url: str) -> FetchReport:
        return run(pool_of, plan(url, "http", None))

    for _turn in range(2):
        with vendor(listed) as url:
            trusted_fill(url)
        [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
        pool.report_outcome(OutcomeReport("c1", proxy.proxy_id, Outcome.TIMEOUT, clock.now()))
        clock.advance(timedelta(minutes=6))  # expired: the vendor hands it out anew
    with vendor(listed) as url:
        trusted = trusted_fill(url)
        assert (trusted.reconcile.suspect, trusted.checks.health.ignored) == (1, 1)
        assert pool.extract(ExtractRequest(client_id="c1", count=1)).proxies == ()
        clock.advance(timedelta(minutes=6))
        checked = run(pool_of, plan(url, "http", CheckTarget(target.url())))
    assert (checked.reconcile.suspect, checked.checks.states) == (1, {"available": 1})
    assert len(pool.extract(ExtractRequest(client_id="c1", count=1)).proxies) == 1


def test_a_full_upstream_and_a_spent_budget_ask_the_vendor_nothing(pool_of, proxies):
    _pool, _credentials, _clock = pool_of
    http, _ = proxies
    listed = webshare(*[(http.port, f"demo{n}", "pw") for n in range(10)])
    with vendor(listed) as url:
        first = run(pool_of, plan(url, "http", None))
        assert first.reconcile.inserted == 10 and len(url.asked) == 1  # max_size 10: full
        full = run(pool_of, plan(url, "http", None))
        assert (full.reconcile.deficit, full.reconcile.asked) == (
            0,
            0,
        ) and full.checks == CheckTally()
        assert len(url.asked) == 1
    other = UpstreamTarget("other", 10, timedelta(seconds=5))
    with vendor(listed) as url:
        spent = run(pool_of, replace(plan(url, "http", None), target=other), spent=True)
        assert spent.reconcile.asked == 0 and url.asked == []


def test_a_response_ten_times_max_size_fills_to_max_size_only(pool_of):
    pool, credentials, _clock = pool_of
    many = webshare(*[(20_000 + n, f"u{n}", f"p{n}") for n in range(100)])
    with vendor(many) as url:
        report = run(pool_of, plan(url, "http", None))
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
    pool, _credentials, _clock = pool_of
    limits = FetchLimits(total_timeout=1.0, read_timeout=1.0)
    fast = replace(plan("http://x/", "http", None), limits=limits)
    with vendor_server() as base:
        started = time.monotonic()
        with pytest.raises(error) as caught:
            run(pool_of, replace(fast, url=base + path))
        assert time.monotonic() - started < 5
    assert caught.value.next_step is step
    assert pool.upstream_inventory("demo-http").managed == 0


def test_a_vendor_saying_the_balance_is_gone_is_a_typed_refusal_to_disable(pool_of):
    pool, _credentials, _clock = pool_of
    options = UpstreamOptions("http", timedelta(minutes=5), 100, allow_local_hosts=True)
    refusing = {"code": -16, "msg": "订单已过期", "data": {}}  # Kuaidaili: order expired
    with vendor(refusing) as url:
        kdl = replace(plan(url, "http", None),
                      format=PRESETS["kuaidaili_getdps_json"].format(options))  # fmt: skip
        with pytest.raises(VendorError) as caught:
            run(pool_of, kdl)
    assert (caught.value.vendor_code, caught.value.next_step) == ("-16", NextStep.DISABLE)
    assert pool.upstream_inventory("demo-http").managed == 0


def test_entries_with_bad_ports_or_hosts_are_dropped_by_reason_and_the_rest_taken(pool_of):
    _pool, _credentials, _clock = pool_of
    listed = webshare((20_001, "a", "b"), (0, "c", "d"), (70_000, "e", "f"))
    bad_host = {"id": "x", "username": "g", "password": "h", "proxy_address": "not a host",
                "port": 80, "valid": True}  # fmt: skip
    listed["results"].append(bad_host)
    with vendor(listed) as url:
        report = run(pool_of, plan(url, "http", None))
    assert report.reconcile.inserted == 1
    assert sum(report.reconcile.dropped.values()) == 3
    assert set(report.reconcile.dropped) <= {DropReason.BAD_PORT, DropReason.BAD_HOST}


def test_a_proxy_that_cannot_be_checked_as_listed_is_unhealthy_not_a_failed_fetch(
    pool_of, proxies, target
):
    """A SOCKS5 login over 255 bytes passes the parser but no SOCKS5 handshake can carry it."""
    _pool, credentials, _clock = pool_of
    _, socks = proxies
    listed = webshare((socks.port, "demo2", "pw2"), (socks.port, "u" * 256, "pw"))
    with vendor(listed) as url:
        report = run(pool_of, plan(url, "socks5", CheckTarget(target.url())))
    assert report.reconcile.inserted == 2
    assert report.checks.states == {"available": 1, "unhealthy": 1} and report.checks.checked == 1
    assert credentials.held() == 0


@pytest.mark.parametrize(
    ("configured", "remaining", "expected"),
    [(5.0, 30.0, 1.5), (5.0, 600.0, 5.0), (5.0, 10.0, 1.0), (0.5, 10.0, 0.5), (2.0, 60.0, 2.0)],
)
def test_an_intake_check_costs_at_most_a_twentieth_of_a_short_life(configured, remaining, expected):
    """A check takes at most 5% of a short life: a 30 s proxy gets 1.5 s, not the upstream's 5 s."""
    assert round_timeout(configured, remaining) == pytest.approx(expected)


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
    pool, _credentials, clock = pool_of
    ends = (clock.now() + timedelta(days=30)).strftime("%d.%m.%Y")
    options = UpstreamOptions("http", timedelta(minutes=5), 100, allow_local_hosts=True)
    seller = replace(plan("http://x/", "http", None),
                     format=PRESETS["proxy_seller_list"].format(options))  # fmt: skip
    lifetime = PoolOptions().max_proxy_ttl - timedelta(minutes=1)
    with vendor(proxy_seller([20_001, 20_011, 20_021], ends)) as url:
        first = run(pool_of, replace(seller, url=url))
        assert (first.reconcile.inserted, first.reconcile.rejected) == (3, 0)
        [proxy] = pool.extract(ExtractRequest(client_id="c1", count=1)).proxies
        assert proxy.expires_at == clock.now() + lifetime
        clock.advance(timedelta(hours=20))
        again = run(pool_of, replace(seller, url=url))
    assert again.reconcile.refreshed == 2  # the extracted one is the client's now
    clock.advance(timedelta(hours=20))  # 40 h after the first fetch, 20 h after the renewal
    assert pool.upstream_inventory("demo-http").managed == 2
    assert len(pool.extract(ExtractRequest(client_id="c2", count=5,
                                           mode=ExtractMode.PARTIAL)).proxies) == 2  # fmt: skip


def test_labels_as_vendors_send_them_fill_the_pool_and_match_in_any_case(pool_of):
    """Webshare's country_code with a space and Zhima's Chinese city and carrier (``cs=1``,
    ``ys=1``): before, one such entry failed the whole fetch as invalid_batch."""
    from zoneinfo import ZoneInfo

    pool, _credentials, clock = pool_of
    listed = webshare((20_001, "a", "b"), (20_002, "c", "d"))
    listed["results"][1]["country_code"] = "United  States"  # as sent, two spaces
    with vendor(listed) as url:
        report = run(pool_of, plan(url, "http", None))
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
        report = run(pool_of, zhima_plan)
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
    _pool, _credentials, _clock = pool_of
    http, _ = proxies
    listed = webshare((http.port, "demo1", "pw1"))
    check = CheckTarget(target.url())
    other = UpstreamTarget("other", 10, timedelta(seconds=5))

    def fetch(upstream: UpstreamTarget | None = None) -> FetchReport:
        fetch_plan = plan(url, "http", check)
        if upstream is not None:
            fetch_plan = replace(fetch_plan, target=upstream)
        return run(pool_of, fetch_plan)

    with vendor(listed) as url:
        first = fetch()
        refused = fetch(other)  # the same exit, held by demo-http
        refreshed = fetch()
    assert (first.reconcile.inserted, first.checks.checked, first.checks.states) == (
        1,
        1,
        {"available": 1},
    )
    assert (refused.reconcile.conflicts, refused.checks.checked, refused.checks.states) == (
        1,
        0,
        {},
    )
    assert (refreshed.reconcile.refreshed, refreshed.checks.checked, refreshed.checks.states) == (
        1,
        0,
        {},
    )


def test_a_fetch_the_store_stops_half_way_checks_what_it_wrote_and_says_so(pool_of):
    """600 proxies, the store failing at the second batch of 500: the first 500 are in the
    pool, and made available (a trusted provider) before the failure is raised, with a report
    that says so. Before: the failure propagated with 500 proxies written and left unchecked."""
    pool, credentials, _clock = pool_of
    options = UpstreamOptions("http", timedelta(minutes=5), 1_000, allow_local_hosts=True)
    many = webshare(*[(20_000 + n, f"u{n}", "pw") for n in range(600)])
    with vendor(many) as url:
        big = replace(plan(url, "http", None), format=PRESETS["webshare_list"].format(options),
                      target=UpstreamTarget("demo-http", 1_000, timedelta(seconds=5)))  # fmt: skip
        with pytest.raises(FetchInterrupted) as caught:
            run(pool_of, big, pool=StoreFailsAfter(pool_of[0], writes=1))
    report = caught.value.report
    assert isinstance(caught.value.cause, StoreUnavailable)
    assert (report.reconcile.inserted, report.checks.states) == (500, {"available": 500})
    assert pool.upstream_inventory("demo-http").available_slots == 500
    assert credentials.held() == 0  # every fetched password forgotten all the same


def test_the_accounts_proxy_budget_caps_what_the_vendor_is_asked_for(pool_of):
    listed = webshare(*[(20_000 + n, f"u{n}", "pw") for n in range(10)])
    with vendor(listed) as url:
        report = run(pool_of, plan(url, "http", None), limits=AccountLimits(proxies_per_minute=4))
    assert (report.reconcile.deficit, report.reconcile.asked) == (10, 4)
    assert "page_size=4" in url.asked[0] and report.reconcile.inserted == 4


@pytest.mark.parametrize(
    ("path", "due_after"),
    [
        ("/ok-webshare", timedelta(seconds=30)),  # answered: the interval
        ("/status/500", timedelta(seconds=30)),  # retry later: one interval
        ("/status/429", timedelta(seconds=150)),  # back off: five
        ("/status/403", timedelta(hours=1)),  # disable: 120, at most an hour
        ("/status/429?retry_after=3600", timedelta(hours=1)),  # as the vendor asked
        ("/status/429?retry_after=99999", timedelta(hours=2)),  # bounded by the plan
    ],
)
def test_the_job_finishes_its_claim_due_again_as_its_outcome_says(pool_of, path, due_after):
    _, _, clock = pool_of
    scheduler = MemoryScheduler()
    with vendor_server() as base, vendor(webshare((20_001, "a", "b"))) as listing:
        url = listing if path == "/ok-webshare" else base + path
        fetch_plan = replace(plan(url, "http", None), interval=timedelta(seconds=30),
                             max_retry_after=timedelta(hours=2))  # fmt: skip
        with contextlib.suppress(ProviderError):  # the vendor's error: the claim finished still
            run(pool_of, fetch_plan, scheduler=scheduler)
    status = scheduler.status(clock.now(), "acme", "demo-http")
    assert status.due_at == clock.now() + due_after and status.running_until is None


def test_a_claim_spent_already_does_nothing(pool_of):
    pool, credentials, clock = pool_of
    scheduler = MemoryScheduler()
    scheduler.schedule("acme", "demo-http", clock.now())
    claim = scheduler.claim(clock.now(), "acme", BUDGET, LEASE)
    assert isinstance(claim, Claim)
    scheduler.finish(clock.now(), claim, clock.now())  # a redelivered task's claim
    with vendor(webshare((20_001, "a", "b"))) as url:
        job = FetchJob(plan(url, "http", None), pool=pool, scheduler=scheduler, claim=claim,
                       limits=BUDGET, lease=LEASE, handover=credentials, clock=clock)  # fmt: skip
        with pytest.raises(LeaseLost):
            job.run()
        assert url.asked == []


def test_a_vendor_that_outlasts_the_lease_and_then_fails_is_told_as_the_vendors_failure(pool_of):
    """The vendor held the call past the claim's lease, then answered with an error: its
    error is what the fetch says (before: giving the grant back raised LeaseLost over it, and
    the vendor's failure went untold)."""
    _, _, clock = pool_of

    def late_and_wrong(query: dict) -> dict:
        clock.advance(LEASE + timedelta(seconds=1))
        return {"detail": "Invalid token."}  # Webshare's error body: not its list

    with vendor(late_and_wrong) as url, pytest.raises(MalformedResponse):
        run(pool_of, plan(url, "http", None))


class FinishFails(MemoryScheduler):
    def finish(self, now, claim, next_due_at):
        raise StoreUnavailable("planted: the scheduler's store went away")


def test_a_claim_that_cannot_be_finished_hides_nothing_of_the_fetch(pool_of, caplog):
    with vendor(webshare((20_001, "a", "b"))) as url:
        report = run(pool_of, plan(url, "http", None), scheduler=FinishFails())
    assert report.reconcile.inserted == 1
    assert "its claim could not be finished (StoreUnavailable)" in caplog.text
