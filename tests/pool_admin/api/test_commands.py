"""Operator commands: create_client, api_key, list_upstreams, extract, sweep_pool, and the
argument errors of every project command (create_worker and worker_token: test_worker_commands.py).

Each runs as from the command line (``ManagementUtility``), so a bad input is checked for what
an operator sees: exit status 1, one line on stderr, and nothing changed. Argument errors are
also checked through a real ``manage.py`` in a child process.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.core.management import (
    CommandError,
    call_command,
    get_commands,
    load_command_class,
)

from gateway_runtime.wire import verify
from pool_admin import bootstrap
from pool_admin.api.auth import authenticate_key
from pool_admin.config.models import ApiClient, ApiKey, GatewayWorker, WorkerToken
from pool_admin.localservices import free_port
from pool_admin.management.cli import OperatorCommand
from pool_admin.management.commands.extract import OPERATOR_KEY
from tests.harness.commands import database_url_of_test_db, manage
from tests.pool_admin.api.command_lines import assert_refused, logged_calls, plaintext_in
from tests.pool_admin.api.conftest import PROXY_PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]


# ---------------------------------------------------------------------------- create_client
def test_create_client_prints_a_working_key_once(run, upstreams):
    code, out, _ = run("create_client", "crawler-9", "--rps", "7", "--proxies-per-minute",
                       "300", "--max-count", "20", "--upstream", "acme-us")  # fmt: skip
    assert code == 0
    client = ApiClient.objects.get(name="crawler-9")
    assert (client.requests_per_second, client.proxies_per_minute) == (7, 300)
    assert client.max_count_per_request == 20
    assert list(client.allowed_upstreams.values_list("name", flat=True)) == ["acme-us"]
    plaintext = plaintext_in(out)
    principal = authenticate_key(plaintext)
    assert principal is not None and principal.client_id == "crawler-9"
    assert principal.requests_per_second == 7
    assert principal.may_view_inventory is False and "inventory: not visible" in out


def test_create_client_may_let_it_see_the_inventory(run, upstreams):
    code, out, _ = run("create_client", "crawler-8", "--may-view-inventory")
    assert code == 0 and "inventory: visible" in out
    assert ApiClient.objects.get(name="crawler-8").may_view_inventory is True
    assert "gateway: not allowed" in out


def test_create_client_may_let_it_use_the_gateway(run, upstreams):
    code, out, _ = run("create_client", "shop-1", "--gateway")
    assert code == 0 and "gateway: allowed" in out
    client = ApiClient.objects.get(name="shop-1")
    assert client.gateway_enabled is True
    assert verify(plaintext_in(out), client.keys.get().gateway_verifier)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["crawler-9", "--rps", "abc"], ["--rps", "whole number"]),
        (["crawler-9", "--rps", "0"], ["--rps", "between"]),
        (["crawler-9", "--max-count", "5000"], ["--max-count"]),
        (["crawler-9", "--proxies-per-minute", "-3"], ["--proxies-per-minute"]),
        (["crawler-9", "--upstream", "nope"], ["unknown upstream", "nope"]),
        (["bad name!"], ["name"]),
    ],
)
def test_create_client_bad_input_changes_nothing(run, upstreams, argv, words):
    assert_refused(run("create_client", *argv), *words)
    assert not ApiClient.objects.exists() and not ApiKey.objects.exists()


def test_create_client_twice_is_refused(run, make_client):
    make_client("crawler-1")
    assert_refused(run("create_client", "crawler-1"), "already exists")
    assert ApiKey.objects.count() == 1


# ---------------------------------------------------------------------------------- api_key
def test_api_key_add_list_revoke(run, make_client):
    c = make_client()
    code, out, _ = run("api_key", "add", "crawler-1", "--name", "prod")
    assert code == 0
    added = plaintext_in(out)
    assert authenticate_key(added) is not None

    code, out, _ = run("api_key", "list", "crawler-1")
    assert code == 0
    assert f"pp_{c.key.prefix}" in out and "prod" in out and "active" in out and "never" in out
    assert c.plaintext not in out and added not in out
    assert c.key.key_hash not in out and added.split("_", 2)[2] not in out

    code, out, _ = run("api_key", "revoke", f"pp_{c.key.prefix}")
    assert code == 0 and "Revoked" in out
    c.key.refresh_from_db()
    assert c.key.revoked_at is not None
    assert ApiKey.objects.verify(c.plaintext) is None
    assert ApiKey.objects.verify(added) is not None
    code, out, _ = run("api_key", "list", "crawler-1")
    assert "revoked" in out


def test_api_key_rotate_keeps_old_keys_unless_told(run, make_client):
    c = make_client()
    code, out, _ = run("api_key", "rotate", "crawler-1")
    assert code == 0
    first = plaintext_in(out)
    assert "stay valid" in out and c.key.prefix in out
    assert ApiKey.objects.verify(c.plaintext) is not None
    assert ApiKey.objects.verify(first) is not None

    code, out, _ = run("api_key", "rotate", "crawler-1", "--revoke-old")
    assert code == 0
    second = plaintext_in(out)
    assert "Revoked 2" in out
    assert ApiKey.objects.verify(c.plaintext) is None and ApiKey.objects.verify(first) is None
    assert ApiKey.objects.verify(second) is not None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["add", "ghost"], ["unknown client", "ghost"]),
        (["rotate", "ghost"], ["unknown client"]),
        (["list", "ghost"], ["unknown client"]),
        (["revoke", "pp_000000000000"], ["no API key", "000000000000"]),
    ],
)
def test_api_key_bad_input_changes_nothing(run, make_client, argv, words):
    make_client()
    assert_refused(run("api_key", *argv), *words)
    assert ApiKey.objects.count() == 1 and ApiKey.objects.active().count() == 1


def test_api_key_revoke_refuses_a_whole_key(run, make_client):
    c = make_client()
    assert_refused(run("api_key", "revoke", c.plaintext), "prefix")
    assert ApiKey.objects.active().count() == 1


# --------------------------------------------------------------------------- list_upstreams
def test_list_upstreams_shows_live_inventory(run, upstreams, seed):
    seed("acme-us", n=3)
    code, out, _ = run("list_upstreams")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert rows["acme-us"][3:] == ["3", "3", rows["acme-us"][5]]
    assert int(rows["acme-us"][5]) >= 3
    assert rows["acme-eu"][3] == "0"


def test_list_upstreams_says_unavailable_when_the_pool_cannot_answer(run, upstreams):
    bootstrap.point_at(f"redis://127.0.0.1:{free_port()}/0", "pp-dead")
    code, out, _ = run("list_upstreams")
    assert code == 0
    assert out.count("unavailable") >= 6 and "acme-us" in out


# ---------------------------------------------------------------------------------- extract
def test_extract_command_masks_passwords_by_default(run, make_client, seed):
    ids = seed(n=4)
    make_client()
    code, out, _ = run("extract", "crawler-1", "--count", "2")
    assert code == 0
    assert PROXY_PASSWORD not in out and "********" in out
    assert "Extracted 2 of 2" in out and "--show-passwords" in out
    assert re.search(r"pool generation [0-9a-f]{16}\)", out), out
    assert sum(pid in out for pid in ids) == 2

    filters = ["--region", "us", "--protocol", "http", "--upstream", "acme-us"]
    code, out, _ = run("extract", "crawler-1", "--count", "1", *filters, "--show-passwords")
    assert code == 0 and PROXY_PASSWORD in out
    assert seed.pool.inventory("acme-us") == 1


def test_extract_command_asks_for_one_proxy_by_default(run, make_client, seed):
    seed(n=3)
    make_client()
    code, out, _ = run("extract", "crawler-1")
    assert code == 0 and "Extracted 1 of 1" in out
    assert seed.pool.inventory("acme-us") == 2


def test_extract_command_logs_its_calls_from_the_cli(run, make_client, seed):
    seed(n=3)
    make_client()
    code, _, err = run("extract", "crawler-1", "--count", "2", "--region", "us")
    assert code == 0, err
    [event] = logged_calls(err)
    assert event["event"] == "extract" and event["source"] == "cli"
    assert event["client"] == "crawler-1" and event["key_prefix"] == OPERATOR_KEY
    assert event["outcome"] == "ok" and (event["requested"], event["returned"]) == (2, 2)
    assert event["filters"] == {"region": "us"} and event["idempotent"] is False

    # A refused extract is counted as the client's too, as the API counts it.
    refused = run("extract", "crawler-1", "--count", "2", "--mode", "all_or_nothing")
    assert_refused(refused, "insufficient_inventory")
    [event] = logged_calls(refused[2])
    assert event["source"] == "cli" and event["outcome"] == "insufficient_inventory"
    assert event["returned"] == 0 and event["mode"] == "all_or_nothing"


def test_extract_command_applies_the_clients_rules_and_limits(run, make_client, seed):
    seed(n=5)
    make_client(allowed=["acme-us"], requests_per_second=2, max_count_per_request=3)
    assert_refused(run("extract", "crawler-1", "--count", "4"), "forbidden", "3")
    assert_refused(run("extract", "crawler-1", "--count", "1", "--upstream", "acme-eu"),
                   "forbidden")  # fmt: skip
    assert_refused(run("extract", "crawler-1", "--count", "1"), "rate_limited", "retry after")
    assert seed.pool.inventory("acme-us") == 5


def test_extract_all_or_nothing_shortfall(run, make_client, seed):
    seed(n=2)
    make_client()
    result = run("extract", "crawler-1", "--count", "3", "--mode", "all_or_nothing")
    assert_refused(result, "insufficient_inventory", "2 matching", "3 requested")
    assert seed.pool.inventory("acme-us") == 2


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["ghost", "--count", "1"], ["unknown client", "ghost"]),
        (["crawler-1", "--count", "x"], ["--count", "whole number"]),
        (["crawler-1", "--count", "0"], ["--count", "between"]),
        (["crawler-1", "--count", "1", "--region", "r" * 65], ["invalid_request", "region"]),
    ],
)
def test_extract_command_bad_input_takes_nothing(run, make_client, seed, argv, words):
    seed(n=2)
    make_client()
    assert_refused(run("extract", *argv), *words)
    assert seed.pool.inventory("acme-us") == 2


def test_extract_command_refuses_a_disabled_client(run, make_client, seed):
    seed(n=1)
    c = make_client()
    c.row.enabled = False
    c.row.save()
    assert_refused(run("extract", "crawler-1", "--count", "1"), "disabled")
    assert seed.pool.inventory("acme-us") == 1


# ------------------------------------------------------------------------------- sweep_pool
def test_sweep_pool_runs_once_and_reports(run, seed):
    seed(n=2)
    code, out, _ = run("sweep_pool", "--limit", "50")
    assert code == 0
    assert "removed 0 expired proxy record(s)" in out and "limit 50" in out
    assert seed.pool.inventory("acme-us") == 2


@pytest.mark.parametrize("limit", ["0", "x", "1000000"])
def test_sweep_pool_bad_limit(run, limit):
    assert_refused(run("sweep_pool", "--limit", limit), "--limit")


# ------------------------------------------------------------------------ argument errors
#: Command lines argparse refuses, each with the reason printed (after "CommandError: ").
ARGUMENT_ERRORS = {
    ("create_client",): "manage.py create_client: the following arguments are required: name",
    ("create_client", "crawler-9", "--bogus"): (
        "manage.py create_client: unrecognized arguments: --bogus"
    ),
    ("create_client", "crawler-9", "--rps"): (
        "manage.py create_client: argument --rps: expected one argument"
    ),
    ("api_key",): "manage.py api_key: the following arguments are required: ACTION",
    ("api_key", "frob", "crawler-1"): (
        "manage.py api_key: argument ACTION: invalid choice: 'frob' "
        "(choose from 'add', 'revoke', 'rotate', 'list')"
    ),
    ("api_key", "add"): "manage.py api_key add: the following arguments are required: client",
    ("api_key", "add", "crawler-1", "--bogus"): (
        "manage.py api_key: unrecognized arguments: --bogus"
    ),
    ("api_key", "rotate", "crawler-1", "--revoke-old=yes"): (
        "manage.py api_key rotate: argument --revoke-old: ignored explicit argument 'yes'"
    ),
    ("extract",): "manage.py extract: the following arguments are required: client",
    ("extract", "crawler-1", "--count", "1", "--bogus"): (
        "manage.py extract: unrecognized arguments: --bogus"
    ),
    ("extract", "crawler-1", "--count", "1", "-v", "7"): (
        "manage.py extract: argument -v/--verbosity: invalid choice: 7 (choose from 0, 1, 2, 3)"
    ),
    ("sweep_pool", "--limit"): "manage.py sweep_pool: argument --limit: expected one argument",
    ("list_upstreams", "extra"): "manage.py list_upstreams: unrecognized arguments: extra",
    ("rotate_secret_key", "extra"): "manage.py rotate_secret_key: unrecognized arguments: extra",
    ("ensure_admin", "extra"): "manage.py ensure_admin: unrecognized arguments: extra",
    ("ensure_demo",): "manage.py ensure_demo: the following arguments are required: --base-url",
    ("consume_metrics", "extra"): "manage.py consume_metrics: unrecognized arguments: extra",
    ("doctor", "extra"): "manage.py doctor: unrecognized arguments: extra",
    ("create_worker",): (
        "manage.py create_worker: the following arguments are required: name, --group"
    ),
    ("create_worker", "edge-9", "--group"): (
        "manage.py create_worker: argument --group: expected one argument"
    ),
    ("gateway_worker",): "manage.py gateway_worker: the following arguments are required: name",
    ("gateway_worker", "edge-9", "--http-bind"): (
        "manage.py gateway_worker: argument --http-bind: expected one argument"
    ),
    ("worker_token",): "manage.py worker_token: the following arguments are required: ACTION",
    ("worker_token", "frob"): (
        "manage.py worker_token: argument ACTION: invalid choice: 'frob' "
        "(choose from 'add', 'revoke', 'rotate', 'list')"
    ),
    ("worker_token", "add"): (
        "manage.py worker_token add: the following arguments are required: worker"
    ),
    ("worker_token", "rotate", "edge-1", "--revoke-old=yes"): (
        "manage.py worker_token rotate: argument --revoke-old: ignored explicit argument 'yes'"
    ),
    ("worker_token", "list", "edge-1", "edge-2"): (
        "manage.py worker_token: unrecognized arguments: edge-2"
    ),
}
#: A few also run through a real manage.py in a child process (one of each kind: a missing
#: option, an unknown one, an action's missing argument, an extra argument).
FROM_A_SHELL = [
    ("ensure_demo",),
    ("create_client", "crawler-9", "--bogus"),
    ("api_key", "add"),
    ("rotate_secret_key", "extra"),
]
HELP = ("extract", "--help")


def one_line(reason: str) -> str:
    return f"CommandError: {reason} (see --help); nothing changed"


def test_every_project_command_is_an_operator_command():
    ours = {name: app for name, app in get_commands().items() if app.startswith("pool_admin")}
    assert {argv[0] for argv in ARGUMENT_ERRORS} == set(ours)
    for name, app in ours.items():
        assert isinstance(load_command_class(app, name), OperatorCommand), name


@pytest.mark.parametrize(
    ("argv", "reason"), ARGUMENT_ERRORS.items(), ids=[" ".join(argv) for argv in ARGUMENT_ERRORS]
)
def test_argument_errors_are_one_line_and_change_nothing(run, make_client, seed, argv, reason):
    seed(n=2)
    make_client()
    code, out, err = run(*argv)
    assert (code, out, err.splitlines()) == (1, "", [one_line(reason)])
    assert list(ApiClient.objects.values_list("name", flat=True)) == ["crawler-1"]
    assert ApiKey.objects.active().count() == ApiKey.objects.count() == 1
    assert not GatewayWorker.objects.exists() and not WorkerToken.objects.exists()
    assert seed.pool.inventory("acme-us") == 2
    assert not get_user_model().objects.exists()


def test_help_of_an_action_still_prints_its_usage(run):
    code, out, err = run("api_key", "add", "--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: manage.py api_key add ") and "--name NAME" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("ensure_demo",), "Error: the following arguments are required: --base-url"),
        (("api_key", "add"), "Error: the following arguments are required: client"),
    ],
)
def test_call_command_still_raises_command_error(argv, message):
    with pytest.raises(CommandError) as info:
        call_command(*argv)
    assert str(info.value) == message


@pytest.fixture(scope="module")
def from_a_shell(django_db_setup):
    """Each command line of FROM_A_SHELL and HELP through a real manage.py on the test database
    (all at once: each child takes most of a second to start)."""
    database = database_url_of_test_db()
    argvs = [*FROM_A_SHELL, HELP]
    with ThreadPoolExecutor(len(argvs)) as workers:
        done = workers.map(lambda argv: manage(*argv, DATABASE_URL=database), argvs)
        return dict(zip(argvs, done, strict=True))


@pytest.mark.parametrize("argv", FROM_A_SHELL, ids=" ".join)
def test_argument_errors_from_a_shell_exit_1_with_one_line(from_a_shell, argv):
    done = from_a_shell[argv]
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.splitlines() == [one_line(ARGUMENT_ERRORS[argv])]
    assert not ApiClient.objects.exists() and not ApiKey.objects.exists()


def test_help_from_a_shell_still_prints_the_usage(from_a_shell):
    done = from_a_shell[HELP]
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("usage: manage.py extract ")
    assert "--count COUNT" in done.stdout and "--show-passwords" in done.stdout


@pytest.mark.django_db(transaction=True)
def test_gateway_worker_issues_a_token_per_run_and_hands_it_to_the_worker(upstreams, run):
    """``gateway_worker NAME --ensure`` makes the worker and its group, issues a token for the
    run (revoking the previous run's) and becomes the worker; here the worker refuses its bind
    address, so it exits 2 at once, naming it, never the token."""
    database = database_url_of_test_db()
    code, _, err = run("gateway_worker", "edge-9")
    assert code == 1 and "unknown worker 'edge-9'" in err
    assert not GatewayWorker.objects.exists()
    for _ in range(2):
        done = manage(
            "gateway_worker", "edge-9", "--ensure", "--group", "local",
            "--http-bind", "nowhere", DATABASE_URL=database,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "a bind address is host:port" in done.stderr
        assert "pw_" not in done.stdout + done.stderr
    worker = GatewayWorker.objects.get(name="edge-9")
    assert worker.group.name == "local"
    assert list(worker.group.allowed_upstreams.order_by("name").values_list("name", flat=True)) == [
        "acme-eu",
        "acme-us",
    ]
    tokens = WorkerToken.objects.filter(worker=worker)
    assert tokens.count() == 2 and tokens.active().count() == 1
