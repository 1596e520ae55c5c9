"""``manage.py api_key add|revoke|rotate|list``: manage a client's API keys.

A key's plaintext is printed once, when it is issued, and never again; lists show prefixes only.
The API caches a verified key for up to 30 s, so a revocation takes effect within that time.
"""

from __future__ import annotations

from pool_admin.config.models import ApiClient, ApiKey
from pool_admin.management.secret_commands import SecretCommand


class Command(SecretCommand):
    help = "Add, revoke, rotate or list API keys of a client."
    secret_model = ApiKey
    owner_field = "client"
    owner_model = ApiClient
