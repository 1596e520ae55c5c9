from django.db import migrations


class Migration(migrations.Migration):
    """The outcome rows become the upstream's usage rows of a period (a minute, or an hour once
    rolled up): their bucket keeps its values under its new name."""

    dependencies = [
        ("config", "0013_applied_entries"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="upstreamquality", name="quality_once_per_minute"),
        migrations.RemoveIndex(model_name="upstreamquality", name="quality_minute"),
        migrations.RenameField(
            model_name="upstreamquality", old_name="minute", new_name="period_start"
        ),
    ]
