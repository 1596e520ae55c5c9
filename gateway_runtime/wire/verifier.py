"""A gateway client's API key, as the worker checks it: a salted verifier, never the key.

The verifier is HMAC-SHA256 of the key, keyed by a random salt of the client's own. Not a
password hash (scrypt, argon2): a worker checks the key on every connection it accepts, and a
deliberately slow hash there would cost milliseconds of CPU per connection and cap the gateway
far below its throughput. Stretching protects low-entropy secrets; an API key is not one: its
secret part is 32 or more random characters (``pp_<12 hex>_<32+ random characters>``; 256 random
bits when the project issues it), so a stolen verifier cannot be searched back to its key
however fast the hash is. The salt makes each verifier differ from every other client's, from
the same key's on another issue, and from the unsalted SHA-256 PostgreSQL keeps, so a leaked
snapshot matches nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

SCHEME = "hmac-sha256"
#: Salt ``new_salt`` draws; a verifier's salt may be 16 to 64 bytes.
SALT_BYTES = 16
MIN_SALT_BYTES = 16
MAX_SALT_BYTES = 64
#: A presented key longer than this is refused without hashing it.
MAX_API_KEY_LENGTH = 512
#: ``hmac-sha256$<salt, hex>$<digest, hex>``.
VERIFIER_PATTERN = (
    rf"{SCHEME}\$(?:[0-9a-f]{{2}}){{{MIN_SALT_BYTES},{MAX_SALT_BYTES}}}\$[0-9a-f]{{64}}"
)
_VERIFIER = re.compile(VERIFIER_PATTERN)


def new_salt() -> bytes:
    return secrets.token_bytes(SALT_BYTES)


def make_verifier(api_key: str, salt: bytes) -> str:
    """The verifier of ``api_key`` under ``salt`` (ValueError, not naming the key, if either
    is unusable)."""
    if not isinstance(salt, bytes) or not MIN_SALT_BYTES <= len(salt) <= MAX_SALT_BYTES:
        raise ValueError(f"the salt must be {MIN_SALT_BYTES} to {MAX_SALT_BYTES} bytes")
    key = _key_bytes(api_key)
    if key is None:
        raise ValueError(f"an API key is a string of 1 to {MAX_API_KEY_LENGTH} characters")
    return f"{SCHEME}${salt.hex()}${_digest(key, salt)}"


def verify(api_key: str, verifier: str) -> bool:
    """Whether ``api_key`` is the key ``verifier`` was made from; False for a malformed one.
    The digests are compared in constant time."""
    key = _key_bytes(api_key)
    if key is None or not is_verifier(verifier):
        return False
    _, salt_hex, expected = verifier.split("$")
    return hmac.compare_digest(_digest(key, bytes.fromhex(salt_hex)), expected)


def is_verifier(value: object) -> bool:
    """Whether ``value`` has a verifier's form."""
    return isinstance(value, str) and _VERIFIER.fullmatch(value) is not None


def _key_bytes(api_key: object) -> bytes | None:
    if not isinstance(api_key, str) or not 0 < len(api_key) <= MAX_API_KEY_LENGTH:
        return None
    try:
        return api_key.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no key of ours
        return None


def _digest(key: bytes, salt: bytes) -> str:
    return hmac.new(salt, key, hashlib.sha256).hexdigest()
