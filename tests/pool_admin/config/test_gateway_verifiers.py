"""An API key's gateway verifier (pool_admin/config/models/clients.py): made from the plaintext
while it exists (issued or adopted), salted per key, never in the key's history, and no other
kind of secret has one."""

from __future__ import annotations

import pytest

from gateway_runtime.wire import verify
from pool_admin.config.models import ApiClient, ApiKey, GatewayWorker, WorkerGroup, WorkerToken

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

ADOPTED = "pp_0123456789ab_abcdefghijklmnopqrstuvwxyz0123456789"


def test_an_issued_or_adopted_key_gets_a_verifier_of_its_own():
    client = ApiClient.objects.create(name="shop")
    one, one_text = ApiKey.objects.issue(client)
    two, two_text = ApiKey.objects.issue(client)
    adopted = ApiKey.objects.adopt(client, ADOPTED)
    assert verify(one_text, one.gateway_verifier) and verify(two_text, two.gateway_verifier)
    assert verify(ADOPTED, adopted.gateway_verifier)
    assert not verify(one_text, two.gateway_verifier)
    assert one.key_hash not in one.gateway_verifier and one_text not in one.gateway_verifier
    # The same key adopted again is the same row, verifier and all.
    again = ApiKey.objects.adopt(client, ADOPTED)
    assert (again.pk, again.gateway_verifier) == (adopted.pk, adopted.gateway_verifier)


def test_the_verifier_stays_out_of_history_and_worker_tokens_have_none():
    client = ApiClient.objects.create(name="shop")
    key, _ = ApiKey.objects.issue(client)
    key.revoke()
    fields = {f.name for f in ApiKey.history.model._meta.get_fields()}
    assert {"gateway_verifier", "key_hash", "last_used_at"}.isdisjoint(fields)
    assert key.history.count() == 2
    group = WorkerGroup.objects.create(name="edge", target_capacity=1)
    token, _ = WorkerToken.objects.issue(GatewayWorker.objects.create(name="w1", group=group))
    assert not hasattr(token, "gateway_verifier")
    assert {"key_hash", "last_used_at"}.isdisjoint(
        {f.name for f in WorkerToken.history.model._meta.get_fields()}
    )
