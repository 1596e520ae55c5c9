"""Where things go (README, Layout): the rules a newcomer guesses from, held by tests."""

from __future__ import annotations

from django.apps import apps
from django.core.management import get_commands


def test_every_project_command_lives_in_pool_admin_management_commands():
    ours = {name: app for name, app in get_commands().items() if app.startswith("pool_admin")}
    assert ours, "no project command found"
    assert {name: "pool_admin" for name in ours} == ours


def test_the_project_apps_are_the_project_and_its_models():
    # A folder of pool_admin is a Django app only if it has models (and so migrations and an
    # admin); the REST API and the rest are plain packages of the project app.
    ours = [config for config in apps.get_app_configs() if config.name.startswith("pool_admin")]
    assert sorted(config.name for config in ours) == [
        "pool_admin",
        "pool_admin.config",
        "pool_admin.console",  # its permission holder and its audit of operator actions
    ]
    assert not list(apps.get_app_config("pool_admin").get_models())
    assert list(apps.get_app_config("config").get_models())
    assert list(apps.get_app_config("console").get_models())
