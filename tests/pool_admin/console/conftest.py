from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.harness.browser import browser, page  # noqa: F401 - the browser tests' fixtures
from tests.harness.console_world import seed_world


@pytest.fixture
def world(filling_pool, db):
    return seed_world()


@pytest.fixture
def staff(client):
    """A logged-in operator (staff, no other permission)."""
    user = get_user_model().objects.create_user("op", password="a-Long-pass-123", is_staff=True)
    client.force_login(user)
    return user


@pytest.fixture
def operator_client(client):
    """A logged-in operator who may act on the pool (console.operate_pool)."""
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("boss", password="a-Long-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="operate_pool"))
    client.force_login(user)
    return client
