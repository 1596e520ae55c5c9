"""``manage.py extract CLIENT --count N``: extract proxies for a client, as the API would.

It runs the API's own code path (``pool_admin.api.extracting.perform_extract``) with the
client's limits, allowed filters, gateway reserve and rate limits, so an operator's extract
counts against the client like any other. Passwords are masked unless ``--show-passwords``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from rest_framework import exceptions

from activity import ExtractMode
from activity.errors import InsufficientInventory
from activity.types import PROTOCOLS
from pool_admin.api.auth import principal_for_client
from pool_admin.api.extracting import perform_extract
from pool_admin.api.problems import Problem
from pool_admin.api.serializers import MAX_COUNT
from pool_admin.config.models import ApiClient
from pool_admin.management.cli import OperatorCommand, one_line_errors, parse_int, table

MASK = "********"
#: Shown as the key prefix in usage events of extracts made by this command.
OPERATOR_KEY = "operator-cli"


def _flatten(detail: Any, path: str = "") -> list[str]:
    if isinstance(detail, dict):
        out: list[str] = []
        for name, value in detail.items():
            out += _flatten(value, f"{path}.{name}" if path else str(name))
        return out
    if isinstance(detail, list):
        return [text for item in detail for text in _flatten(item, path)]
    return [f"{path}: {detail}" if path else str(detail)]


class Command(OperatorCommand):
    help = "Extract proxies for CLIENT through the API's code path and limits; print a table."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("client", help="The API client to extract for.")
        parser.add_argument("--count", default="1", help=f"How many (1-{MAX_COUNT}; default 1).")
        # Choices are checked by the API's serializer (one-line error), not by argparse.
        modes = "|".join(m.value for m in ExtractMode)
        parser.add_argument("--mode", default=ExtractMode.PARTIAL.value, help=modes)
        parser.add_argument("--region")
        parser.add_argument("--protocol", help="|".join(sorted(PROTOCOLS)))
        parser.add_argument("--upstream")
        parser.add_argument("--show-passwords", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        count = parse_int(options["count"], "--count", 1, MAX_COUNT)
        with one_line_errors():
            client = ApiClient.objects.filter(name=options["client"]).first()
            if client is None:
                raise CommandError(f"unknown client {options['client']!r}; nothing changed")
            if not client.enabled:
                raise CommandError(f"client {client} is disabled; nothing changed")
            principal = principal_for_client(client, OPERATOR_KEY)
        filters = {
            name: options[name]
            for name in ("region", "protocol", "upstream")
            if options[name] is not None
        }
        body: dict[str, Any] = {"count": count, "mode": options["mode"], "filters": filters}
        with one_line_errors():
            try:
                result = perform_extract(principal, body, source="cli")
            except Problem as exc:
                retry = (exc.headers or {}).get("Retry-After")
                tail = f" (retry after {retry} s)" if retry else ""
                raise CommandError(f"{exc.code}: {exc.detail}{tail}; nothing changed") from None
            except InsufficientInventory as exc:
                raise CommandError(
                    f"{exc.code}: {exc.available} matching proxies, {exc.requested} requested "
                    "(all_or_nothing); nothing extracted"
                ) from None
            except exceptions.ValidationError as exc:
                text = "; ".join(_flatten(exc.detail))
                raise CommandError(f"invalid_request: {text}; nothing changed") from None
        show = options["show_passwords"]
        rows = [
            (
                p.proxy_id,
                f"{p.host}:{p.port}",
                p.protocol,
                p.username,
                (p.password if show else MASK) if p.password is not None else None,
                f"{p.expires_at:%Y-%m-%d %H:%M:%S} UTC",
                p.upstream_id,
                p.region,
                p.carrier,
            )
            for p in result.proxies
        ]
        headers = (
            "id",
            "address",
            "protocol",
            "username",
            "password",
            "expires",
            "upstream",
            "region",
            "carrier",
        )
        if rows:
            self.stdout.write(table(headers, rows))
        self.stdout.write(
            f"Extracted {result.returned} of {result.requested} for {client} "
            f"({options['mode']}, pool generation {result.generation})."
            + ("" if show or not rows else " Passwords masked: add --show-passwords.")
        )
