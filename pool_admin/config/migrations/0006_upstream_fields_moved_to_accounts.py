"""The upstream's credential and fetch budgets now live on its provider account (0005 moved
them), and every upstream has an account."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("config", "0005_one_account_per_upstream")]

    operations = [
        migrations.RemoveField(
            model_name="historicalupstream",
            name="credential",
        ),
        migrations.RemoveField(
            model_name="historicalupstream",
            name="fetch_calls_per_minute",
        ),
        migrations.RemoveField(
            model_name="historicalupstream",
            name="fetch_proxies_per_minute",
        ),
        migrations.RemoveField(
            model_name="upstream",
            name="credential",
        ),
        migrations.RemoveField(
            model_name="upstream",
            name="fetch_calls_per_minute",
        ),
        migrations.RemoveField(
            model_name="upstream",
            name="fetch_proxies_per_minute",
        ),
        migrations.AlterField(
            model_name="upstream",
            name="account",
            field=models.ForeignKey(
                help_text="The vendor account its fetches are made with and counted against.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="upstreams",
                to="config.provideraccount",
            ),
        ),
    ]
