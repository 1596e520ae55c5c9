"""The committed migrations match the models."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_each_upstream_becomes_an_account_holding_its_credential_and_budgets():
    """0004-0006: an upstream held its credential and fetch budgets itself; its account of the
    same name holds them now."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        ("config", "0003_api_client_may_view_inventory"),
        (
            "config",
            "0006_upstream_fields_moved_to_accounts",
        ),
    )
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([before])
        old = MigrationExecutor(connection).loader.project_state([before]).apps
        credential = old.get_model("config", "Credential").objects.create(
            name="acme-api", ciphertext=b"x"
        )
        old.get_model("config", "Upstream").objects.create(
            name="acme-us",
            endpoint_url="https://api.acme.example/p",
            credential=credential,
            fetch_calls_per_minute=30,
            fetch_proxies_per_minute=500,
        )
        executor = MigrationExecutor(connection)
        executor.migrate([after])
        new = executor.loader.project_state([after]).apps
        account = new.get_model("config", "ProviderAccount").objects.get()
        assert (account.name, account.credential_id) == ("acme-us", credential.pk)
        assert (account.api_calls_per_minute, account.proxies_per_minute) == (30, 500)
        assert new.get_model("config", "Upstream").objects.get().account_id == account.pk
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_an_upstream_of_short_lived_proxies_gets_a_deadline_within_half_its_ttl():
    """0018: the new vendor call deadline (20 s) must be at most half the default TTL; an
    upstream saved before it with a 30 s TTL gets 15 s, so it stays valid (saveable)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = ("config", "0017_upstream_fetches"), ("config", "0018_upstream_fetch_deadline")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([before])
        old = MigrationExecutor(connection).loader.project_state([before]).apps
        account = old.get_model("config", "ProviderAccount").objects.create(name="acme")
        for name, ttl in (("short", 30), ("usual", 300)):
            old.get_model("config", "Upstream").objects.create(
                name=name, account=account, endpoint_url="https://api.acme.example/p",
                default_ttl_s=ttl,
            )  # fmt: skip
        executor = MigrationExecutor(connection)
        executor.migrate([after])
        new = executor.loader.project_state([after]).apps
        deadlines = dict(new.get_model("config", "Upstream").objects.values_list(
            "name", "fetch_timeout_s"))  # fmt: skip
        assert deadlines == {"short": 15, "usual": 20}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
