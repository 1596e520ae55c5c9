"""Gateway workers and their tokens: only a hash is stored, the prefix names a token, the token
is told apart from an API key, revoked and disabled tokens fail, a group in use stays."""

import hashlib
import re

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import ProtectedError

from activity.types import LABEL_PATTERN
from pool_admin.config.models import ApiKey, GatewayWorker, WorkerToken

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TOKEN_RE = re.compile(r"pw_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def worker(worker_group):
    return GatewayWorker.objects.create(name="edge-1", group=worker_group)


def test_issue_returns_plaintext_once_and_stores_only_a_hash(worker):
    token, plaintext = WorkerToken.objects.issue(worker, name="host-a")
    assert TOKEN_RE.fullmatch(plaintext) and plaintext.startswith(f"pw_{token.prefix}_")
    assert token.key_hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert str(token) == f"pw_{token.prefix}…"
    assert plaintext not in str(token) and plaintext not in repr(token)
    secret_part = plaintext.split("_", 2)[2]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM config_workertoken")
        rows = cursor.fetchall()
        cursor.execute("SELECT * FROM config_historicalworkertoken")
        history = cursor.fetchall()
    dump = repr(rows + history)
    assert plaintext not in dump and secret_part[-20:] not in dump
    assert token.prefix in dump
    assert history and token.key_hash not in repr(history)  # history keeps no hash either


def test_verify_finds_the_token_and_refuses_anything_else(worker):
    token, plaintext = WorkerToken.objects.issue(worker)
    found = WorkerToken.objects.verify(plaintext)
    assert found == token and found.worker == worker and found.worker.group.name == "edge-eu"
    tampered = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
    as_api_key = "pp_" + plaintext.removeprefix("pw_")  # the same secret in the other scheme
    for wrong in (tampered, "", "pw_", "nonsense", plaintext + "x", plaintext.upper(), as_api_key):
        assert WorkerToken.objects.verify(wrong) is None
    assert ApiKey.objects.verify(plaintext) is None


def test_an_api_key_is_never_a_worker_token(worker, api_client):
    key, key_text = ApiKey.objects.issue(api_client)
    assert WorkerToken.objects.verify(key_text) is None
    assert WorkerToken.prefix_of(key_text) is None and ApiKey.prefix_of(key_text) == key.prefix
    # Even a worker token with the key's own prefix is not the key.
    WorkerToken.objects.create(worker=worker, prefix=key.prefix, key_hash=key.key_hash)
    assert WorkerToken.objects.verify(key_text) is None
    assert ApiKey.objects.verify(key_text) == key


def test_revoked_tokens_and_disabled_workers_do_not_verify(worker):
    old, old_text = WorkerToken.objects.issue(worker)
    new, new_text = WorkerToken.objects.issue(worker)
    old.revoke()
    assert WorkerToken.objects.verify(old_text) is None
    assert WorkerToken.objects.verify(new_text) == new
    assert list(WorkerToken.objects.active()) == [new]
    assert old.history.first().revoked_at == old.revoked_at

    worker.enabled = False
    worker.save()
    assert WorkerToken.objects.verify(new_text) is None


def test_a_worker_name_is_a_pool_label_and_unique(worker, worker_group):
    assert re.fullmatch(LABEL_PATTERN, worker.name)
    for bad in ("edge 1", "-edge", "e" * 65, "édge"):
        with pytest.raises(ValidationError) as info:
            GatewayWorker.objects.create(name=bad, group=worker_group)
        assert "name" in info.value.error_dict
    with pytest.raises(ValidationError):
        GatewayWorker.objects.create(name="edge-1", group=worker_group)


def test_a_group_with_workers_cannot_be_deleted(worker, worker_group):
    with pytest.raises(ProtectedError):
        worker_group.delete()
    assert GatewayWorker.objects.get().group == worker_group
