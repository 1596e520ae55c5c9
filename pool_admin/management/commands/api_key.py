"""``manage.py api_key add|revoke|rotate|list``: manage a client's API keys.

A key's plaintext is printed once, when it is issued, and never again; lists show prefixes only.
The API caches a verified key for up to 30 s, so a revocation takes effect within that time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.management.cli import OperatorCommand, one_line_errors, table

CACHE_NOTE = "(the API honours a revocation within 30 s)"


def _client(name: str) -> ApiClient:
    client = ApiClient.objects.filter(name=name).first()
    if client is None:
        raise CommandError(f"unknown client {name!r}; nothing changed")
    return client


def _when(value: datetime | None) -> str | None:
    return None if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


class Command(OperatorCommand):
    help = "Add, revoke, rotate or list API keys of a client."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        add = actions.add_parser("add", help="Issue another key for CLIENT (printed once).")
        add.add_argument("client")
        add.add_argument("--name", default="", help="Optional note, e.g. 'prod'.")
        revoke = actions.add_parser("revoke", help="Revoke the key with PREFIX.")
        revoke.add_argument("prefix", help="The key's prefix, as listed (pp_<prefix> or <prefix>).")
        rotate = actions.add_parser("rotate", help="Issue a new key for CLIENT (printed once).")
        rotate.add_argument("client")
        rotate.add_argument(
            "--revoke-old", action="store_true", help="Also revoke every older active key."
        )
        listing = actions.add_parser("list", help="List CLIENT's keys (never a secret).")
        listing.add_argument("client")

    def handle(self, *args: Any, **options: Any) -> None:
        with one_line_errors():
            getattr(self, "_" + options["action"])(options)

    def _add(self, options: dict[str, Any]) -> None:
        client = _client(options["client"])
        if len(options["name"]) > 100:
            raise CommandError("--name must be at most 100 characters; nothing changed")
        key, plaintext = ApiKey.objects.issue(client, name=options["name"])
        self.stdout.write(f"Issued API key {key} for {client} (shown once, store it now):")
        self.stdout.write(plaintext)

    def _revoke(self, options: dict[str, Any]) -> None:
        text: str = options["prefix"].strip().rstrip("…")
        prefix = text.removeprefix(f"{ApiKey.SCHEME}_").split("_", 1)[0]
        if len(text.split("_")) > 2:
            raise CommandError("give the key's prefix, not the whole key; nothing changed")
        key = ApiKey.objects.select_related("client").filter(prefix=prefix).first()
        if key is None:
            raise CommandError(f"no API key with prefix {prefix!r}; nothing changed")
        if key.revoked_at is not None:
            self.stdout.write(
                f"API key {key} of {key.client} was already revoked on {_when(key.revoked_at)}."
            )
            return
        key.revoke()
        self.stdout.write(f"Revoked API key {key} of {key.client} {CACHE_NOTE}.")

    def _rotate(self, options: dict[str, Any]) -> None:
        client = _client(options["client"])
        with transaction.atomic():
            old = list(ApiKey.objects.active().filter(client=client).order_by("created_at"))
            key, plaintext = ApiKey.objects.issue(client, name="rotated")
            if options["revoke_old"]:
                for previous in old:
                    previous.revoke()
        self.stdout.write(f"Issued API key {key} for {client} (shown once, store it now):")
        self.stdout.write(plaintext)
        names = ", ".join(f"{ApiKey.SCHEME}_{k.prefix}" for k in old)
        if not old:
            self.stdout.write("It is the client's only active key.")
        elif options["revoke_old"]:
            self.stdout.write(f"Revoked {len(old)} older key(s): {names} {CACHE_NOTE}.")
        else:
            self.stdout.write(
                f"{len(old)} older key(s) stay valid: {names}. Revoke them once callers use "
                f"the new key: api_key revoke PREFIX, or api_key rotate {client} --revoke-old."
            )

    def _list(self, options: dict[str, Any]) -> None:
        client = _client(options["client"])
        keys = ApiKey.objects.filter(client=client).order_by("-created_at")
        rows = [
            (
                f"{ApiKey.SCHEME}_{k.prefix}",
                k.name or None,
                _when(k.created_at),
                _when(k.last_used_at) or "never",
                f"revoked {_when(k.revoked_at)}" if k.revoked_at else "active",
            )
            for k in keys
        ]
        if not rows:
            self.stdout.write(f"Client {client} has no API keys.")
            return
        self.stdout.write(table(("prefix", "note", "created", "last used", "status"), rows))
