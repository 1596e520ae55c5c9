"""The typed environment readers fail fast and name the variable (no I/O)."""

import pytest

from activity.env import (
    EnvError,
    check_fernet_key,
    check_fernet_keys,
    env_bool,
    env_int,
    env_list,
    env_secret,
    env_str,
    env_url,
)

REDIS = frozenset({"redis", "rediss", "unix"})


def test_bool_accepts_the_usual_spellings(monkeypatch):
    for raw, expected in [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("off", False)]:
        monkeypatch.setenv("FLAG", raw)
        assert env_bool("FLAG") is expected
    monkeypatch.delenv("FLAG")
    assert env_bool("FLAG") is False
    assert env_bool("FLAG", default=True) is True


def test_bool_rejects_anything_else_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(EnvError, match=r"^DEBUG must be one of"):
        env_bool("DEBUG")


def test_str_required_without_default(monkeypatch):
    monkeypatch.delenv("SOMETHING", raising=False)
    with pytest.raises(EnvError, match="SOMETHING is required"):
        env_str("SOMETHING")
    assert env_str("SOMETHING", "fallback") == "fallback"


def test_int_and_list(monkeypatch):
    monkeypatch.setenv("N", "x")
    with pytest.raises(EnvError, match="N must be an integer"):
        env_int("N", 3)
    monkeypatch.setenv("N", "1")
    with pytest.raises(EnvError, match="N must be >= 2"):
        env_int("N", 3, minimum=2)
    monkeypatch.setenv("ALLOWED_HOSTS", " a.example , ,b.example")
    assert env_list("ALLOWED_HOSTS", "x") == ["a.example", "b.example"]
    monkeypatch.setenv("ALLOWED_HOSTS", " , ")
    with pytest.raises(EnvError, match="ALLOWED_HOSTS must list"):
        env_list("ALLOWED_HOSTS", "x")


def test_url_checks_scheme_host_and_port_without_leaking_the_password(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "http://user:hunter2@host:6379/0")
    with pytest.raises(EnvError, match="REDIS_URL must use one of the schemes") as info:
        env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS)
    assert "hunter2" not in str(info.value)
    monkeypatch.setenv("REDIS_URL", "redis://user:hunter2@host:notaport/0")
    with pytest.raises(EnvError, match="REDIS_URL is not a valid URL") as info:
        env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS)
    assert "hunter2" not in str(info.value)
    monkeypatch.setenv("REDIS_URL", "redis:///0")
    with pytest.raises(EnvError, match="REDIS_URL must name a host"):
        env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS)
    monkeypatch.setenv("REDIS_URL", "rediss://h:6380/1")
    assert env_url("REDIS_URL", "redis://127.0.0.1/0", REDIS) == "rediss://h:6380/1"


def test_secret_dev_default_only_when_allowed(monkeypatch):
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    assert env_secret("DJANGO_SECRET_KEY", "dev", allow_dev_default=True) == "dev"
    with pytest.raises(EnvError, match="DJANGO_SECRET_KEY is required"):
        env_secret("DJANGO_SECRET_KEY", "dev", allow_dev_default=False)
    monkeypatch.setenv("DJANGO_SECRET_KEY", "real")
    assert env_secret("DJANGO_SECRET_KEY", "dev", allow_dev_default=False) == "real"


def test_fernet_key_shape_is_checked_without_echoing_it():
    with pytest.raises(EnvError, match="POOL_SECRET_KEY must be urlsafe base64") as info:
        check_fernet_key("POOL_SECRET_KEY", "too-short-secret")
    assert "too-short-secret" not in str(info.value)
    key = "ZGV2LW9ubHktcG9vbC1zZWNyZXQta2V5LTMyYnl0ZXM="
    assert check_fernet_key("POOL_SECRET_KEY", key) == key


def test_fernet_keys_are_comma_separated_newest_first():
    key = "ZGV2LW9ubHktcG9vbC1zZWNyZXQta2V5LTMyYnl0ZXM="
    other = "b-OoQPlFiyIBGOU9KNODvm-Zg5FuQCINeaRXyt07FxI="
    assert check_fernet_keys("POOL_SECRET_KEY", key) == (key,)
    assert check_fernet_keys("POOL_SECRET_KEY", f" {other} , {key},") == (other, key)
    with pytest.raises(EnvError, match="POOL_SECRET_KEY must list at least one"):
        check_fernet_keys("POOL_SECRET_KEY", " , ")
    with pytest.raises(EnvError, match=r"POOL_SECRET_KEY must be urlsafe base64.*item 2") as info:
        check_fernet_keys("POOL_SECRET_KEY", f"{key},short-secret-value")
    assert "short-secret-value" not in str(info.value)
    with pytest.raises(EnvError, match=r"^POOL_SECRET_KEY must be urlsafe base64 of 32 bytes"):
        check_fernet_keys("POOL_SECRET_KEY", "short-secret-value")
