"""Per-client rate limits of the extract API, counted in Redis (pool_admin/api/ratelimit.py)."""

from __future__ import annotations

import pytest
import redis

from pool_admin.api import ratelimit
from tests.pool_admin.api.test_extract import assert_problem, extract

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


def test_limiter_keys_name_the_client_never_an_api_key(
    api, make_client, seed, redis_url, unique_prefix
):
    seed(n=3)
    c = make_client("crawler-keys")
    client = api(c.plaintext)
    assert extract(client, ONE).status_code == 200
    store = redis.Redis.from_url(redis_url)
    try:
        keys = [k.decode() for k in store.scan_iter(f"{unique_prefix}:ratelimit:*")]
        everything = [k.decode() for k in store.scan_iter(f"{unique_prefix}*")]
    finally:
        store.close()
    assert keys, "no limiter key under <prefix>:ratelimit"
    assert all("crawler-keys" in k for k in keys)
    secret = c.plaintext.rsplit("_", 1)[-1]
    for key in everything:
        assert c.plaintext not in key and secret not in key and c.key.prefix not in key


@pytest.mark.fault
def test_redis_down_for_the_limiter_is_503_and_no_extract(
    api, make_client, private_redis, unique_prefix
):
    from pool_admin import pool as pool_module

    server = private_redis()
    pool_module.reset_pool(server.url, unique_prefix)
    client = api(make_client().plaintext)
    assert extract(client, ONE).status_code == 200
    server.stop()
    response = extract(client, ONE)
    assert_problem(response, 503, "store_unavailable")
    assert int(response["Retry-After"]) >= 1


def test_limiter_follows_the_pool_target(redis_url, unique_prefix):
    limiter = ratelimit.get_limiter()
    assert limiter.storage.key_prefix == f"{unique_prefix}:ratelimit"
    assert ratelimit.get_limiter() is limiter
