"""pool_admin/forward_proxies.py: Debian's tinyproxy and microsocks started and stopped as the
demo and the checker's tests use them."""

from __future__ import annotations

import socket

import pytest

from pool_admin.forward_proxies import Microsocks, Tinyproxy

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", [Tinyproxy, Microsocks])
def test_a_forward_proxy_listens_once_started_and_not_after_it_stops(tmp_path, kind):
    with kind(tmp_path, "user1", "pass1") as proxy:
        assert proxy.running
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
    assert not proxy.running
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()


@pytest.mark.parametrize("password", ["with space", "quote'", "ünï", ""])
def test_credentials_the_servers_cannot_take_whole_are_refused(tmp_path, password):
    with pytest.raises(ValueError):
        Tinyproxy(tmp_path, "user1", password)
