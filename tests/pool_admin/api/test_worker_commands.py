"""Operator commands for gateway workers: create_worker and worker_token (their argument
errors are in test_commands.py's table of every project command)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pool_admin.api.gateway_auth import authenticate_token
from pool_admin.config.models import ApiKey, GatewayWorker, WorkerGroup, WorkerToken
from tests.pool_admin.api.command_lines import assert_refused, plaintext_in

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def worker(upstreams):
    """Gateway worker edge-1 in group edge-us, and the plaintext of its token."""
    group = WorkerGroup.objects.create(name="edge-us", target_capacity=30)
    group.allowed_upstreams.add(upstreams.us)
    row = GatewayWorker.objects.create(name="edge-1", group=group)
    token, plaintext = WorkerToken.objects.issue(row)
    return SimpleNamespace(row=row, group=group, token=token, plaintext=plaintext)


# ---------------------------------------------------------------------------- create_worker
def test_create_worker_prints_a_working_token_once(run, worker):
    code, out, _ = run("create_worker", "edge-2", "--group", "edge-us")
    assert code == 0
    assert "Created worker edge-2 in group edge-us (enabled)." in out
    plaintext = plaintext_in(out, "pw")
    principal = authenticate_token(plaintext)
    assert principal is not None and principal.worker_id == "edge-2"
    assert (principal.group, principal.target_capacity) == ("edge-us", 30)
    assert principal.allowed_upstreams == {"acme-us"}
    assert WorkerToken.objects.get(prefix=plaintext.split("_")[1]).key_hash not in out

    code, out, _ = run("create_worker", "edge-3", "--group", "edge-us", "--disabled")
    assert code == 0 and "(disabled)" in out
    assert authenticate_token(plaintext_in(out, "pw")) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["edge-1", "--group", "edge-us"], ["already exists", "edge-1"]),
        (["edge-2", "--group", "ghost"], ["unknown worker group", "ghost"]),
        (["bad name!", "--group", "edge-us"], ["invalid", "name"]),
    ],
)
def test_create_worker_bad_input_changes_nothing(run, worker, argv, words):
    assert_refused(run("create_worker", *argv), *words)
    assert list(GatewayWorker.objects.values_list("name", flat=True)) == ["edge-1"]
    assert WorkerToken.objects.count() == 1


# ----------------------------------------------------------------------------- worker_token
def test_worker_token_add_list_revoke(run, worker, make_client):
    make_client()  # an API client's key is never listed as a worker's token
    code, out, _ = run("worker_token", "add", "edge-1", "--name", "host-a")
    assert code == 0 and "Issued worker token pw_" in out
    added = plaintext_in(out, "pw")
    assert authenticate_token(added) is not None

    code, out, _ = run("worker_token", "list", "edge-1")
    assert code == 0
    assert f"pw_{worker.token.prefix}" in out and "host-a" in out and "active" in out
    assert worker.plaintext not in out and added not in out
    assert worker.token.key_hash not in out and added.split("_", 2)[2] not in out
    assert "pp_" not in out

    code, out, _ = run("worker_token", "revoke", f"pw_{worker.token.prefix}…")
    assert code == 0 and f"Revoked worker token pw_{worker.token.prefix}… of edge-1" in out
    assert "30 s" in out
    assert WorkerToken.objects.verify(worker.plaintext) is None
    assert WorkerToken.objects.verify(added) is not None
    code, out, _ = run("worker_token", "revoke", worker.token.prefix)
    assert code == 0 and "Worker token" in out and "already revoked" in out


def test_worker_token_list_without_a_worker_lists_every_worker(run, worker):
    other = GatewayWorker.objects.create(name="edge-2", group=worker.group)
    token, plaintext = WorkerToken.objects.issue(other)
    code, out, _ = run("worker_token", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["worker", "prefix"]
    assert lines[2].startswith(f"edge-1  pw_{worker.token.prefix}")
    assert lines[3].startswith(f"edge-2  pw_{token.prefix}")
    assert plaintext not in out and worker.plaintext not in out

    GatewayWorker.objects.create(name="edge-3", group=worker.group)
    code, out, _ = run("worker_token", "list", "edge-3")
    assert (code, out) == (0, "Worker edge-3 has no worker tokens.\n")


def test_worker_token_rotate_keeps_old_tokens_unless_told(run, worker):
    code, out, _ = run("worker_token", "rotate", "edge-1")
    assert code == 0
    first = plaintext_in(out, "pw")
    assert "stay valid" in out and worker.token.prefix in out
    assert "worker_token revoke PREFIX, or worker_token rotate edge-1 --revoke-old" in out
    assert WorkerToken.objects.verify(worker.plaintext) is not None
    assert WorkerToken.objects.verify(first) is not None

    code, out, _ = run("worker_token", "rotate", "edge-1", "--revoke-old")
    assert code == 0
    second = plaintext_in(out, "pw")
    assert "Revoked 2 older worker token(s)" in out
    assert WorkerToken.objects.verify(worker.plaintext) is None
    assert WorkerToken.objects.verify(first) is None
    assert authenticate_token(second) is not None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["add", "ghost"], ["unknown worker", "ghost"]),
        (["rotate", "ghost"], ["unknown worker"]),
        (["list", "ghost"], ["unknown worker"]),
        (["revoke", "pw_000000000000"], ["no worker token", "000000000000"]),
        (["add", "edge-1", "--name", "n" * 101], ["--name", "100"]),
    ],
)
def test_worker_token_bad_input_changes_nothing(run, worker, argv, words):
    assert_refused(run("worker_token", *argv), *words)
    assert WorkerToken.objects.count() == 1 and WorkerToken.objects.active().count() == 1


def test_worker_token_revoke_refuses_a_whole_token_and_an_api_key(run, worker, make_client):
    c = make_client()
    assert_refused(run("worker_token", "revoke", worker.plaintext), "prefix")
    # An API key's prefix names no worker token, even given bare.
    assert_refused(run("worker_token", "revoke", c.key.prefix), "no worker token")
    assert_refused(run("api_key", "revoke", f"pw_{worker.token.prefix}"), "no API key")
    assert WorkerToken.objects.active().count() == 1 and ApiKey.objects.active().count() == 1
