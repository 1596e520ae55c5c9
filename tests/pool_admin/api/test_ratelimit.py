"""Per-client rate limits of the extract API, counted in Redis (pool_admin/api/ratelimit.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis

from pool_admin import bootstrap
from pool_admin.api import ratelimit
from tests.pool_admin.api.test_extract import URL, assert_problem, extract

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

ONE = {"count": 1, "mode": "partial"}


def test_requests_per_second_limit_is_429_with_retry_after(api, make_client, seed):
    seed(n=10)
    client = api(make_client(requests_per_second=3).plaintext)
    statuses = [extract(client, ONE).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    refused = extract(client, ONE)
    problem = assert_problem(refused, 429, "rate_limited")
    assert "3 requests per second" in problem["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 2
    assert seed.pool.inventory("acme-us") == 7  # the refused call took nothing


def test_limits_are_per_client(api, make_client, seed):
    seed(n=4)
    first = api(make_client(requests_per_second=1).plaintext)
    second = api(make_client("crawler-2", requests_per_second=1).plaintext)
    assert extract(first, ONE).status_code == 200
    assert extract(second, ONE).status_code == 200
    assert_problem(extract(first, ONE), 429, "rate_limited")


def test_every_call_counts_even_a_bad_one(api, make_client):
    client = api(make_client(requests_per_second=2).plaintext)
    assert extract(client, {"count": 0, "mode": "partial"}).status_code == 400
    assert extract(client, ONE).status_code == 200
    assert_problem(extract(client, ONE), 429, "rate_limited")


@pytest.mark.parametrize(
    "bad_call",
    [
        pytest.param(lambda c: c.post(URL, "{nope", content_type="application/json"), id="json"),
        pytest.param(
            lambda c: c.post(URL, "count=1", content_type="application/x-www-form-urlencoded"),
            id="media-type",
        ),
        pytest.param(lambda c: extract(c, ONE, **{"Idempotency-Key": "x" * 300}), id="key"),
    ],
)
def test_a_call_refused_before_its_body_is_read_counts_too(api, make_client, seed, bad_call):
    seed(n=3)
    client = api(make_client(requests_per_second=2).plaintext)
    assert bad_call(client).status_code in (400, 415)
    assert extract(client, ONE).status_code == 200
    assert_problem(bad_call(client), 429, "rate_limited")  # over the limit, 429 comes first
    assert seed.pool.inventory("acme-us") == 2


def test_proxies_per_minute_checks_count_before_and_consumes_what_was_returned(
    api, make_client, seed
):
    seed(n=2)
    client = api(make_client(proxies_per_minute=5).plaintext)
    # A partial extract asking for 5 fits, and uses only the 2 it returned.
    assert extract(client, {"count": 5, "mode": "partial"}).json()["returned"] == 2
    seed(n=10)
    refused = extract(client, {"count": 4, "mode": "partial"})  # 2 + 4 > 5
    problem = assert_problem(refused, 429, "rate_limited")
    assert "per minute" in problem["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 120
    assert seed.pool.inventory("acme-us") == 10  # nothing taken
    assert extract(client, {"count": 3, "mode": "partial"}).json()["returned"] == 3
    assert_problem(extract(client, ONE), 429, "rate_limited")


def test_a_count_above_the_per_minute_limit_is_refused(api, make_client, seed):
    seed(n=5)
    client = api(make_client(proxies_per_minute=3).plaintext)
    response = extract(client, {"count": 4, "mode": "partial"})
    assert_problem(response, 429, "rate_limited")
    assert int(response["Retry-After"]) >= 1


def test_an_idempotent_replay_takes_no_proxies_from_the_limit(api, make_client, seed):
    seed(n=5)
    client = api(make_client(proxies_per_minute=4).plaintext)
    body = {"count": 2, "mode": "partial"}
    assert extract(client, body, **{"Idempotency-Key": "r1"}).json()["returned"] == 2
    assert extract(client, body, **{"Idempotency-Key": "r1"}).json()["replayed"] is True
    assert extract(client, body).json()["returned"] == 2  # 2 + 2 = 4: the replay counted 0


def test_limit_keys_name_the_client_never_an_api_key(
    api, make_client, seed, redis_url, unique_prefix
):
    seed(n=3)
    c = make_client("crawler-keys")
    client = api(c.plaintext)
    assert extract(client, ONE).status_code == 200
    store = redis.Redis.from_url(redis_url)
    try:
        keys = [k.decode() for k in store.scan_iter(f"{unique_prefix}:*quota*")]
        everything = [k.decode() for k in store.scan_iter(f"{unique_prefix}*")]
    finally:
        store.close()
    assert len(keys) == 2, keys  # the two limits of the one client
    assert all(k.endswith(":crawler-keys") for k in keys)
    # Not rsplit("_"): the random part may itself contain "_" (its tail alone can be one letter).
    secret = c.plaintext.removeprefix(f"pp_{c.key.prefix}_")
    for key in everything:
        assert c.plaintext not in key and secret not in key and c.key.prefix not in key


@pytest.mark.fault
def test_redis_down_is_503_and_no_extract(api, make_client, private_redis, unique_prefix):
    server = private_redis()
    bootstrap.point_at(server.url, unique_prefix)
    client = api(make_client().plaintext)
    assert extract(client, ONE).status_code == 200
    server.stop()
    response = extract(client, ONE)
    assert_problem(response, 503, "store_unavailable")
    assert int(response["Retry-After"]) >= 1


def test_windows_follow_the_pool_clock(api, make_client, seed, pool_clock):
    seed(n=5)
    client = api(make_client(requests_per_second=2).plaintext)
    assert [extract(client, ONE).status_code for _ in range(2)] == [200, 200]
    refused = extract(client, ONE)
    assert_problem(refused, 429, "rate_limited")
    # 2 calls at one instant: they decay as the previous window's after the next one starts.
    pool_clock.advance(timedelta(seconds=int(refused["Retry-After"])))
    assert extract(client, ONE).status_code == 200


def test_a_failed_extract_charges_no_proxy(api, make_client, seed):
    seed(n=2)
    client = api(make_client(proxies_per_minute=5).plaintext)
    short = extract(client, {"count": 5, "mode": "all_or_nothing"})
    assert_problem(short, 409, "insufficient_inventory")
    assert extract(client, {"count": 5, "mode": "partial"}).json()["returned"] == 2
    assert_problem(extract(client, {"count": 4, "mode": "partial"}), 429, "rate_limited")


def test_a_replay_is_answered_though_its_proxies_would_not_fit(api, make_client, seed):
    seed(n=3)
    client = api(make_client(proxies_per_minute=2).plaintext)
    body = {"count": 2, "mode": "partial"}
    first = extract(client, body, **{"Idempotency-Key": "r2"})
    again = extract(client, body, **{"Idempotency-Key": "r2"})
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["proxies"] == first.json()["proxies"]


def test_retry_after_is_whole_seconds_within_two_windows():
    assert ratelimit.retry_after(1, ratelimit.RPS_WINDOW) == 1
    assert ratelimit.retry_after(1001, ratelimit.RPS_WINDOW) == 2
    assert ratelimit.retry_after(10**9, ratelimit.RPS_WINDOW) == 2
    assert ratelimit.retry_after(48_001, ratelimit.PPM_WINDOW) == 49
    assert ratelimit.retry_after(0, ratelimit.PPM_WINDOW) == 1


def test_a_call_the_pool_refuses_as_invalid_counts_too(api, make_client, seed):
    """count + the client's gateway reserve over the pool's scan budget: a 400 from the pool,
    before it counted the call; the API counts it."""
    seed(n=2)
    client = api(make_client(requests_per_second=2, gateway_reserve=4_999).plaintext)
    assert_problem(extract(client, {"count": 2, "mode": "partial"}), 400, "invalid_request")
    assert extract(client, ONE).json()["returned"] == 0  # 1 + 4,999 fits; all held back
    assert_problem(extract(client, {"count": 2, "mode": "partial"}), 429, "rate_limited")
