"""The demo provider's proxies: real local forward proxies ``make run`` starts (unless
``DEMO=0``), listed for the demo vendor (pool_admin/demo.py) in ``RUN_DIR/demo-proxies.json``.

One tinyproxy (HTTP, Basic auth) with ``HTTP_USERS`` logins, each a proxy of its own to the
pool (an exit is host, port and user name), and ``SOCKS_SERVERS`` microsocks (SOCKS5, one login
each). Their passwords are made at the first start and kept, with their ports, in ``demo-
proxies/state.json`` (0600) for the next (the pool's Redis outlives a restart, and the proxies
it holds must stay valid exits); the listing and tinyproxy's config (0600) exist only while
they run. No Django import: the launcher runs this before Django is set up.
"""

from __future__ import annotations

import json
import secrets
import socket
from pathlib import Path
from typing import Any

from pool_admin.forward_proxies import ForwardProxy, Microsocks, Tinyproxy, write_private

HTTP_USERS = 12
SOCKS_SERVERS = 4
LISTING = "demo-proxies.json"


def _login() -> tuple[str, str]:
    return f"demo{secrets.token_hex(3)}", secrets.token_hex(12)


class DemoProxies:
    def __init__(self, run_dir: Path) -> None:
        self.directory = Path(run_dir) / "demo-proxies"
        self.listing = Path(run_dir) / LISTING
        #: The ports and logins of the last start, reused: the pool's Redis outlives a restart
        #: of ``make run``, and the proxies it holds from the last run stay the same exits with
        #: the same logins, so none of them is handed out dead (0600, under the run directory).
        self.state = self.directory / "state.json"
        self.servers: list[ForwardProxy] = []

    def _last(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def start(self) -> list[dict[str, Any]]:
        """Start every proxy and write the listing; the entries written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        last = self._last()
        http_logins = _logins(last.get("http_logins"), HTTP_USERS)
        socks_logins = _logins(last.get("socks_logins"), SOCKS_SERVERS)
        saved = last.get("ports")
        ports: list[object] = saved if isinstance(saved, list) else []
        wanted = [_port(ports[n] if n < len(ports) else None) for n in range(1 + SOCKS_SERVERS)]
        http = Tinyproxy(
            self.directory, *http_logins[0], port=wanted[0], more_users=http_logins[1:]
        )
        self.servers.append(http)
        http.start()
        entries = [
            {
                "protocol": "http",
                "host": "127.0.0.1",
                "port": http.port,
                "username": u,
                "password": p,
            }
            for u, p in http_logins
        ]
        for n, login in enumerate(socks_logins):
            socks = Microsocks(self.directory, *login, port=wanted[1 + n])
            self.servers.append(socks)
            socks.start()
            entries.append(
                {
                    "protocol": "socks5",
                    "host": "127.0.0.1",
                    "port": socks.port,
                    "username": socks.username,
                    "password": socks.password,
                }
            )
        write_private(self.listing, json.dumps({"proxies": entries}))
        state = {
            "ports": [server.port for server in self.servers],
            "http_logins": http_logins,
            "socks_logins": socks_logins,
        }
        write_private(self.state, json.dumps(state))
        return entries

    def stop(self) -> None:
        """Stop every proxy, and remove the listing and tinyproxy's config (the state of
        ports and logins stays, for the next start); their logs stay."""
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()
        self.listing.unlink(missing_ok=True)
        for config in self.directory.glob("tinyproxy-*.conf"):
            config.unlink(missing_ok=True)


def _logins(saved: object, count: int) -> list[tuple[str, str]]:
    """The saved logins when they are ``count`` of the right form, else fresh ones."""
    if (
        isinstance(saved, list)
        and len(saved) == count
        and all(
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(part, str) and part.isalnum() and part.isascii() for part in pair)
            for pair in saved
        )
    ):
        return [(pair[0], pair[1]) for pair in saved]
    return [_login() for _ in range(count)]


def _port(saved: object) -> int | None:
    """The saved port when it is free now (else None: a free one is chosen)."""
    if not isinstance(saved, int) or not 1024 <= saved <= 65535:
        return None
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", saved))
        except OSError:
            return None
    return saved


def read_listing(run_dir: Path) -> list[dict[str, Any]]:
    """The demo proxies ``make run`` started, or none."""
    try:
        document = json.loads((Path(run_dir) / LISTING).read_text())
    except (OSError, ValueError):
        return []
    proxies = document.get("proxies") if isinstance(document, dict) else None
    return [p for p in proxies if isinstance(p, dict)] if isinstance(proxies, list) else []
