"""Settings fail fast on bad configuration, naming the variable and hiding passwords."""

import io
import logging
import os
import sys
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from pool_admin.celery import app
from tests.harness.commands import manage, run_python


def import_settings(**overrides):
    return run_python("-c", "import pool_admin.settings", **overrides)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DEBUG", "maybe", "DEBUG must be one of"),
        ("REDIS_URL", "http://127.0.0.1:6379/0", "REDIS_URL must use one of the schemes"),
        ("METRICS_REDIS_URL", "redis://:pw@h:bad/0", "METRICS_REDIS_URL is not a valid URL"),
        ("DATABASE_URL", "mysql://root:pw@127.0.0.1/x", "DATABASE_URL must use one of the schemes"),
        ("DATABASE_CONNECT_TIMEOUT", "1", "DATABASE_CONNECT_TIMEOUT must be >= 2"),
        ("POOL_SECRET_KEY", "not-a-fernet-key", "POOL_SECRET_KEY must be urlsafe base64"),
        (
            "POOL_SECRET_KEY",
            "ZGV2LW9ubHktcG9vbC1zZWNyZXQta2V5LTMyYnl0ZXM=,not-a-fernet-key",
            "POOL_SECRET_KEY must be urlsafe base64 of 32 bytes (a Fernet key) in each",
        ),
        ("ALLOWED_HOSTS", ",", "ALLOWED_HOSTS must list at least one value"),
        ("LOG_LEVEL", "chatty", "LOG_LEVEL must be"),
        ("POOL_BAN_QUARANTINE_S", "-1", "POOL_BAN_QUARANTINE_S must be >= 0"),
        ("POOL_BAN_QUARANTINE_S", "604801", "POOL_BAN_QUARANTINE_S must be at most 604800"),
        ("USAGE_RETENTION_DAYS", "0", "USAGE_RETENTION_DAYS must be >= 1"),
        ("USAGE_ROLLUP_AFTER_HOURS", "0", "USAGE_ROLLUP_AFTER_HOURS must be >= 1"),
        ("USAGE_ROLLUP_AFTER_HOURS", "2400", "USAGE_RETENTION_DAYS must be longer than"),
    ],
)
def test_bad_value_fails_fast_naming_the_variable(name, value, message):
    done = import_settings(**{name: value})
    assert done.returncode != 0
    assert f"EnvError: {message}" in done.stderr
    assert ":pw@" not in done.stderr
    assert "not-a-fernet-key" not in done.stderr


def test_secret_key_required_outside_development():
    done = import_settings(DJANGO_SECRET_KEY=None, DEBUG=None, POOL_DEV="0")
    assert done.returncode != 0
    assert "EnvError: DJANGO_SECRET_KEY is required" in done.stderr


def test_manage_py_names_a_configuration_error_in_one_line():
    done = manage("check", DJANGO_SECRET_KEY=None, DEBUG=None, POOL_DEV="0")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "manage.py: configuration: DJANGO_SECRET_KEY is required when DEBUG is off and "
        "POOL_DEV is not set (README, Configuration)"
    ]


def test_production_like_configuration_imports():
    key = "ZGV2LW9ubHktcG9vbC1zZWNyZXQta2V5LTMyYnl0ZXM="
    done = import_settings(
        DJANGO_SECRET_KEY="x" * 50,
        POOL_SECRET_KEY=key,
        POOL_DEV="0",
        DEBUG="0",
        ALLOWED_HOSTS="pool.example",
    )
    assert done.returncode == 0, done.stderr


def test_settings_use_the_servers_the_harness_chose(redis_url):
    # The harness sets the environment before pytest-django imports the settings.
    assert redis_url == settings.REDIS_URL
    assert urlsplit(os.environ["DATABASE_URL"]).port == settings.DATABASES["default"]["PORT"]


def test_beat_schedule_expires_each_run_after_one_period():
    entry = settings.CELERY_BEAT_SCHEDULE["heartbeat"]
    assert entry["task"] == "pool_admin.heartbeat"
    assert entry["options"]["expires"] == entry["schedule"].total_seconds() == 30


def test_celery_app_reads_django_settings():
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    assert app.conf.result_backend is None
    assert app.conf.beat_scheduler == "pool_admin.beat:Scheduler"  # django-celery-beat + heartbeat
    app.loader.import_default_modules()  # what a worker does at start: task autodiscovery
    assert "pool_admin.heartbeat" in app.tasks


def test_logs_go_to_the_standard_error_of_the_moment(monkeypatch):
    """Logging configured while sys.stderr was a stand-in (as every in-process management
    command configures it) must not keep writing to that stand-in once it is closed: each
    write would fail and print a traceback, from whatever thread logged (pool_admin/logstream.py
    says why that once broke an unrelated test)."""
    from django.utils.log import configure_logging

    logger = logging.getLogger("pool_admin.test_logstream")
    stand_in = io.StringIO()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(sys, "stderr", stand_in)
            configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
            logger.warning("while captured")
        assert "while captured" in stand_in.getvalue()
        stand_in.close()
        now = io.StringIO()
        monkeypatch.setattr(sys, "stderr", now)
        logger.warning("after the stand-in closed")
        assert "after the stand-in closed" in now.getvalue()
        assert "Logging error" not in now.getvalue()
    finally:
        monkeypatch.undo()
        configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)


def test_settings_do_not_import_the_dev_servers_module():
    """The settings' default URLs come from pool_admin.defaults: a web worker never loads
    pool_admin.localservices (which starts servers, and imports psycopg and redis for it)."""
    done = run_python(
        "-c",
        "import sys, pool_admin.settings; print('pool_admin.localservices' in sys.modules)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
