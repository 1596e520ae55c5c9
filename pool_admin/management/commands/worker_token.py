"""``manage.py worker_token add|revoke|rotate|list``: manage a gateway worker's tokens.

A token's plaintext is printed once, when it is issued, and never again; lists show prefixes
only. The control API caches a verified token for up to 30 s, so a revocation takes effect
within that time. ``create_worker`` creates a worker with its first token.
"""

from __future__ import annotations

from pool_admin.config.models import GatewayWorker, WorkerToken
from pool_admin.management.secret_commands import SecretCommand


class Command(SecretCommand):
    help = "Add, revoke, rotate or list the tokens of a gateway worker (list: of every worker)."
    secret_model = WorkerToken
    owner_field = "worker"
    owner_model = GatewayWorker
    list_all = True
