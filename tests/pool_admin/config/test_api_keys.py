"""API keys: only a hash is stored, verification works, revoked keys fail."""

import hashlib
from datetime import timedelta

import pytest
from django.db import connection

from pool_admin.config.models import ApiKey

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_issue_returns_plaintext_once_and_stores_only_a_hash(api_client):
    key, plaintext = ApiKey.objects.issue(api_client, name="prod")
    assert plaintext.startswith(f"pp_{key.prefix}_")
    assert len(plaintext) > 50  # 256 random bits after the prefix
    assert key.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert plaintext not in str(key) and plaintext not in repr(key)
    secret_part = plaintext.split("_", 2)[2][-20:]  # pp_<prefix>_<random>; random may hold "_"
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM config_apikey")
        rows = cursor.fetchall()
        cursor.execute("SELECT * FROM config_historicalapikey")
        rows += cursor.fetchall()
    dump = repr(rows)
    assert plaintext not in dump and secret_part not in dump
    assert key.key_hash not in repr(rows[1:])  # history keeps no hash either


def test_verify_finds_the_key_and_refuses_anything_else(api_client):
    key, plaintext = ApiKey.objects.issue(api_client)
    assert ApiKey.objects.verify(plaintext) == key
    assert ApiKey.objects.verify(plaintext).client == api_client
    tampered = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
    for wrong in (tampered, "", "pp_", "nonsense", plaintext + "x", plaintext.upper()):
        assert ApiKey.objects.verify(wrong) is None


def test_several_keys_per_client_for_rotation_and_revocation(api_client):
    old, old_text = ApiKey.objects.issue(api_client, name="old")
    new, new_text = ApiKey.objects.issue(api_client, name="new")
    assert old.prefix != new.prefix
    assert ApiKey.objects.verify(old_text) == old
    assert ApiKey.objects.verify(new_text) == new

    old.revoke()
    assert old.revoked_at is not None and not old.is_active
    assert ApiKey.objects.verify(old_text) is None
    assert ApiKey.objects.verify(new_text) == new
    assert list(ApiKey.objects.active()) == [new]
    revoked_at = old.revoked_at
    old.revoke()  # idempotent
    old.refresh_from_db()
    assert old.revoked_at == revoked_at
    assert old.history.first().revoked_at == revoked_at


def test_disabled_client_keys_do_not_verify(api_client):
    _, plaintext = ApiKey.objects.issue(api_client)
    api_client.enabled = False
    api_client.save()
    assert ApiKey.objects.verify(plaintext) is None


def test_touch_records_use_at_most_once_a_minute(api_client):
    key, _ = ApiKey.objects.issue(api_client)
    assert key.last_used_at is None
    key.touch()
    first = key.last_used_at
    assert first is not None
    key.touch()
    key.refresh_from_db()
    assert key.last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    key.refresh_from_db()
    key.touch()
    assert key.last_used_at > first


def test_prefix_collision_is_retried(api_client, monkeypatch):
    first, _ = ApiKey.objects.issue(api_client)
    prefixes = iter([first.prefix, "0123456789ab"])
    monkeypatch.setattr(
        "pool_admin.config.models.bearer.secrets.token_hex", lambda n: next(prefixes)
    )
    second, plaintext = ApiKey.objects.issue(api_client)
    assert second.prefix == "0123456789ab"
    assert ApiKey.objects.verify(plaintext) == second
