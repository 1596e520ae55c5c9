"""``manage.py doctor``: check the deployment and say what to fix (pool_admin/doctor/).

Exit status: 0 when no check fails (warnings allowed; ``--strict`` counts them as failures),
1 otherwise. ``--json`` prints the same findings as one JSON document.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import CommandParser

from pool_admin.doctor.checklist import all_checks
from pool_admin.doctor.findings import exit_code, render_json, render_text, run_checks
from pool_admin.management.cli import OperatorCommand, parse_int

#: Seconds the whole run may take by default (the checks run side by side).
DEFAULT_TIMEOUT_S = 10


class Command(OperatorCommand):
    help = "Check the deployment: settings, PostgreSQL, Redis, Celery, beat, consumers, gateway."
    requires_system_checks: list[str] = []  # the doctor runs them itself, as one of its checks
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument(
            "--strict", action="store_true", help="Exit 1 on a warning too, not only a failure."
        )
        parser.add_argument(
            "--timeout",
            default=str(DEFAULT_TIMEOUT_S),
            help=f"Seconds the checks may take in all (1-120, default {DEFAULT_TIMEOUT_S}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        timeout = parse_int(options["timeout"], "--timeout", 1, 120) or DEFAULT_TIMEOUT_S
        began = time.monotonic()
        findings = run_checks(all_checks(), float(timeout))
        elapsed = time.monotonic() - began
        if options["json"]:
            self.stdout.write(render_json(findings, elapsed, options["strict"]))
        else:
            self.stdout.write(render_text(findings, elapsed))
        sys.stdout.flush()
        code = exit_code(findings, options["strict"])
        if code:
            sys.exit(code)
