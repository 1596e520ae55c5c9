"""Encryption at rest for provider credentials (the store that hands out ``SecretRef``s is
``pool_admin.config.credential_store``).

Keys come from ``settings.POOL_SECRET_KEYS`` (``POOL_SECRET_KEY``, comma-separated, newest
first). ``cryptography``'s MultiFernet encrypts with the first key and decrypts with any, so a
key rotates by putting the new one first, running ``manage.py rotate_secret_key``, and only then
removing the old one. Nothing here logs, and no error message carries a secret, a ciphertext
or a raw reference.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


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
