"""POST /api/v1/extract over HTTP against real PostgreSQL and Redis."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from activity import FetchedBatch, FetchedProxy, HealthUpdate, ProxyState
from pool_admin import bootstrap
from pool_admin.api.call_log import call_lines, flush_call_log
from pool_admin.config.models import Upstream
from tests.pool_admin.api.conftest import PROXY_PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

URL = "/api/v1/extract"
PROBLEM = "application/problem+json"


def extract(client, body=None, **headers):
    return client.post(URL, body if body is not None else {"count": 2, "mode": "partial"},
                       format="json", headers=headers)  # fmt: skip


def assert_problem(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["code"] == code
    assert body["status"] == status
    assert body["type"] == f"urn:proxy-pool:problem:{code}"
    assert body["title"] and body["detail"]
    return body


def test_happy_path_returns_exclusive_proxies(api, make_client, seed):
    ids = seed(n=3)
    c = make_client()
    response = extract(api(c.plaintext), {"count": 2, "mode": "partial", "min_remaining_s": 20})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["requested"] == 2 and body["returned"] == 2 and body["replayed"] is False
    proxy = body["proxies"][0]
    assert set(proxy) == {"id", "host", "port", "protocol", "username", "password",
                          "expires_at", "upstream", "region", "carrier"}  # fmt: skip
    assert proxy["id"] in ids and proxy["upstream"] == "acme-us"
    assert proxy["username"] == "user-1" and proxy["password"] == PROXY_PASSWORD
    assert proxy["region"] == "us" and proxy["carrier"] == "att" and proxy["protocol"] == "http"
    assert proxy["expires_at"].endswith("Z")
    assert response["X-Request-ID"]

    rest = extract(api(c.plaintext), {"count": 5, "mode": "partial"}).json()
    assert rest["returned"] == 1  # exclusive: only the third one is left
    taken = {p["id"] for p in body["proxies"]} | {p["id"] for p in rest["proxies"]}
    assert taken == set(ids)
    c.key.refresh_from_db()
    assert c.key.last_used_at is not None


def test_idempotent_replay_and_conflict(api, make_client, seed):
    seed(n=4)
    client = api(make_client().plaintext)
    body = {"count": 2, "mode": "partial"}
    first = extract(client, body, **{"Idempotency-Key": "order-17"})
    again = extract(client, body, **{"Idempotency-Key": "order-17"})
    assert first.status_code == again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["proxies"] == first.json()["proxies"]

    other = extract(client, {"count": 3, "mode": "partial"}, **{"Idempotency-Key": "order-17"})
    assert_problem(other, 409, "idempotency_conflict")
    assert extract(client, body).json()["returned"] == 2  # the replay took nothing more


def test_the_clients_idempotency_ttl_decides_how_long_a_replay_lives(
    api, make_client, seed, pool_clock
):
    """Each client's idempotency_ttl_s reaches its pool (neither the pool's default of 10
    minutes nor another client's TTL): within it the same Idempotency-Key replays, after it
    the key starts a fresh extract."""
    ids = seed(n=8)
    clock = pool_clock  # the API's pools read it
    short = api(make_client("short", idempotency_ttl_s=60).plaintext)
    long = api(make_client("long", idempotency_ttl_s=120).plaintext)
    body, key = {"count": 1, "mode": "partial"}, {"Idempotency-Key": "order-1"}

    def taken(client):
        response = extract(client, body, **key)
        assert response.status_code == 200, response.content
        return response.json()["replayed"], [p["id"] for p in response.json()["proxies"]]

    first_short, first_long = taken(short), taken(long)
    assert first_short[0] is False and first_long[0] is False
    clock.advance(timedelta(seconds=59))
    assert taken(short) == (True, first_short[1])
    assert taken(long) == (True, first_long[1])

    clock.advance(timedelta(seconds=2))  # 61 s: past the short TTL only
    fresh_short = taken(short)
    assert fresh_short[0] is False and fresh_short[1] != first_short[1]
    assert taken(long) == (True, first_long[1])
    assert taken(short) == (True, fresh_short[1])  # the fresh extract is the one replayed now

    clock.advance(timedelta(seconds=60))  # 121 s: past the long TTL too
    fresh_long = taken(long)
    assert fresh_long[0] is False and fresh_long[1] != first_long[1]
    handed_out = first_short[1] + first_long[1] + fresh_short[1] + fresh_long[1]
    assert len(set(handed_out)) == 4 and set(handed_out) <= set(ids)
    assert seed.pool.inventory("acme-us") == 4


def test_all_or_nothing_shortfall_is_409_and_takes_nothing(api, make_client, seed):
    seed(n=2)
    client = api(make_client().plaintext)
    problem = assert_problem(
        extract(client, {"count": 3, "mode": "all_or_nothing"}), 409, "insufficient_inventory"
    )
    assert problem["requested"] == 3 and problem["available"] == 2
    assert extract(client, {"count": 2, "mode": "all_or_nothing"}).json()["returned"] == 2


def stock_many(pool, upstream: str, n: int, region: str, carrier: str, first_octet: int) -> None:
    """``n`` AVAILABLE proxies of ``upstream``, in batches the pool accepts."""
    now = datetime.now(UTC)
    batch = pool.options.max_upsert_batch
    for start in range(0, n, batch):
        proxies = [
            FetchedProxy(
                proxy_id=f"{upstream}-m{i}",
                unique_key=f"10.{first_octet}.{i // 250}.{i % 250 + 1}:8080",
                host=f"10.{first_octet}.{i // 250}.{i % 250 + 1}",
                port=8080,
                protocol="http",
                expires_at=now + timedelta(minutes=10),
                region=region,
                carrier=carrier,
            )
            for i in range(start, min(n, start + batch))
        ]
        pool.upsert_fetched(FetchedBatch(upstream, proxies, n, timedelta(seconds=5), now))
        updates = [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now, 50) for p in proxies]
        health = pool.options.max_health_batch
        for h in range(0, len(updates), health):
            pool.apply_health(updates[h : h + health])


def test_scan_budget_exhausted_is_503_with_retry_after_and_takes_nothing(api, make_client, seed):
    """More candidates than the API's pool may examine, none of them matching: the bounded
    scan gives up (fail closed), which is neither "not enough proxies" nor a partial answer."""
    budget = bootstrap.get_pool().options.scan_budget  # the API's own pool, as configured
    # Every candidate of the smallest index (region us, or carrier vz) fails the other filter.
    stock_many(seed.pool, "acme-us", budget + 2, region="us", carrier="att", first_octet=1)
    stock_many(seed.pool, "acme-eu", budget + 1, region="eu", carrier="vz", first_octet=2)
    client = api(make_client().plaintext)
    warm = extract(client, {"count": 1, "mode": "partial", "filters": {"region": "us"}})
    assert warm.status_code == 200, warm.content  # the key is cached: fast_extract.py serves now
    before = {u: seed.pool.inventory(u) for u in ("acme-us", "acme-eu")}
    assert before == {"acme-us": budget + 1, "acme-eu": budget + 1}

    crossed = {"region": "us", "carrier": "vz"}
    for mode in ("partial", "all_or_nothing"):
        body = {"count": 1, "mode": mode, "filters": crossed}
        response = extract(client, body, **{"Idempotency-Key": "scan-1"})
        problem = assert_problem(response, 503, "scan_budget_exhausted")
        assert int(response["Retry-After"]) >= 1
        assert "proxies" not in problem
    assert {u: seed.pool.inventory(u) for u in before} == before  # nothing was extracted

    # Nothing was stored under the key either: with a body the pool can answer it is a
    # first extract, not a conflict with the failed one and not a replay.
    body = {"count": 1, "mode": "partial", "filters": {"carrier": "vz"}}
    after = extract(client, body, **{"Idempotency-Key": "scan-1"})
    assert after.status_code == 200, after.content
    assert after.json()["replayed"] is False and after.json()["returned"] == 1
    assert seed.pool.inventory("acme-eu") == budget


def test_gateway_reserve_of_the_client_is_kept_back(api, make_client, seed):
    seed(n=3)
    client = api(make_client(gateway_reserve=2).plaintext)
    assert extract(client, {"count": 3, "mode": "partial"}).json()["returned"] == 1


@pytest.mark.parametrize(
    ("fields", "filters", "detail"),
    [
        (
            {"allowed": ["acme-us"]},
            {"upstream": "acme-eu"},
            "'acme-eu'; it may draw from 'acme-us'",
        ),
        ({"allowed_regions": ["us", "ap"]}, {"region": "eu"}, "from 'ap', 'us'"),
        ({"allowed_protocols": ["socks5"]}, {"protocol": "http"}, "from 'socks5'"),
    ],
)
def test_disallowed_filter_is_403_naming_what_is_allowed(
    api, make_client, seed, fields, filters, detail
):
    seed(n=2)
    client = api(make_client(**fields).plaintext)
    body = {"count": 1, "mode": "partial", "filters": filters}
    problem = assert_problem(extract(client, body), 403, "forbidden")
    assert detail in problem["detail"]


def test_a_client_allowed_several_upstreams_draws_from_all_of_them(
    api, make_client, seed, upstreams
):
    Upstream.objects.create(
        name="acme-ap", account=upstreams.us.account, endpoint_url="https://acme.example/p"
    )
    us = seed("acme-us", n=2)
    eu = seed("acme-eu", n=2, region="eu")
    seed("acme-ap", n=2, region="ap")
    client = api(make_client(allowed=["acme-us", "acme-eu"]).plaintext)
    response = extract(client, {"count": 10})
    assert response.status_code == 200, response.content
    assert sorted(p["id"] for p in response.json()["proxies"]) == sorted(us + eu)
    assert {u: seed.pool.inventory(u) for u in ("acme-us", "acme-eu", "acme-ap")} == {
        "acme-us": 0,
        "acme-eu": 0,
        "acme-ap": 2,
    }


def test_a_client_allowed_several_regions_draws_from_all_of_them(api, make_client, seed):
    us = seed("acme-us", n=1, region="US")
    eu = seed("acme-eu", n=1, region="eu")
    seed("acme-eu", n=1, region="ap")
    seed("acme-eu", n=1, region="eu", protocol="socks5")
    client = api(make_client(allowed_regions=["us", "EU"]).plaintext)
    response = extract(client, {"count": 10, "filters": {"protocol": "http"}})
    assert response.status_code == 200, response.content
    assert sorted(p["id"] for p in response.json()["proxies"]) == sorted(us + eu)


def test_an_empty_body_extracts_one_proxy(api, make_client, seed):
    """``{}`` is a whole request: count 1, partial (docs/API.md, the README's first call)."""
    seed(n=3)
    client = api(make_client().plaintext)
    response = extract(client, {})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["requested"], body["returned"], len(body["proxies"])) == (1, 1, 1)
    assert extract(client, {"count": 2}).json()["returned"] == 2  # and partial by default
    assert extract(client, {"count": 2, "mode": "all_or_nothing"}).status_code == 409


def test_a_bad_choice_is_400_listing_the_choices(api, make_client):
    client = api(make_client().plaintext)
    problem = assert_problem(extract(client, {"mode": "all"}), 400, "invalid_request")
    assert '"all" is not a valid choice; use one of "partial", "all_or_nothing".' in str(
        problem["errors"]
    )
    body = {"filters": {"protocol": "ftp"}}
    problem = assert_problem(extract(client, body), 400, "invalid_request")
    assert '"http", "https", "socks4", "socks5"' in str(problem["errors"])


@pytest.mark.parametrize("path", ["/api/v1/extract/", "/api/v1/inventory/"])
def test_a_trailing_slash_gets_a_hint(api, make_client, path):
    client = api(make_client().plaintext)
    response = client.post(path, {}, format="json")
    problem = assert_problem(response, 404, "not_found")
    assert problem["detail"] == f"Not found; did you mean {path.rstrip('/')}?"
    problem = assert_problem(client.post("/api/v1/nothing/", {}, format="json"), 404, "not_found")
    assert "did you mean" not in problem["detail"]


def test_single_allowed_value_is_applied_as_the_filter(api, make_client, seed):
    seed("acme-us", n=2)
    eu = seed("acme-eu", n=2, region="eu")
    client = api(make_client(allowed=["acme-eu"]).plaintext)
    body = extract(client, {"count": 5, "mode": "partial"}).json()
    assert sorted(p["id"] for p in body["proxies"]) == sorted(eu)


def test_a_region_is_asked_for_in_any_case_and_as_vendors_write_it(api, make_client, seed):
    """docs/API.md's own example asks for ``us``; vendors label ``US`` (before: nothing found),
    and Zhima's regions are Chinese cities (before: the whole fetch failed)."""
    us = seed("acme-us", n=1, region="US")
    guangzhou = seed("acme-eu", n=1, region="广东省广州市")
    client = api(make_client(allowed_regions=["Us", "广东省广州市"]).plaintext)
    for asked, wanted, labelled in (("us", us, "US"), ("广东省广州市", guangzhou, "广东省广州市")):
        body = {"count": 5, "mode": "partial", "filters": {"region": asked}}
        response = extract(client, body)
        assert response.status_code == 200, response.content
        [proxy] = response.json()["proxies"]
        assert ([proxy["id"]], proxy["region"]) == (wanted, labelled)
    refused = {"count": 1, "mode": "partial", "filters": {"region": "de"}}
    assert_problem(extract(client, refused), 403, "forbidden")


def test_count_above_the_client_limit_is_403(api, make_client, seed):
    client = api(make_client(max_count_per_request=5).plaintext)
    problem = assert_problem(extract(client, {"count": 6, "mode": "partial"}), 403, "forbidden")
    assert "5" in problem["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"count": 0, "mode": "partial"},
        {"count": -1, "mode": "partial"},
        {"count": "many", "mode": "partial"},
        {"count": 1001, "mode": "partial"},
        {"count": None},
        {"mode": None},
        {"count": 1, "mode": "some"},
        {"count": 1, "mode": "partial", "min_remaining_s": -5},
        {"count": 1, "mode": "partial", "filters": {"protocol": "ftp"}},
        {"count": 1, "mode": "partial", "filters": {"region": "r" * 65}},
        [1, 2],
    ],
)
def test_bad_body_is_400(api, make_client, body):
    response = extract(api(make_client().plaintext), body)
    assert_problem(response, 400, "invalid_request")


@pytest.mark.parametrize(
    "body",
    [
        {"count": 1, "mode": "partial", "colour": "red"},
        {"count": 1, "mode": "partial", "filters": {"country": "us"}},
    ],
)
def test_unknown_field_is_400_naming_it(api, make_client, body):
    problem = assert_problem(extract(api(make_client().plaintext), body), 400, "invalid_request")
    assert "colour" in str(problem["errors"]) or "country" in str(problem["errors"])


def test_malformed_json_and_bad_idempotency_key_are_400(api, make_client):
    client = api(make_client().plaintext)
    response = client.post(URL, "{nope", content_type="application/json")
    assert_problem(response, 400, "invalid_request")
    assert_problem(extract(client, **{"Idempotency-Key": "x" * 300}), 400, "invalid_request")


def test_one_call_log_line_per_extract_and_no_secret_in_logs(api, make_client, seed, caplog):
    seed(n=2)
    c = make_client()
    client = api(c.plaintext)
    caplog.set_level(logging.DEBUG)
    ok = extract(client, {"count": 2, "mode": "partial"}, **{"Idempotency-Key": "k1"})
    assert ok.status_code == 200
    short = extract(client, {"count": 3, "mode": "all_or_nothing"})
    assert short.status_code == 409
    extract(api(c.plaintext + "x"))  # a bad key: logged nowhere either

    flush_call_log()  # lines are written in batches
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    assert len(logged) == 2
    assert all('"source":"api"' in line for line in logged)  # manage.py extract's say "cli"
    assert '"outcome":"ok"' in logged[0]
    assert '"returned":2' in logged[0]
    assert '"outcome":"insufficient_inventory"' in logged[1]
    # Not rsplit("_"): the random part may itself contain "_" (then a 2-char tail matched ids).
    secret_part = c.plaintext.removeprefix(f"pp_{c.key.prefix}_")
    for record in caplog.records:
        text = record.getMessage() + str(record.args)
        assert PROXY_PASSWORD not in text
        assert c.plaintext not in text and secret_part not in text
    for response in (ok, short):
        assert c.plaintext not in response.content.decode()


def test_a_refused_call_logs_its_line_with_its_code(api, make_client, seed, caplog):
    seed(n=2)
    client = api(make_client(requests_per_second=5, max_count_per_request=2).plaintext)
    caplog.set_level(logging.INFO, logger="pool_admin.calls")
    calls = [
        lambda: extract(client, {"count": 0, "mode": "partial"}),
        lambda: extract(client, {"count": 3, "mode": "partial"}),
        lambda: client.post(URL, "{nope", content_type="application/json"),
        lambda: extract(client, {"count": 1, "mode": "partial"}),
        lambda: extract(client, {"count": 2, "mode": "all_or_nothing"}),
        lambda: extract(client, {"count": 1, "mode": "partial"}),
    ]
    assert [call().status_code for call in calls] == [400, 403, 400, 200, 409, 429]
    flush_call_log()
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    events = [json.loads(line.removeprefix("call ")) for line in logged]
    assert [e["outcome"] for e in events] == [
        "invalid_request",
        "forbidden",
        "invalid_request",
        "ok",
        "insufficient_inventory",
        "rate_limited",
    ]
    assert all(e["client"] == "crawler-1" and e["event"] == "extract" for e in events)
    assert [e["returned"] for e in events] == [0, 0, 0, 1, 0, 0]
    assert len({e["request_id"] for e in events}) == 6


def test_a_refused_calls_logged_outcome_is_the_code_it_was_answered_with(api, make_client, caplog):
    client = api(make_client().plaintext)
    caplog.set_level(logging.INFO, logger="pool_admin.calls")
    response = client.post(URL, "count=1", content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415, "unsupported_media_type")
    flush_call_log()
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    assert [json.loads(line.removeprefix("call "))["outcome"] for line in logged] == [
        "unsupported_media_type"
    ]
