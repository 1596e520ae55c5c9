"""Each upstream becomes a provider account of its own (its credential and budgets moved there).

Its own migration: on PostgreSQL, rows updated in a transaction leave deferred constraint checks
pending, and the table cannot be altered in that transaction (0006 alters it).
"""

from django.db import migrations


def one_account_per_upstream(apps, schema_editor):
    """Before this migration an upstream held its credential and fetch budgets itself: each
    becomes a provider account of the same name holding them."""
    upstream_model = apps.get_model("config", "Upstream")
    account_model = apps.get_model("config", "ProviderAccount")
    for upstream in upstream_model.objects.all():
        account, _ = account_model.objects.get_or_create(
            name=upstream.name,
            defaults={
                "credential_id": upstream.credential_id,
                "api_calls_per_minute": upstream.fetch_calls_per_minute,
                "proxies_per_minute": upstream.fetch_proxies_per_minute,
            },
        )
        upstream.account = account
        upstream.save(update_fields=["account"])


class Migration(migrations.Migration):
    dependencies = [("config", "0004_provider_accounts")]

    operations = [migrations.RunPython(one_account_per_upstream, migrations.RunPython.noop)]
