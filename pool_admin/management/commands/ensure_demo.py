"""``manage.py ensure_demo --base-url URL``: the demo provider's configuration, idempotently
(``make run`` runs it unless ``DEMO=0``; pool_admin/demo.py).

It creates or brings up to date: the vendor key the emulator asks for (made once, random), the
provider account ``demo``, its upstreams ``demo`` (HTTP, tinyproxy) and ``demo-socks5``
(SOCKS5, microsocks) fetching from the emulator at ``URL`` and checking through each proxy
against ``URL/healthz``, and the API client ``demo`` (may view the inventory). Its API key:
``DEMO_API_KEY`` when set (in the project's key format), else one generated and printed once
(with ``--secrets-fd``, handed over on that descriptor instead, as ``demo_api_key=...``).
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin import demo, fetch_tasks
from pool_admin.bootstrap import get_scheduler
from pool_admin.config.credential_store import CredentialStore
from pool_admin.config.models import ApiClient, ApiKey, Credential, ProviderAccount, Upstream
from pool_admin.demo_proxies import HTTP_USERS, SOCKS_SERVERS
from pool_admin.management.cli import (
    OperatorCommand,
    add_secrets_fd,
    checked_secrets_fd,
    hand_over_secret,
    validation_text,
)

#: The demo's sizes: twice the exits of each protocol (pool_admin/demo_proxies.py), so every
#: fetch (every 10 s) has room to ask for all of them: the emulator hands out the same exits, and
#: each fetch refreshes the live ones before their minute ends (at max_size, a full upstream
#: would ask nothing until they expired). An extracted exit comes back as a new proxy once its
#: record expires.
SIZES = {"demo": 2 * HTTP_USERS, "demo-socks5": 2 * SOCKS_SERVERS}


class Command(OperatorCommand):
    help = "Create or update the demo provider's account, upstreams and API client."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", required=True, help="The web server's URL.")
        add_secrets_fd(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        base = str(options["base_url"]).rstrip("/")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path:
            raise CommandError(f"--base-url must be http(s)://host:port, got {base!r}")
        secrets_fd = checked_secrets_fd(options.get("secrets_fd"))
        given = os.environ.get("DEMO_API_KEY", "")
        if given:  # checked before anything changes
            try:
                ApiKey.adoptable_prefix(given)
            except ValueError as exc:
                raise CommandError(f"DEMO_API_KEY refused: {exc}") from None
        try:
            with transaction.atomic():
                account = self._account()
                upstreams = [self._upstream(account, name, base) for name in demo.UPSTREAMS]
                client = self._client(upstreams)
        except ValidationError as exc:
            raise CommandError(f"demo configuration refused: {validation_text(exc)}") from None
        # Fetched at once, whatever an earlier run's failures left in the cadence.
        scheduler = get_scheduler()
        for upstream in upstreams:
            scheduler.schedule(account.name, upstream.name, fetch_tasks.now())
            scheduler.request(fetch_tasks.now(), account.name, upstream.name, timedelta(0))
        self.stdout.write(
            f"Demo provider: account {account.name!r}, upstreams "
            f"{', '.join(u.name for u in upstreams)} fetching from {base}/{demo.PATH}"
        )
        self._key(client, base, secrets_fd)

    def _account(self) -> ProviderAccount:
        credential = Credential.objects.filter(name=demo.CREDENTIAL).first()
        if credential is None or not credential.reveal().startswith("Token "):
            # Stored as the header's whole value, as a Webshare key is configured.
            secret = f"Token {secrets.token_hex(16)}"
            CredentialStore().put(demo.CREDENTIAL, secret, username="demo")
            credential = Credential.objects.get(name=demo.CREDENTIAL)
        account, _ = ProviderAccount.objects.update_or_create(
            name=demo.ACCOUNT,
            defaults={
                "credential": credential,
                "api_calls_per_second": 5,
                "api_calls_per_minute": 120,
                "fetch_concurrency": 2,
            },
        )
        return account

    def _upstream(self, account: ProviderAccount, name: str, base: str) -> Upstream:
        protocol = demo.UPSTREAMS[name]
        upstream, _ = Upstream.objects.update_or_create(
            name=name,
            defaults={
                "account": account,
                "kind": Upstream.Kind.PRESET,
                "preset": "webshare_list",
                "endpoint_url": f"{base}/{demo.PATH}",
                "request_params": {"protocol": protocol},
                "count_param": "page_size",
                "credential_header": "Authorization",
                "allow_local_hosts": True,
                "default_protocol": protocol,
                # Long enough for the gateway: the ownership manager assigns only proxies with
                # twice its drain lead (2 x 30 s) of use left, so a proxy living a minute
                # would never reach a worker; short enough that the pool visibly churns.
                "default_ttl_s": 180,
                "safety_margin_s": 5,
                "max_size": SIZES[name],
                "fetch_interval_s": 10,
                "check_url": f"{base}/healthz",
                "check_timeout_ms": 2_000,
                "check_interval_s": 30,
            },
        )
        return upstream

    def _client(self, upstreams: list[Upstream]) -> ApiClient:
        client, _ = ApiClient.objects.update_or_create(
            name=demo.CLIENT, defaults={"may_view_inventory": True, "gateway_enabled": True}
        )
        client.allowed_upstreams.set(upstreams)
        return client

    def _key(self, client: ApiClient, base: str, secrets_fd: int | None) -> None:
        given = os.environ.get("DEMO_API_KEY", "")
        if given:
            try:
                ApiKey.objects.adopt(client, given, name="DEMO_API_KEY")
            except ValueError as exc:
                raise CommandError(f"DEMO_API_KEY refused: {exc}") from None
            self.stdout.write("Demo API client 'demo': its key is DEMO_API_KEY.")
            return
        if ApiKey.objects.active().filter(client=client).exists():
            self.stdout.write(
                "Demo API client 'demo' has a key already (printed when it was issued); "
                "set DEMO_API_KEY to choose one."
            )
            return
        _, plaintext = ApiKey.objects.issue(client, name="demo")
        if secrets_fd is not None:
            hand_over_secret(secrets_fd, "demo_api_key", plaintext)
            self.stdout.write("Demo API client 'demo': a key was issued, sent to --secrets-fd.")
            return
        self.stdout.write(
            "Demo API client 'demo'. Its API key (shown only this once, store it now):\n"
            f"  {plaintext}\n"
            f"  curl -s -H 'Authorization: Bearer {plaintext}' {base}/api/v1/inventory"
        )
