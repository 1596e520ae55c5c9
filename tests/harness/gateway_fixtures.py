"""Real upstream proxies (Debian's tinyproxy with Basic auth, microsocks with username and
password) and HTTP/HTTPS targets for the gateway worker's tests, one of each per module;
imported by the conftests that use them."""

from __future__ import annotations

import pytest

from pool_admin.forward_proxies import Microsocks, Tinyproxy
from tests.harness.http_target import HttpTarget

TINYPROXY_LOGIN = ("gwuser", "gwpass1")
MICROSOCKS_LOGIN = ("gwuser", "gwpass2")


@pytest.fixture(scope="module")
def tinyproxy(tmp_path_factory):
    with Tinyproxy(tmp_path_factory.mktemp("tinyproxy"), *TINYPROXY_LOGIN) as running:
        yield running


@pytest.fixture(scope="module")
def microsocks(tmp_path_factory):
    with Microsocks(tmp_path_factory.mktemp("microsocks"), *MICROSOCKS_LOGIN) as running:
        yield running


@pytest.fixture(scope="module")
def target():
    with HttpTarget() as server:
        yield server


@pytest.fixture(scope="module")
def tls_target():
    with HttpTarget(tls=True) as server:
        yield server
