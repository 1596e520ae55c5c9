from django.db import migrations


def drop_renamed_entry(apps, schema_editor):
    """Beat's database scheduler adds the entries of CELERY_BEAT_SCHEDULE but never removes
    one: the renamed "prune-quality" (now "keep-usage-bounded") would keep sending a task that
    no longer exists."""
    periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
    periodic_task.objects.filter(name="prune-quality", task="pool_admin.prune_quality").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("config", "0015_usage_aggregates"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(drop_renamed_entry, migrations.RunPython.noop)]
