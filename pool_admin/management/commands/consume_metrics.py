"""``manage.py consume_metrics``: the usage stream's consumer, until SIGINT or SIGTERM.

Several may run at once (one consumer group; each needs its own ``--name``, by default the
host and process ID). ``make run`` runs one. See pool_admin/metrics/consumer.py.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import CommandParser

from activity import redis_url
from pool_admin.management.cli import OperatorCommand, parse_int
from pool_admin.metrics.consumer import Consumer, options_from_settings


class Command(OperatorCommand):
    help = "Apply the usage stream's events to the PostgreSQL aggregates until stopped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--name",
            default=f"{socket.gethostname()}-{os.getpid()}",
            help="This consumer's name in the group (unique per process).",
        )
        parser.add_argument(
            "--batch",
            default="100",
            metavar="1-1000",
            help="Entries per read and transaction (each up to 500 events and 256 KiB; "
            "default 100).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch = parse_int(options["batch"], "--batch", 1, 1_000)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        opts = options_from_settings(batch=batch)
        # Reads block at most block_ms; the socket waits a little longer than that.
        client = redis_url.connect(
            settings.METRICS_REDIS_URL, socket_timeout=opts.block_ms / 1000 + 5
        )
        consumer = Consumer(client, options["name"], opts)
        self.stdout.write(f"metrics consumer {options['name']}: {opts.stream} -> PostgreSQL")
        consumer.run(stop)
        self.stdout.write(
            f"metrics consumer {options['name']}: stopped; applied "
            f"{consumer.applied}, redelivered {consumer.duplicates}, "
            f"dead-lettered {consumer.dead}"
        )
