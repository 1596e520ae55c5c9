"""The project's system checks (pool_admin/checks.py): the admin's middleware where it runs."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.checks import run_checks

OURS = ("pool_admin.E001", "pool_admin.E002", "pool_admin.E003", "pool_admin.E004")


def ours(errors):
    return [e for e in errors if e.id in OURS]


def test_the_project_passes_its_checks():
    assert ours(run_checks()) == []


@pytest.mark.parametrize(
    ("removed", "stands_for"),
    [
        ("django.contrib.sessions.middleware.SessionMiddleware", "admin.E410"),
        ("django.contrib.auth.middleware.AuthenticationMiddleware", "admin.E408"),
        ("django.contrib.messages.middleware.MessageMiddleware", "admin.E409"),
        ("axes.middleware.AxesMiddleware", "axes.W002"),
    ],
)
def test_the_silenced_checks_are_made_on_site_middleware(settings, removed, stands_for):
    settings.SITE_MIDDLEWARE = [p for p in settings.SITE_MIDDLEWARE if p != removed]
    [error] = ours(run_checks())
    assert error.id == "pool_admin.E002" and removed in error.msg and stands_for in error.msg


def test_site_middleware_must_run(settings):
    settings.MIDDLEWARE = [
        p for p in settings.MIDDLEWARE if p != "pool_admin.api.middleware.SiteOnlyMiddleware"
    ]
    assert [e.id for e in ours(run_checks())] == ["pool_admin.E001"]


def test_the_four_checks_silenced_are_exactly_those_stood_in_for():
    from pool_admin.checks import SITE_NEEDS

    assert sorted(settings.SILENCED_SYSTEM_CHECKS) == sorted(code for _, code in SITE_NEEDS)
