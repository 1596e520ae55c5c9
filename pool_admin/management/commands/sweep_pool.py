"""``manage.py sweep_pool``: run the pool's sweep once and print what it removed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from activity import PoolOptions
from pool_admin.management.cli import OperatorCommand, one_line_errors, parse_int
from pool_admin.tasks import sweep_pool

DEFAULT_LIMIT = 1_000


class Command(OperatorCommand):
    help = "Remove expired proxy records and worker sessions from the pool (one sweep)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--limit", help=f"Most records and sessions to remove (default {DEFAULT_LIMIT})."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        high = PoolOptions().max_sweep_limit
        limit = parse_int(options["limit"], "--limit", 1, high) or DEFAULT_LIMIT
        with one_line_errors(nothing_changed=False):
            result = sweep_pool(limit)
        self.stdout.write(
            f"Swept: removed {result.expired} expired proxy record(s) and {result.sessions} "
            f"expired worker session(s) (limit {limit})."
        )
        if result.more:
            self.stdout.write("More expired entries remain: run it again.")
        else:
            self.stdout.write("Nothing expired is left.")
