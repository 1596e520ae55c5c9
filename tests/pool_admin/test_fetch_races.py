"""Two dispatchers at once (two beats, or a beat and an operator's run) through the whole fetch
path: each claims what is due and runs its fetches in threads of its own against a vendor that
answers slowly and counts what it is asked at once. One account's fetches never overlap, and
its calls per minute hold, counted at the vendor; on real PostgreSQL and Redis."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from pool_admin import fetch_tasks
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import ProviderAccount, Upstream
from tests.harness.webshare_vendor import vendor, webshare

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the threads' connections see the test's rows
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
]


def test_two_dispatchers_at_once_never_fetch_one_account_concurrently(filling_pool):
    listed = webshare(*[(20_000 + n, f"u{n}", f"p{n}") for n in range(3)])
    with vendor(listed, delay=0.3) as url:
        account = ProviderAccount.objects.create(name="acme", api_calls_per_minute=6)
        for name in ("acme-a", "acme-b", "acme-c"):
            Upstream.objects.create(
                name=name, account=account, kind="preset", preset="webshare_list",
                endpoint_url=url, count_param="page_size", allow_local_hosts=True,
                trust_provider=True, fetch_interval_s=1, max_size=5,
            )  # fmt: skip
        fetches: list[threading.Thread] = []
        errors: list[BaseException] = []
        stop = time.monotonic() + 4

        def fetch(claim: dict) -> None:
            try:
                fetch_tasks.run_fetch(claim)
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)
            finally:
                connection.close()

        def dispatcher() -> None:
            try:
                while time.monotonic() < stop:
                    claims: list[dict] = []
                    fetch_tasks.dispatch(fetch_tasks.now(), claims.append)
                    for claim in claims:
                        thread = threading.Thread(target=fetch, args=(claim,))
                        thread.start()
                        fetches.append(thread)
                    time.sleep(0.02)
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        dispatchers = [threading.Thread(target=dispatcher) for _ in range(2)]
        for thread in dispatchers:
            thread.start()
        for thread in dispatchers:
            thread.join(30)
        for thread in fetches:
            thread.join(30)
    assert errors == []
    assert url.most_at_once == 1  # fetch_concurrency 1: never two of the account's at once
    # 4 s of 0.3 s answers would be a dozen calls; the account allows 6 a minute.
    assert 4 <= len(url.asked) <= 6


def test_one_slow_provider_never_delays_the_others(filling_pool):
    """A vendor that holds its answer holds only its own account's fetch: a dispatch claims
    the others, and their fetches finish, meanwhile."""
    answer = threading.Event()
    slow_listed = webshare((20_001, "s1", "p1"))
    fast_listed = webshare((20_002, "f1", "p2"))
    with vendor(slow_listed, hold=answer) as slow_url, vendor(fast_listed) as fast_url:
        for name, url in (("slow", slow_url), ("fast", fast_url)):
            account = ProviderAccount.objects.create(name=name)
            Upstream.objects.create(
                name=name, account=account, kind="preset", preset="webshare_list",
                endpoint_url=url, count_param="page_size", allow_local_hosts=True,
                trust_provider=True, max_size=5,
            )  # fmt: skip
        claims: list[dict] = []
        assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 2
        by_account = {claim["account_id"]: claim for claim in claims}
        held = threading.Thread(target=lambda: (fetch_tasks.run_fetch(by_account["slow"]),
                                                connection.close()))  # fmt: skip
        held.start()
        try:
            deadline = time.monotonic() + 10
            while not slow_url.asked:  # the slow fetch is waiting on its vendor
                assert time.monotonic() < deadline
                time.sleep(0.05)
            started = time.monotonic()
            report = fetch_tasks.run_fetch(by_account["fast"])
            assert report is not None and report.reconcile.inserted == 1
            assert time.monotonic() - started < 2
            assert fetch_tasks.dispatch(fetch_tasks.now(), claims.append) == 0  # slow still running
        finally:
            answer.set()
            held.join(30)
    assert get_pool().inventory("slow") == 1  # and it finished once its vendor answered
