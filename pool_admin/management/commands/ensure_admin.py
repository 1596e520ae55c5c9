"""``manage.py ensure_admin``: create the first superuser once, idempotently.

Username from ADMIN_USERNAME (default ``admin``); password from ADMIN_PASSWORD, or generated and
printed exactly once (with ``--secrets-fd``, handed over on that descriptor instead, as
``admin_password=...``: ``make run`` shows it on the terminal, never in a log). An existing
user is left untouched and nothing secret is printed.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from pool_admin.management.cli import (
    OperatorCommand,
    add_secrets_fd,
    checked_secrets_fd,
    hand_over_secret,
)


class Command(OperatorCommand):
    help = "Create the superuser ADMIN_USERNAME (default 'admin') if it does not exist."

    def add_arguments(self, parser: CommandParser) -> None:
        add_secrets_fd(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        secrets_fd = checked_secrets_fd(options.get("secrets_fd"))
        user_model = get_user_model()
        username = os.environ.get("ADMIN_USERNAME", "admin").strip()
        try:
            user_model.username_validator(username)
        except ValidationError:
            raise CommandError(f"ADMIN_USERNAME {username!r} is not a valid username") from None

        if user_model._default_manager.filter(username=username).exists():
            self.stdout.write(f"Admin user '{username}' already exists; nothing changed.")
            return

        given = os.environ.get("ADMIN_PASSWORD", "")
        password = given or secrets.token_urlsafe(18)
        if given:
            try:
                validate_password(given, user_model(username=username))
            except ValidationError as exc:
                # The reasons describe the password's shape, never the password itself.
                raise CommandError(f"ADMIN_PASSWORD rejected: {' '.join(exc.messages)}") from None

        with transaction.atomic():
            user_model._default_manager.create_superuser(username=username, password=password)
        if given:
            self.stdout.write(
                f"Created superuser '{username}' with the password from ADMIN_PASSWORD."
            )
            return
        if secrets_fd is not None:
            hand_over_secret(secrets_fd, "admin_password", password)
            self.stdout.write(
                f"Created superuser '{username}'; its generated password went to --secrets-fd."
            )
            return
        self.stdout.write(
            f"Created superuser '{username}'.\n"
            f"  Generated password (shown only this once, store it now): {password}\n"
            "  Set ADMIN_PASSWORD before the first run to choose it instead."
        )
