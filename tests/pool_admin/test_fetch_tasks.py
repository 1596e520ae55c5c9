"""The pool fills itself from its configuration (pool_admin/fetch_tasks.py): a dispatch claims what
is due per provider account, the fetch task fetches, checks and marks, and finishes its claim;
on real PostgreSQL and Redis, a vendor over HTTP and real tinyproxy proxies."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from activity.types import ExtractMode, ExtractRequest
from pool_admin import fetch_tasks
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.credential_store import CredentialStore
from pool_admin.config.models import Credential, ProviderAccount, Upstream
from pool_admin.forward_proxies import Tinyproxy
from tests.harness.check_target import CheckTargetServer, closed_port
from tests.harness.vendor_server import vendor_server
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _pool(filling_pool):
    return


@pytest.fixture(scope="module")
def tinyproxy(tmp_path_factory):
    with Tinyproxy(tmp_path_factory.mktemp("tinyproxy"), "demo1", "pw1") as proxy:
        yield proxy


def configure(url: str, target: CheckTargetServer, **fields) -> Upstream:
    account, _ = ProviderAccount.objects.get_or_create(name="acme")
    defaults = {
        "name": "acme-http", "kind": "preset", "preset": "webshare_list",
        "count_param": "page_size", "max_size": 10,
    }  # fmt: skip
    return Upstream.objects.create(
        account=account, endpoint_url=url, allow_local_hosts=True, check_url=target.url(),
        check_timeout_ms=2000, **{**defaults, **fields},
    )  # fmt: skip


def test_a_dispatch_claims_the_due_fetch_and_its_task_fills_the_upstream(tinyproxy, target):
    listed = webshare((tinyproxy.port, "demo1", "pw1"), (closed_port(), "demo1", "pw1"))
    with vendor(listed) as url:
        configure(url, target)
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert (
            fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
        )  # one at a time per account
        report = fetch_tasks.run_fetch(claims[0])
    assert report is not None and report.checks.states == {"available": 1, "unhealthy": 1}
    [proxy] = get_pool().extract(ExtractRequest(client_id="c1", count=5,
                                                mode=ExtractMode.PARTIAL)).proxies  # fmt: skip
    assert (proxy.port, proxy.username, proxy.password) == (tinyproxy.port, "demo1", "pw1")
    assert (
        fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
    )  # next due after its interval
    # The same task delivered again: its claim is spent, so it fetches nothing.
    assert fetch_tasks.run_fetch(claims[0]) is None


def test_a_vendor_error_finishes_the_claim_and_waits_longer(target):
    with vendor({"detail": "Invalid token."}) as url:  # no list: a malformed answer
        configure(url, target)
        claims: list[dict] = []
        fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
        assert fetch_tasks.run_fetch(claims[0]) is None
    assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
    assert get_pool().upstream_inventory("acme-http").managed == 0


def test_disabled_upstreams_and_accounts_are_not_fetched(target, tinyproxy):
    with vendor(webshare((tinyproxy.port, "demo1", "pw1"))) as url:
        upstream = configure(url, target, enabled=False)
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
        upstream.enabled = True
        upstream.save()
        upstream.account.enabled = False
        upstream.account.save()
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
        upstream.account.enabled = True
        upstream.account.save()
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1


def test_an_upstream_under_its_low_water_mark_is_fetched_again_at_once(tinyproxy, target):
    with vendor(webshare((tinyproxy.port, "demo1", "pw1"))) as url:
        upstream = configure(url, target, low_water_mark=5, refill_cooldown_s=0)
        claims: list[dict] = []
        fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
        fetch_tasks.run_fetch(claims.pop())
        # 1 unextracted < 5: requested ahead of its 30 s cadence.
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert fetch_tasks.claim_of(claims[0]).requested
        fetch_tasks.run_fetch(claims.pop())
        # Within the cooldown of the last accepted request: merged into it, nothing claimed.
        upstream.refill_cooldown_s = 60
        upstream.save()
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0


def test_an_accounts_calls_per_minute_hold_however_often_it_is_dispatched(target):
    """Counted at the vendor: a fetch every dispatch would be ten; the account allows three."""
    many = webshare(*[(20_000 + n, f"u{n}", f"p{n}") for n in range(3)])
    with vendor(many) as url:
        upstream = configure(url, target, trust_provider=True, fetch_interval_s=1, max_size=1000)
        upstream.account.api_calls_per_minute = 3
        upstream.account.proxies_per_minute = 1_000_000  # not the limit under test
        upstream.account.save()
        for _ in range(10):
            claims: list[dict] = []
            fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
            for claim in claims:
                fetch_tasks.run_fetch(claim)
            get_scheduler().request(fetch_tasks.now(), "acme", "acme-http", timedelta(0))
            time.sleep(0.1)
        assert len(url.asked) == 3


def test_an_accounts_proxies_per_minute_hold_over_its_fetches(target):
    many = webshare(*[(20_000 + n, f"u{n}", f"p{n}") for n in range(20)])
    with vendor(many) as url:
        upstream = configure(url, target, trust_provider=True, max_size=1000)
        upstream.account.proxies_per_minute = 5
        upstream.account.save()
        inserted = []
        for _ in range(3):
            get_scheduler().request(fetch_tasks.now(), "acme", "acme-http", timedelta(0))
            claims: list[dict] = []
            fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
            inserted += [
                report.reconcile.inserted for c in claims if (report := fetch_tasks.run_fetch(c))
            ]
        assert len(url.asked) == 1  # the 2nd and 3rd fetch had nothing left to ask for
    assert sum(inserted) == 5
    assert get_pool().upstream_inventory("acme-http").managed == 5


def test_a_deleted_or_renamed_upstream_is_forgotten_by_the_scheduler(target):
    with vendor(webshare((20_000, "u", "p"))) as url:
        kept = configure(url, target, name="acme-kept", fetch_interval_s=3600)
        gone = configure(url, target, name="acme-gone")
        renamed = configure(url, target, name="acme-old")
        claims: list[dict] = []
        fetch_tasks.dispatch(fetch_tasks.now(), claims.append)  # all three scheduled
        for claim in claims:
            fetch_tasks.run_fetch(claim)
        gone.delete()
        renamed.name = "acme-new"
        renamed.save()
        for name in ("acme-gone", "acme-old", "acme-new", "acme-kept"):
            get_scheduler().request(fetch_tasks.now(), "acme", name, timedelta(0))
        claims.clear()
        kept.account.fetch_concurrency = 8
        kept.account.save()
        fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
    # acme-new is scheduled afresh (due now); acme-kept was requested; the others are gone.
    assert sorted(fetch_tasks.claim_of(c).upstream_id for c in claims) == ["acme-kept", "acme-new"]


def test_a_generic_text_upstream_is_fetched_with_its_own_reader(tinyproxy, target):
    lines = f"127.0.0.1:{tinyproxy.port}:demo1:pw1\r\n127.0.0.1:{tinyproxy.port}:demo9:x\r\n"
    with vendor(lines.encode()) as url:
        configure(url, target, kind="text_lines", preset="", count_param="num",
                  reader={"line": "host:port:user:pass"})  # fmt: skip
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        report = fetch_tasks.run_fetch(claims[0])
    assert report is not None and report.checks.states == {"available": 1, "unhealthy": 1}
    assert url.asked == ["/api/v2/proxy/list/?num=10"]


def test_a_generic_upstream_without_a_reader_is_not_fetched(target):
    with vendor(b"") as url:
        configure(url, target, kind="json_list", preset="")
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0
        assert url.asked == []


def test_a_static_list_is_read_from_its_credential_and_its_proxies_checked(tinyproxy, target):
    lines = f"127.0.0.1:{tinyproxy.port}:demo1:pw1\n127.0.0.1:{tinyproxy.port}:demo2:wrong\n"
    CredentialStore().put("fixed-pool", lines, purpose=Credential.Purpose.PROXY_AUTH)
    configure("", target, kind="static_list", preset="", count_param="",
              static_list=Credential.objects.get(name="fixed-pool"),
              reader={"line": "host:port:user:pass"})  # fmt: skip
    claims: list[dict] = []
    assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
    report = fetch_tasks.run_fetch(claims[0])
    assert report is not None and report.checks.states == {"available": 1, "unhealthy": 1}
    [proxy] = get_pool().extract(ExtractRequest(client_id="c1", count=5)).proxies
    assert (proxy.username, proxy.password) == ("demo1", "pw1")


def test_the_dispatch_warns_once_when_the_accounts_may_want_more_threads_than_there_are(
    settings, caplog
):
    settings.FETCH_WORKER_THREADS = 3
    for name, concurrency in (("a1", 2), ("a2", 2)):
        account = ProviderAccount.objects.create(name=name, fetch_concurrency=concurrency)
        Upstream.objects.create(
            name=f"{name}-up", account=account, kind="preset", preset="webshare_list",
            endpoint_url="http://127.0.0.1:9/",
        )  # fmt: skip
    with caplog.at_level("WARNING", logger="pool_admin.fetch_tasks"):
        fetch_tasks.dispatch(fetch_tasks.now(), lambda payload: None)
        fetch_tasks.dispatch(fetch_tasks.now(), lambda payload: None)
    said = [r.getMessage() for r in caplog.records if "FETCH_WORKER_THREADS" in r.getMessage()]
    assert said == [
        "the enabled accounts may run 4 fetches at once, the fetch worker 3 "
        "(FETCH_WORKER_THREADS): a slow vendor may delay other accounts' fetches"
    ]


def test_an_upstreams_label_map_and_default_region_apply_to_what_it_fetches(target):
    """The operator's map (the vendor's US as United States) and the upstream's default
    region for entries without one (before: the default region was configured and ignored)."""
    listed = webshare((20_001, "a", "b"), (20_002, "c", "d"))
    listed["results"][1]["country_code"] = None
    with vendor(listed) as url:
        configure(url, target, trust_provider=True, default_region="de",
                  label_map={"region": {"us": "United States"}})  # fmt: skip
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        fetch_tasks.run_fetch(claims[0])
    got = get_pool().extract(ExtractRequest(client_id="c1", count=5, mode=ExtractMode.PARTIAL))
    assert sorted((p.port, p.region) for p in got.proxies) == [
        (20_001, "United States"),
        (20_002, "de"),
    ]


@pytest.mark.parametrize(("bound_s", "waits_s"), [(3_600, 3_600), (600, 600)])
def test_a_vendors_retry_after_is_honoured_up_to_its_bound(target, settings, bound_s, waits_s):
    """A 429 asking for an hour: the next fetch is an hour away, or the configured bound
    (before: 5 intervals, the back-off alone)."""
    settings.FETCH_MAX_RETRY_AFTER = timedelta(seconds=bound_s)
    with vendor_server() as base:
        configure(f"{base}/status/429?retry_after=3600", target)
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert fetch_tasks.run_fetch(claims[0]) is None
    due = get_scheduler().status(fetch_tasks.now(), "acme", "acme-http").due_at
    assert due is not None
    assert abs((due - fetch_tasks.now()).total_seconds() - waits_s) < 5


def test_a_fetch_the_store_stops_half_way_says_what_the_pool_holds(target, monkeypatch, caplog):
    from pool_admin.config.models import Alert
    from tests.harness.faulty_pool import StoreFailsAfter

    real = get_pool()
    failing = StoreFailsAfter(real, writes=1)
    monkeypatch.setattr(fetch_tasks, "get_pool", lambda: failing)
    many = webshare(*[(20_000 + n, f"u{n}", "pw") for n in range(600)])
    with vendor(many) as url:
        configure(url, target, trust_provider=True, max_size=1_000)
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert fetch_tasks.run_fetch(claims[0]) is None
    said = "StoreUnavailable after taking in 500 new proxies (0 unchecked, out of extraction "
    assert any(said in r.getMessage() for r in caplog.records), caplog.text
    [alert] = Alert.objects.filter(kind=Alert.Kind.FETCH_FAILING)
    assert alert.detail.startswith("store_unavailable: " + said)
    assert real.upstream_inventory("acme-http").available_slots == 500


def test_a_credential_no_key_can_read_finishes_the_claim_and_says_so(target, settings):
    """The operator dropped the key a credential was sealed with: the fetch stops on our side
    with its claim finished (due again after the interval) and an alert counting it (before:
    the error escaped with the claim held until its lease ended, and nothing said why)."""
    from cryptography.fernet import Fernet

    from pool_admin.config.models import Alert

    settings.POOL_SECRET_KEYS = (Fernet.generate_key().decode(),)
    credential = Credential(name="acme-api")
    credential.set_secret("k3y")
    credential.save()
    ProviderAccount.objects.create(name="acme", credential=credential)
    with vendor(webshare((20_001, "a", "b"))) as url:
        configure(url, target, credential_param="key")
        settings.POOL_SECRET_KEYS = (Fernet.generate_key().decode(),)  # the old key is gone
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 1
        assert fetch_tasks.run_fetch(claims[0]) is None
        assert url.asked == []
    status = get_scheduler().status(fetch_tasks.now(), "acme", "acme-http")
    assert status.running_until is None and status.due_at is not None
    [alert] = Alert.objects.filter(kind=Alert.Kind.FETCH_FAILING)
    assert alert.detail == "SecretUnreadable: the fetch failed on our side"
