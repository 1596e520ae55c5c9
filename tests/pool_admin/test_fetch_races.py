"""Two dispatchers at once (two beats, or a beat and an operator's run) through the whole fetch
path: each claims what is due and runs its fetches in threads of its own against a vendor that
answers slowly and counts what it is asked at once. One account's fetches never overlap, and
its calls per minute hold, counted at the vendor; on real PostgreSQL and Redis."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from pool_admin import filling
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
                filling.run_fetch(claim)
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)
            finally:
                connection.close()

        def dispatcher() -> None:
            try:
                while time.monotonic() < stop:
                    claims: list[dict] = []
                    filling.dispatch(filling.now(), claims.append)
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
