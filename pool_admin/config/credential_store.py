"""The credentials store: PostgreSQL rows (``Credential``, encrypted by ``secrets``) behind the
pool's ``SecretRef``s. Nothing here logs, and no error message carries a secret, a ciphertext or
a raw reference.
"""

from __future__ import annotations

import re

from django.db import DatabaseError, transaction

from activity.credentials import (
    Credential as ResolvedCredential,
)
from activity.credentials import (
    CredentialUnavailable,
    CredentialVersion,
    SecretRef,
)
from pool_admin.config.models import Credential
from pool_admin.config.secrets import SecretUnreadable, decrypt

# The reference names a row and the secret's version, never the secret itself.
_REF = re.compile(r"cred:([1-9][0-9]{0,18}):([1-9][0-9]{0,9})")


def ref_for(pk: int, version: int) -> SecretRef:
    return SecretRef(f"cred:{pk}:{version}")


class CredentialStore:
    """PostgreSQL-backed credentials store; implements ``activity.credentials.CredentialResolver``.

    A reference pins the secret's version: once the secret is replaced, references to the old
    version stop resolving, so nothing keeps using a credential the operator rotated away.
    """

    def put(
        self, name: str, secret: str, *, username: str = "", purpose: str | None = None
    ) -> CredentialVersion:
        """Store ``secret`` under ``name`` (created, or replaced with a new version)."""
        with transaction.atomic():
            row = Credential.objects.select_for_update().filter(name=name).first()
            if row is None:
                row = Credential(name=name)
            row.username = username
            if purpose is not None:
                row.purpose = purpose
            row.set_secret(secret)
            row.save()
        return self.current(row)

    @staticmethod
    def current(row: Credential) -> CredentialVersion:
        """The reference and version of a saved ``Credential`` row's current secret."""
        return CredentialVersion(ref_for(row.pk, row.version), row.version)

    def resolve(self, ref: SecretRef) -> ResolvedCredential:
        raw = getattr(ref, "ref", None)
        match = _REF.fullmatch(raw) if isinstance(raw, str) else None
        if match is None:
            raise CredentialUnavailable("not a credentials-store reference")
        pk, version = int(match[1]), int(match[2])
        try:
            row = Credential.objects.filter(pk=pk).only("username", "ciphertext", "version").first()
        except DatabaseError:
            raise CredentialUnavailable("credentials store unavailable") from None
        if row is None:
            raise CredentialUnavailable("unknown secret reference")
        if row.version != version:
            raise CredentialUnavailable("secret reference is out of date (secret was replaced)")
        try:
            return ResolvedCredential(row.username, decrypt(row.ciphertext))
        except SecretUnreadable:
            raise CredentialUnavailable(
                "secret cannot be decrypted with the configured keys"
            ) from None
