"""``manage.py gateway_worker NAME``: run gateway worker NAME (``python -m gateway_runtime``)
against this deployment's control plane, with a token issued for this run.

The token is issued now and handed to the worker process in its environment only (never on a
command line, never in a file); the tokens this command issued for NAME before, named
``gateway_worker run``, are revoked first, so restarts do not pile up live tokens. With
``--ensure`` the worker (and its group, allowed every enabled upstream) are created when
missing: what ``make run`` does for its local worker. The binds are flags here; every other
setting is the worker's environment (``GATEWAY_*``, ``python -m gateway_runtime --help``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin.config.models import GatewayWorker, Upstream, WorkerGroup, WorkerToken
from pool_admin.management.cli import OperatorCommand, one_line_errors

#: The note on the tokens this command issues (not a secret).
TOKEN_NAME = "gateway_worker run"  # noqa: S105
BINDS = (
    ("--http-bind", "GATEWAY_BIND"),
    ("--socks-bind", "GATEWAY_SOCKS_BIND"),
    ("--metrics-bind", "GATEWAY_METRICS_BIND"),
)


class Command(OperatorCommand):
    help = "Run a gateway worker against this deployment, with a token issued for the run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="The gateway worker to run (manage.py create_worker).")
        parser.add_argument(
            "--control-url",
            default=os.environ.get("GATEWAY_CONTROL_URL", ""),
            help="The control plane's base URL (default: http://WEB_BIND).",
        )
        parser.add_argument(
            "--ensure",
            action="store_true",
            help="Create the worker and its group when missing.",
        )
        parser.add_argument("--group", default="local", help="The group for --ensure.")
        for flag, variable in BINDS:
            parser.add_argument(
                flag,
                default=os.environ.get(variable, ""),
                help=f"Passed to the worker ({variable}).",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        with one_line_errors(), transaction.atomic():
            worker = GatewayWorker.objects.filter(name=name).first()
            if worker is None:
                if not options["ensure"]:
                    raise CommandError(f"unknown worker {name!r} (manage.py create_worker)")
                worker = GatewayWorker.objects.create(name=name, group=self._group(options))
            for old in WorkerToken.objects.active().filter(worker=worker, name=TOKEN_NAME):
                old.revoke()
            _, plaintext = WorkerToken.objects.issue(worker, name=TOKEN_NAME)
        control = options["control_url"] or _web_url()
        argv = [sys.executable, "-m", "gateway_runtime", "--control-url", control]
        for flag, _ in BINDS:
            value = options[flag.lstrip("-").replace("-", "_")]
            if value:
                argv += [flag, value]
        env = {**os.environ, "GATEWAY_TOKEN": plaintext}
        env.pop("GATEWAY_TOKEN_FILE", None)
        sys.stdout.flush()
        os.execve(sys.executable, argv, env)  # noqa: S606 - our own interpreter, fixed module

    def _group(self, options: dict[str, Any]) -> WorkerGroup:
        group, created = WorkerGroup.objects.get_or_create(
            name=options["group"], defaults={"target_capacity": 100}
        )
        if created:
            group.allowed_upstreams.add(*Upstream.objects.filter(enabled=True))
            self.stdout.write(f"Created worker group {group} (every enabled upstream).")
        return group


def _web_url() -> str:
    bind = os.environ.get("WEB_BIND", "127.0.0.1:8000")
    host, _, port = bind.rpartition(":")
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"  # noqa: S104
