"""The demo provider's proxies: real local forward proxies ``make run`` starts (unless
``DEMO=0``), listed for the demo vendor (pool_admin/demo.py) in ``RUN_DIR/demo-proxies.json``.

One tinyproxy (HTTP, Basic auth) with ``HTTP_USERS`` logins, each a proxy of its own to the
pool (an exit is host, port and user name), and ``SOCKS_SERVERS`` microsocks (SOCKS5, one login
each). Their passwords are made fresh at each start and written only to that file (mode 0600)
and to tinyproxy's config (0600), both under the run directory. No Django import: the launcher
runs this before Django is set up.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from pool_admin.forward_proxies import ForwardProxy, Microsocks, Tinyproxy

HTTP_USERS = 12
SOCKS_SERVERS = 4
LISTING = "demo-proxies.json"


def _login() -> tuple[str, str]:
    return f"demo{secrets.token_hex(3)}", secrets.token_hex(12)


class DemoProxies:
    def __init__(self, run_dir: Path) -> None:
        self.directory = Path(run_dir) / "demo-proxies"
        self.listing = Path(run_dir) / LISTING
        self.servers: list[ForwardProxy] = []

    def start(self) -> list[dict[str, Any]]:
        """Start every proxy and write the listing; the entries written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        user, password = _login()
        more = [_login() for _ in range(HTTP_USERS - 1)]
        http = Tinyproxy(self.directory, user, password, more_users=more)
        self.servers.append(http)
        http.start()
        entries = [
            {"protocol": "http", "host": "127.0.0.1", "port": http.port, "username": u,
             "password": p}
            for u, p in [(user, password), *more]
        ]  # fmt: skip
        for _ in range(SOCKS_SERVERS):
            socks = Microsocks(self.directory, *_login())
            self.servers.append(socks)
            socks.start()
            entries.append({"protocol": "socks5", "host": "127.0.0.1", "port": socks.port,
                            "username": socks.username, "password": socks.password})  # fmt: skip
        fd = os.open(self.listing, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"proxies": entries}, out)
        return entries

    def stop(self) -> None:
        """Stop every proxy, and remove what holds their passwords (the listing, tinyproxy's
        config); their logs stay."""
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()
        self.listing.unlink(missing_ok=True)
        for config in self.directory.glob("tinyproxy-*.conf"):
            config.unlink(missing_ok=True)


def read_listing(run_dir: Path) -> list[dict[str, Any]]:
    """The demo proxies ``make run`` started, or none."""
    try:
        document = json.loads((Path(run_dir) / LISTING).read_text())
    except (OSError, ValueError):
        return []
    proxies = document.get("proxies") if isinstance(document, dict) else None
    return [p for p in proxies if isinstance(p, dict)] if isinstance(proxies, list) else []
