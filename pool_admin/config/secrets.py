"""Encryption at rest for provider credentials, and the store that hands out ``SecretRef``s.

Keys come from ``settings.POOL_SECRET_KEYS`` (``POOL_SECRET_KEY``, comma-separated, newest
first). ``cryptography``'s MultiFernet encrypts with the first key and decrypts with any, so a
key rotates by putting the new one first, running ``manage.py rotate_secret_key``, and only then
removing the old one. Nothing here logs, and no error message carries a secret, a ciphertext
or a raw reference.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import DatabaseError, transaction

from activity.credentials import (
    Credential as ResolvedCredential,
)
from activity.credentials import (
    CredentialUnavailable,
    CredentialVersion,
    SecretRef,
)

if TYPE_CHECKING:
    from pool_admin.config.models import Credential

# The reference names a row and the secret's version, never the secret itself.
_REF = re.compile(r"cred:([1-9][0-9]{0,18}):([1-9][0-9]{0,9})")


class SecretUnreadable(Exception):
    """A ciphertext that none of the configured keys decrypts (wrong key, or damaged)."""


def _keys() -> tuple[str, ...]:
    # Read at every call, not at import: tests and the rotation command see settings changes.
    return tuple(settings.POOL_SECRET_KEYS)


@lru_cache(maxsize=8)
def _box(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode("ascii")) for key in keys])


def key_id(key: str | None = None) -> str:
    """Short fingerprint of ``key`` (default: the encrypting key), safe to store and show."""
    chosen = _keys()[0] if key is None else key
    return hashlib.sha256(chosen.encode("ascii")).hexdigest()[:12]


def encrypt(plaintext: str) -> bytes:
    """Encrypt with the first configured key."""
    return _box(_keys()).encrypt(plaintext.encode("utf-8"))


def decrypt(token: bytes | memoryview) -> str:
    """Decrypt with whichever configured key made ``token``; :class:`SecretUnreadable` if none."""
    try:
        return _box(_keys()).decrypt(bytes(token)).decode("utf-8")
    except (InvalidToken, UnicodeDecodeError):
        raise SecretUnreadable("no configured POOL_SECRET_KEY decrypts this secret") from None


def reencrypt(token: bytes | memoryview) -> bytes:
    """The same secret under the first key (MultiFernet.rotate keeps the original timestamp)."""
    try:
        return _box(_keys()).rotate(bytes(token))
    except InvalidToken:
        raise SecretUnreadable("no configured POOL_SECRET_KEY decrypts this secret") from None


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
        from pool_admin.config.models import Credential  # models import this module

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
        from pool_admin.config.models import Credential

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
