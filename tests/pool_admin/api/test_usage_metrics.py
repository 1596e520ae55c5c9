"""The extract API and the sweep as producers of the usage stream, end to end on real Redis and
PostgreSQL: what a client drew (by upstream and region), its refused calls, the time from
fetch to first use, and what expired used or never used, per upstream and in the totals."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pool_admin.config.models import ClientDraws, ClientUsage, UpstreamQuality, UsageTotal
from pool_admin.tasks import sweep_pool
from tests.harness.metrics import drain_metrics

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


def extract(client, body, **headers):
    return client.post("/api/v1/extract", body, format="json", headers=headers)


def totals() -> dict[tuple[str, str], int]:
    return {(f, labels): v for f, labels, v in UsageTotal.objects.values_list(
        "family", "labels", "value")}  # fmt: skip


def test_extracts_answered_and_refused_become_client_and_upstream_figures(api, make_client, seed):
    seed(n=3, region="us")
    seed(upstream="acme-eu", n=2, region="de")
    client = api(make_client(max_count_per_request=10).plaintext)
    assert extract(client, {"count": 4, "mode": "partial"}).status_code == 200
    assert extract(client, {"count": 11, "mode": "partial"}).status_code == 403
    assert extract(client, {"count": "x"}).status_code == 400
    drain_metrics()
    calls = {
        (r.outcome, r.calls, r.returned) for r in ClientUsage.objects.filter(client="crawler-1")
    }
    assert calls == {("ok", 1, 4), ("forbidden", 1, 0), ("invalid_request", 1, 0)}
    draws = {(r.upstream, r.region): r.proxies for r in ClientDraws.objects.all()}
    assert sum(draws.values()) == 4 and set(draws) <= {("acme-us", "us"), ("acme-eu", "de")}
    extracted = {r.upstream: r.extracted for r in UpstreamQuality.objects.all()}
    assert extracted == {u: n for (u, _), n in draws.items()}
    # Seeded a moment ago: each waited under a minute between its fetch and its extract.
    waited = sum(r.first_use_ms for r in UpstreamQuality.objects.all())
    assert 0 <= waited < 4 * 60_000
    t = totals()
    assert (t[("extract_calls", "ok")], t[("extract_calls", "forbidden")]) == (1, 1)
    assert sum(v for (f, _), v in t.items() if f == "extracted") == 4


def test_a_replayed_extract_is_a_call_that_draws_nothing_again(api, make_client, seed):
    """The same idempotency key again answers the same proxies: the call counts (outcome
    ``replayed``), the proxies and their first use do not, a second time."""
    seed(n=5, region="us")
    client = api(make_client().plaintext)
    first = extract(client, {"count": 3, "mode": "partial"}, **{"Idempotency-Key": "order-9"})
    again = extract(client, {"count": 3, "mode": "partial"}, **{"Idempotency-Key": "order-9"})
    assert again.json()["proxies"] == first.json()["proxies"]
    drain_metrics()
    calls = {(r.outcome, r.calls, r.returned) for r in ClientUsage.objects.all()}
    assert calls == {("ok", 1, 3), ("replayed", 1, 0)}
    assert sum(r.proxies for r in ClientDraws.objects.all()) == 3
    assert sum(r.extracted for r in UpstreamQuality.objects.all()) == 3
    assert totals()[("extracted", "acme-us")] == 3
    assert totals()[("extract_calls", "replayed")] == 1


def test_the_sweep_tells_what_expired_used_and_what_expired_unused(
    api, make_client, seed, pool_clock
):
    seed(n=5)
    client = api(make_client().plaintext)
    assert len(extract(client, {"count": 2, "mode": "partial"}).json()["proxies"]) == 2
    pool_clock.advance(timedelta(minutes=11))  # past every seeded proxy's hard expiry
    assert sweep_pool(100).expired == 5
    drain_metrics()
    row = UpstreamQuality.objects.get(upstream="acme-us", expired_unused__gt=0)
    assert (row.expired_used, row.expired_unused) == (2, 3)
    assert totals()[("expired", "acme-us|false")] == 3
    assert sweep_pool(100).tally == {}  # told once
