"""``manage.py create_worker NAME --group GROUP``: create a gateway worker and print its first
token once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin.config.models import GatewayWorker, WorkerGroup, WorkerToken
from pool_admin.management.cli import OperatorCommand, one_line_errors


class Command(OperatorCommand):
    help = "Create a gateway worker in a worker group and print its first token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "name", help="The worker's ID in the pool (a label, e.g. edge-1); fixed once created."
        )
        parser.add_argument("--group", required=True, help="Its worker group.")
        parser.add_argument(
            "--disabled",
            action="store_true",
            help="Create it disabled (its token works once it is enabled in the admin).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        with one_line_errors():
            if GatewayWorker.objects.filter(name=name).exists():
                raise CommandError(f"worker {name!r} already exists; nothing changed")
            group = WorkerGroup.objects.filter(name=options["group"]).first()
            if group is None:
                raise CommandError(f"unknown worker group {options['group']!r}; nothing changed")
            with transaction.atomic():
                worker = GatewayWorker(name=name, group=group, enabled=not options["disabled"])
                worker.save()
                token, plaintext = WorkerToken.objects.issue(worker)
        state = "enabled" if worker.enabled else "disabled"
        self.stdout.write(f"Created worker {worker} in group {group} ({state}).")
        self.stdout.write(f"Worker token {token} (shown once, store it now):")
        self.stdout.write(plaintext)
