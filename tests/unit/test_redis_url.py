"""``redis+sentinel://`` URLs (activity/redis_url.py): read into Sentinels, master and database;
refused with a reason that never holds the password; translated for Celery's broker (no I/O)."""

import pytest

from activity.env import EnvError, env_url
from activity.redis_url import (
    RedisURLError,
    SentinelTarget,
    is_sentinel_url,
    kombu_sentinel,
    parse_sentinel_url,
)

REDIS = frozenset({"redis", "rediss", "unix", "redis+sentinel"})
URL = "redis+sentinel://:s3cret@10.0.0.5:26379,10.0.0.6:26380,[::1]:26381/pool/2"


def test_a_sentinel_url_names_its_sentinels_master_and_database():
    target = parse_sentinel_url(URL)
    assert target == SentinelTarget(
        (("10.0.0.5", 26379), ("10.0.0.6", 26380), ("::1", 26381)), "pool", 2, None, "s3cret"
    )
    assert "s3cret" not in repr(target)
    assert parse_sentinel_url("redis+sentinel://h:26379/pool").db == 0
    assert is_sentinel_url("REDIS+SENTINEL://h:1/m") and not is_sentinel_url("redis://h:1/0")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis+sentinel://:s3cret@h/pool", "each Sentinel is host:port"),
        ("redis+sentinel://:s3cret@h:0/pool", "each Sentinel is host:port"),
        ("redis+sentinel://:s3cret@h:26379,/pool", "each Sentinel is host:port"),
        ("redis+sentinel://:s3cret@h:26379", "path is /master_name"),
        ("redis+sentinel://:s3cret@h:26379/pool/0/x", "path is /master_name"),
        ("redis+sentinel://:s3cret@h:26379/pool/zero", "database must be a number"),
        ("redis+sentinel://:s3cret@h x:26379/pool", "each Sentinel is host:port"),
        ("redis+sentinel://:s3cret@h:26379/po%20ol", "master's name must be printable"),
        ("redis+sentinel://" + ",".join(f"h{n}:1" for n in range(17)) + "/m", "at most 16"),
    ],
)
def test_a_bad_sentinel_url_is_refused_with_its_reason(url, reason, monkeypatch):
    with pytest.raises(RedisURLError, match=reason) as info:
        parse_sentinel_url(url)
    assert "s3cret" not in str(info.value)
    monkeypatch.setenv("REDIS_URL", url)
    with pytest.raises(EnvError, match=f"REDIS_URL: .*{reason}") as refused:
        env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS)
    assert "s3cret" not in str(refused.value)


def test_the_settings_take_a_sentinel_url_only_where_it_is_allowed(monkeypatch):
    monkeypatch.setenv("REDIS_URL", URL)
    assert env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS) == URL
    with pytest.raises(EnvError, match="must use one of the schemes") as info:
        env_url("REDIS_URL", "redis://127.0.0.1/0", frozenset({"redis"}))
    assert "s3cret" not in str(info.value)


def test_celerys_broker_gets_kombus_form():
    broker, options = kombu_sentinel(URL)
    assert broker == (
        "sentinel://:s3cret@10.0.0.5:26379/2;sentinel://:s3cret@10.0.0.6:26380/2;"
        "sentinel://:s3cret@[::1]:26381/2"
    )
    assert not broker.endswith(";")  # kombu would add a localhost Sentinel
    assert options["master_name"] == "pool"
    assert kombu_sentinel("redis+sentinel://h:1/m/0")[0] == "sentinel://h:1/0"
