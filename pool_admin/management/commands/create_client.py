"""``manage.py create_client NAME``: create an API client and print its first API key once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin.config.models import ApiClient, ApiKey, Upstream
from pool_admin.config.models.clients import (
    COUNT_PER_REQUEST,
    PROXIES_PER_MINUTE,
    REQUESTS_PER_SECOND,
)
from pool_admin.management.cli import OperatorCommand, one_line_errors, parse_int


class Command(OperatorCommand):
    help = "Create an API client with its limits and print its first API key (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The client's ID (a label, e.g. crawler-1).")
        parser.add_argument("--rps", help="Requests per second (default 50).")
        parser.add_argument("--proxies-per-minute", help="Proxies per minute (default 1000).")
        parser.add_argument("--max-count", help="Largest count per request (default 100).")
        parser.add_argument(
            "--upstream",
            action="append",
            default=[],
            metavar="U",
            help="An upstream it may draw from (repeat it; none: all).",
        )
        parser.add_argument(
            "--may-view-inventory",
            action="store_true",
            help="Let it call GET /api/v1/inventory (off by default).",
        )
        parser.add_argument(
            "--gateway",
            action="store_true",
            help="Let it use the gateway: workers accept its key, with the same upstreams, "
            "regions and protocols (off by default; limits in the admin).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        fields: dict[str, int] = {}
        for option, field, (low, high) in (
            ("rps", "requests_per_second", REQUESTS_PER_SECOND),
            ("proxies_per_minute", "proxies_per_minute", PROXIES_PER_MINUTE),
            ("max_count", "max_count_per_request", COUNT_PER_REQUEST),
        ):
            value = parse_int(options[option], "--" + option.replace("_", "-"), low, high)
            if value is not None:
                fields[field] = value
        wanted = list(dict.fromkeys(options["upstream"]))
        with one_line_errors():
            if ApiClient.objects.filter(name=name).exists():
                raise CommandError(f"client {name!r} already exists; nothing changed")
            upstreams = list(Upstream.objects.filter(name__in=wanted))
            missing = sorted(set(wanted) - {u.name for u in upstreams})
            if missing:
                raise CommandError(f"unknown upstream {missing[0]!r}; nothing changed")
            with transaction.atomic():
                client = ApiClient(
                    name=name,
                    may_view_inventory=options["may_view_inventory"],
                    gateway_enabled=options["gateway"],
                    **fields,
                )
                client.save()
                client.allowed_upstreams.add(*upstreams)
                key, plaintext = ApiKey.objects.issue(client)
        allowed = ", ".join(sorted(wanted)) or "all"
        self.stdout.write(
            f"Created client {client.name}: {client.requests_per_second} requests/s, "
            f"{client.proxies_per_minute} proxies/min, at most {client.max_count_per_request} "
            f"per request, upstreams: {allowed}, inventory: "
            f"{'visible' if client.may_view_inventory else 'not visible'}, gateway: "
            f"{'allowed' if client.gateway_enabled else 'not allowed'}."
        )
        self.stdout.write(f"API key {key} (shown once, store it now):")
        self.stdout.write(plaintext)
