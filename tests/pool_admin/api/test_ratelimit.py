"""Per-client rate limits of the extract API, counted in Redis (pool_admin/api/ratelimit.py)."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import NamedTuple

import pytest
import redis

from pool_admin.api import ratelimit
from pool_admin.api.problems import RateLimited
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


def test_windows_follow_redis_clock_when_the_limiter_has_none(redis_clock, redis_url):
    """Production's limiter reads Redis's TIME (the other tests here freeze or move a clock)."""
    limiter = ratelimit.get_limiter()
    assert limiter._now_ms() == -1
    who = Who("c-redis-clock", requests_per_second=2, proxies_per_minute=10)
    limiter.take(who, 1)
    limiter.take(who, 1)  # within 2 per second whenever the window rolls over
    rps_key, ppm_key = limiter.keys(who)
    rps, ppm = counts(limiter, rps_key), counts(limiter, ppm_key)
    # Both calls counted, in the current window or (rolled over between them) the previous.
    assert rps["c"] + rps["p"] == 2 and ppm["c"] + ppm["p"] == 2
    assert abs(rps["w"] - limiter.redis.time()[0]) <= 1  # 1-second windows on Redis's clock


def test_limiter_follows_the_pool_target(redis_url, unique_prefix):
    limiter = ratelimit.get_limiter()
    assert limiter.key_prefix == f"{unique_prefix}:ratelimit"
    assert ratelimit.get_limiter() is limiter


def test_a_failed_extract_gives_back_its_whole_count(api, make_client, seed):
    seed(n=2)
    client = api(make_client(proxies_per_minute=5).plaintext)
    short = extract(client, {"count": 5, "mode": "all_or_nothing"})
    assert_problem(short, 409, "insufficient_inventory")
    # The 5 taken ahead of the extract were given back, so 5 more still fit.
    assert extract(client, {"count": 5, "mode": "partial"}).json()["returned"] == 2
    assert_problem(extract(client, {"count": 4, "mode": "partial"}), 429, "rate_limited")


# ------------------------------------------------------------ the limiter itself, on a clock
T0 = 1_800_000_000.0  # a whole minute: both windows start here


class Who(NamedTuple):
    client_id: str
    requests_per_second: int = 100_000
    proxies_per_minute: int = 1_000


@pytest.fixture
def clocked(redis_url, unique_prefix):
    """A limiter on this test's prefix whose clock is ``now[0]`` (seconds)."""
    now = [T0]
    limiter = ratelimit.ClientLimiter(redis_url, unique_prefix, clock=lambda: now[0])
    yield limiter, now
    limiter.close()


def refused(limiter, who, count) -> int:
    """The Retry-After of a refused take (the test fails if it is not refused)."""
    with pytest.raises(RateLimited) as caught:
        limiter.take(who, count)
    return int(caught.value.headers["Retry-After"])


def counts(limiter, key) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in limiter.redis.hgetall(key).items()}


def test_one_take_checks_and_takes_both_limits(clocked):
    limiter, _ = clocked
    who = Who("c-both", requests_per_second=2, proxies_per_minute=3)
    limiter.take(who, 3)
    rps_key, ppm_key = limiter.keys(who)
    assert counts(limiter, rps_key)["c"] == 1 and counts(limiter, ppm_key)["c"] == 3
    refused(limiter, who, 1)  # no proxy left; the request is still taken ...
    assert counts(limiter, rps_key)["c"] == 2 and counts(limiter, ppm_key)["c"] == 3
    # ... so the requests per second are used up too: at T0 + 1 s both still count in full.
    assert refused(limiter, who, 0) == 2
    assert counts(limiter, rps_key)["c"] == 2  # and a refused request takes nothing


def test_hit_request_takes_one_request_and_no_proxy(clocked):
    limiter, _ = clocked
    who = Who("c-hit", requests_per_second=2, proxies_per_minute=3)
    limiter.hit_request(who)
    limiter.hit_request(who)
    with pytest.raises(RateLimited):
        limiter.hit_request(who)
    assert not limiter.redis.exists(limiter.keys(who)[1])


def test_takes_are_atomic_under_concurrency(clocked, redis_url, unique_prefix):
    _, now = clocked
    who = Who("c-race", proxies_per_minute=100)
    threads, calls, taken = 16, [0], []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def hammer() -> None:
        # One limiter per thread, like separate web processes.
        own = ratelimit.ClientLimiter(redis_url, unique_prefix, clock=lambda: now[0])
        try:
            barrier.wait()
            while True:
                with lock:
                    calls[0] += 1
                try:
                    reservation = own.take(who, 3)
                except RateLimited:
                    return
                with lock:
                    taken.append(reservation.count)
        finally:
            own.close()

    pool = [threading.Thread(target=hammer) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert sum(taken) == 99  # 33 takes of 3 fit in 100, and not one more
    limiter = clocked[0]
    rps_key, ppm_key = limiter.keys(who)
    assert counts(limiter, ppm_key)["c"] == 99
    assert counts(limiter, rps_key)["c"] == calls[0]  # every call took its request


def test_refund_gives_back_in_the_window_it_was_taken_from(clocked):
    limiter, now = clocked
    who = Who("c-refund", proxies_per_minute=5)
    first = limiter.take(who, 5)
    refused(limiter, who, 1)
    assert limiter.refund(first, 3)
    limiter.take(who, 3)
    refused(limiter, who, 1)

    now[0] += 60  # the next window: those 5 now count as its previous window, all of them
    refused(limiter, who, 1)
    assert limiter.refund(first, 2)  # given back from the previous window's count
    limiter.take(who, 2)
    refused(limiter, who, 1)

    now[0] += 120  # the first window no longer counts: nothing to give back
    assert not limiter.refund(first, 1)
    assert limiter.refund(first, 0) is False


def assert_fits_after(limiter, now, who, cost, retry_after):
    """Refused now with this Retry-After; still refused a second sooner; fits after it."""
    start = now[0]
    assert refused(limiter, who, cost) == retry_after
    if retry_after > 1:
        now[0] = start + retry_after - 1
        refused(limiter, who, cost)
    now[0] = start + retry_after
    limiter.take(who, cost)


def test_retry_after_when_this_window_alone_is_full(clocked):
    limiter, now = clocked
    who = Who("c-ra1", proxies_per_minute=10)
    now[0] = T0 + 30
    limiter.take(who, 10)
    # 10 units must decay as the previous window's to 6: 30 s to its end, then 18 s.
    assert_fits_after(limiter, now, who, 4, 49)


def test_retry_after_when_the_previous_window_decays(clocked):
    limiter, now = clocked
    who = Who("c-ra2", proxies_per_minute=10)
    limiter.take(who, 8)
    now[0] = T0 + 60
    limiter.take(who, 2)  # 8 (previous, whole) + 2
    # floor(8 * (1 - t/60)) must fall to 5: after 15 s.
    assert_fits_after(limiter, now, who, 3, 16)


def test_retry_after_of_the_requests_per_second_limit(clocked):
    limiter, now = clocked
    who = Who("c-ra3", requests_per_second=3)
    now[0] = T0 + 0.2
    for _ in range(3):
        limiter.hit_request(who)
    assert_fits_after(limiter, now, who, 0, 1)


def test_retry_after_is_the_first_whole_second_that_fits(clocked):
    """Random histories: a refused take fits after Retry-After seconds and not a second sooner."""
    limiter, now = clocked
    rng = random.Random(5)
    checked = 0
    for case in range(60):
        limit = rng.choice([3, 10, 50])
        history, t = [], T0 + rng.randrange(0, 60_000) / 1000
        for _ in range(rng.randrange(1, 6)):
            history.append((t, rng.randrange(1, limit + 1)))
            t += rng.randrange(0, 40_000) / 1000
        cost = rng.randrange(1, limit + 1)

        def replay(name: str, history=history, limit=limit, case=case) -> Who:
            who = Who(f"c-rand-{case}-{name}", proxies_per_minute=limit)
            for at, units in history:
                now[0] = at
                with contextlib.suppress(RateLimited):
                    limiter.take(who, units)
            return who

        who = replay("a")
        now[0] = t
        try:
            limiter.take(who, cost)
            continue  # it fitted: nothing to check
        except RateLimited as exc:
            wait = int(exc.headers["Retry-After"])
        assert 1 <= wait <= 120
        later = replay("b")
        now[0] = t + wait
        limiter.take(later, cost)
        if wait > 1:
            sooner = replay("c")
            now[0] = t + wait - 1
            refused(limiter, sooner, cost)
        checked += 1
    assert checked >= 20


def test_scripts_flushed_on_the_server_are_loaded_again(private_redis, unique_prefix):
    """A restart or SCRIPT FLUSH between two calls: the limiter loads its script and goes on."""
    server = private_redis()
    limiter = ratelimit.ClientLimiter(server.url, unique_prefix, clock=lambda: T0)
    try:
        who = Who("c-flush", requests_per_second=5, proxies_per_minute=10)
        limiter.take(who, 2)
        limiter.redis.script_flush()
        limiter.take(who, 3)
        assert counts(limiter, limiter.keys(who)[1])["c"] == 5
    finally:
        limiter.close()
