"""``manage.py rotate_secret_key``: re-encrypt every credential with the first POOL_SECRET_KEY.

Rotation: set ``POOL_SECRET_KEY=<new>,<old>``, run this, then drop ``<old>``. Everything happens
in one transaction and every row is decrypted before any is written, so a row no configured key
can read stops the command with nothing changed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from pool_admin.config import secrets as secret_box
from pool_admin.config.models import Credential
from pool_admin.management.cli import OperatorCommand


class Command(OperatorCommand):
    help = "Re-encrypt every stored credential with the first key of POOL_SECRET_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._rotate()
        except DatabaseError as exc:
            # One line, no SQL parameters (they would include ciphertexts).
            raise CommandError(f"database error, nothing changed: {type(exc).__name__}") from None

    def _rotate(self) -> None:
        new_key_id = secret_box.key_id()
        with transaction.atomic():
            # Locked, so a credential edited meanwhile cannot be overwritten with a stale value.
            rows = list(
                Credential.objects.select_for_update()
                .order_by("pk")
                .values_list("pk", "ciphertext")
            )
            total = len(rows)
            fresh: list[tuple[int, bytes]] = []
            for pk, ciphertext in rows:
                try:
                    fresh.append((pk, secret_box.reencrypt(ciphertext)))
                except secret_box.SecretUnreadable:
                    raise CommandError(
                        f"credential id {pk} cannot be decrypted with any key in POOL_SECRET_KEY; "
                        "nothing changed"
                    ) from None
            for done, (pk, ciphertext) in enumerate(fresh, start=1):
                # update(), not save(): the secret and its version do not change, so references
                # handed out stay valid and history gets no ciphertext-only entries.
                Credential.objects.filter(pk=pk).update(ciphertext=ciphertext, key_id=new_key_id)
                self.stdout.write(f"re-encrypted {done} of {total}")
        self.stdout.write(f"Done: {total} credential(s) now encrypted with key {new_key_id}.")
