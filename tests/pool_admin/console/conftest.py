from __future__ import annotations

import pytest

from tests.harness.browser import browser, page  # noqa: F401 - the browser tests' fixtures
from tests.harness.console_world import console_user, seed_world


@pytest.fixture
def world(filling_pool, db):
    return seed_world()


@pytest.fixture
def staff(client):
    """A logged-in operator (staff who may view the console, nothing else)."""
    user = console_user("op", "view_console")
    client.force_login(user)
    return user


@pytest.fixture
def operator_client(client):
    """A logged-in operator who may act on the pool (console.operate_pool)."""
    client.force_login(console_user("boss", "view_console", "operate_pool"))
    return client
