"""The gateway workers' admin: a token's plaintext is shown exactly once, on the worker's page;
tokens are revoked from the worker list, the token list or the token's page; a worker's name
(its ID in the pool) is fixed once created."""

import re

import pytest

from pool_admin.api.gateway_auth import authenticate_token
from pool_admin.config.models import GatewayWorker, WorkerToken

from .conftest import url

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TOKEN_RE = re.compile(r"pw_[0-9a-f]{12}_[A-Za-z0-9_-]{40,}")


def worker_form(group, **overrides):
    data = {
        "name": "edge-9",
        "group": str(group.pk),
        "enabled": "on",
        "tokens-TOTAL_FORMS": "0",
        "tokens-INITIAL_FORMS": "0",
        "tokens-MIN_NUM_FORMS": "0",
        "tokens-MAX_NUM_FORMS": "1000",
    }
    return {**data, **overrides}


def test_a_new_workers_token_is_shown_exactly_once(client, boss, worker_group):
    form = client.get(url(GatewayWorker, "add")).content.decode()
    assert "Issue a new worker token on save" in form
    assert re.search(r'<input[^>]*name="issue_key"[^>]*checked', form)  # on by default
    response = client.post(
        url(GatewayWorker, "add"), worker_form(worker_group, issue_key="on"), follow=True
    )
    assert response.status_code == 200
    found = TOKEN_RE.findall(response.content.decode())
    assert len(found) == 1
    plaintext = found[0]
    worker = GatewayWorker.objects.get(name="edge-9")
    token = WorkerToken.objects.verify(plaintext)
    assert token is not None and token.worker == worker
    principal = authenticate_token(plaintext)
    assert principal is not None and (principal.worker_id, principal.group) == ("edge-9", "edge-eu")
    assert worker.history.first().history_user.username == "boss"

    later = [
        url(GatewayWorker, "changelist"),
        url(GatewayWorker, "change", worker.pk),
        url(GatewayWorker, "history", worker.pk),
        url(WorkerToken, "changelist"),
        url(WorkerToken, "change", token.pk),
        url(WorkerToken, "history", token.pk),
    ]
    for page in later:
        html = client.get(page).content.decode()
        assert plaintext not in html and token.key_hash not in html, page
        assert not TOKEN_RE.search(html), page
    assert token.prefix in client.get(url(GatewayWorker, "change", worker.pk)).content.decode()


def test_saving_a_worker_without_the_checkbox_issues_nothing_and_keeps_its_name(
    client, boss, worker_group
):
    worker = GatewayWorker.objects.create(name="edge-1", group=worker_group)
    token, plaintext = WorkerToken.objects.issue(worker)
    data = worker_form(worker_group, name="edge-renamed", enabled="")
    # The read-only token inline posts back as the browser sends it.
    data.update(
        {"tokens-TOTAL_FORMS": "1", "tokens-INITIAL_FORMS": "1", "tokens-0-id": str(token.pk)}
    )
    data["tokens-0-worker"] = str(worker.pk)
    response = client.post(url(GatewayWorker, "change", worker.pk), data, follow=True)
    assert response.status_code == 200
    assert not TOKEN_RE.search(response.content.decode())
    worker.refresh_from_db()
    assert (worker.name, worker.enabled) == ("edge-1", False)  # the name is read-only
    assert list(WorkerToken.objects.all()) == [token]
    assert WorkerToken.objects.verify(plaintext) is None  # a disabled worker's token fails

    data.update(enabled="on", issue_key="on")
    response = client.post(url(GatewayWorker, "change", worker.pk), data, follow=True)
    [second] = TOKEN_RE.findall(response.content.decode())
    assert WorkerToken.objects.verify(second) is not None
    assert WorkerToken.objects.verify(plaintext) == token  # the old one still works


def test_the_worker_list_counts_active_tokens_and_revokes_them(client, boss, worker_group):
    one = GatewayWorker.objects.create(name="edge-1", group=worker_group)
    two = GatewayWorker.objects.create(name="edge-2", group=worker_group)
    tokens = [WorkerToken.objects.issue(w)[0] for w in (one, one, two)]
    tokens[0].revoke()
    listing = client.get(url(GatewayWorker, "changelist")).content.decode()
    assert re.search(r'field-active_tokens">1<', listing) and "edge-eu" in listing

    response = client.post(
        url(GatewayWorker, "changelist"),
        {"action": "revoke_tokens", "_selected_action": [one.pk]},
        follow=True,
    )
    assert "Revoked 1 worker token(s) of 1 worker(s)" in response.content.decode()
    assert list(WorkerToken.objects.active()) == [tokens[2]]
    tokens[1].refresh_from_db()
    assert tokens[1].history.first().history_user.username == "boss"


def test_a_token_is_revoked_from_the_token_list_and_its_own_page(client, boss, worker_group):
    worker = GatewayWorker.objects.create(name="edge-1", group=worker_group)
    (keep, keep_text), (drop, drop_text) = (WorkerToken.objects.issue(worker) for _ in range(2))
    response = client.post(
        url(WorkerToken, "changelist"),
        {"action": "revoke", "_selected_action": [drop.pk]},
        follow=True,
    )
    assert "Revoked 1 worker token(s)." in response.content.decode()
    assert WorkerToken.objects.verify(drop_text) is None
    revoked = client.get(url(WorkerToken, "changelist") + "?status=revoked").content.decode()
    assert drop.prefix in revoked and keep.prefix not in revoked

    page = client.get(url(WorkerToken, "change", keep.pk)).content.decode()
    assert 'value="Revoke this worker token" name="_revoke"' in page
    response = client.post(
        url(WorkerToken, "change", keep.pk), {"name": "", "_revoke": "1"}, follow=True
    )
    html = response.content.decode()
    assert f"Revoked worker token {keep}." in html and 'name="_revoke"' not in html
    assert WorkerToken.objects.verify(keep_text) is None
    assert client.get(url(WorkerToken, "add")).status_code == 403
