"""What ``api_key`` and ``worker_token`` share: add, revoke, rotate and list the bearer secrets
(pool_admin/config/models/bearer.py) of one owner (an API client, a gateway worker).

A secret's plaintext is printed once, when it is issued, and never again; lists show prefixes
only. The API caches a verified secret for up to 30 s, so a revocation takes effect within that
time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.core.management.base import CommandError, CommandParser
from django.db import models, transaction

from pool_admin.config.models.bearer import BearerSecret
from pool_admin.management.cli import OperatorCommand, one_line_errors, table

CACHE_NOTE = "(the API honours a revocation within 30 s)"


def when(value: datetime | None) -> str | None:
    return None if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


class SecretCommand(OperatorCommand):
    """``<command> add|revoke|rotate|list`` over one kind of secret."""

    #: The secrets' model, and its foreign key to the owner (also the owner's argument name).
    secret_model: ClassVar[type[BearerSecret]]
    owner_field: ClassVar[str]
    owner_model: ClassVar[type[models.Model]]
    #: ``list`` without an owner lists every owner's secrets.
    list_all: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return self.secret_model.KIND

    @property
    def command(self) -> str:
        return type(self).__module__.rsplit(".", 1)[-1]

    def add_arguments(self, parser: CommandParser) -> None:
        owner, kind = self.owner_field, self.kind
        upper = owner.upper()
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        add = actions.add_parser("add", help=f"Issue another {kind} for {upper} (printed once).")
        add.add_argument(owner)
        add.add_argument("--name", default="", help="Optional note, e.g. 'prod'.")
        revoke = actions.add_parser("revoke", help=f"Revoke the {kind} with PREFIX.")
        scheme = self.secret_model.SCHEME
        revoke.add_argument(
            "prefix", help=f"Its prefix, as listed ({scheme}_<prefix> or <prefix>)."
        )
        rotate = actions.add_parser(
            "rotate", help=f"Issue a new {kind} for {upper} (printed once)."
        )
        rotate.add_argument(owner)
        rotate.add_argument(
            "--revoke-old", action="store_true", help=f"Also revoke every older active {kind}."
        )
        listing = actions.add_parser("list", help=f"List {upper}'s {kind}s (never a secret).")
        if self.list_all:
            listing.add_argument(owner, nargs="?", help=f"None: every {owner}'s.")
        else:
            listing.add_argument(owner)

    def handle(self, *args: Any, **options: Any) -> None:
        with one_line_errors():
            getattr(self, "_" + options["action"])(options)

    def _owner(self, name: str) -> Any:
        owner = self.owner_model._default_manager.filter(name=name).first()
        if owner is None:
            raise CommandError(f"unknown {self.owner_field} {name!r}; nothing changed")
        return owner

    def _secrets(self) -> Any:
        return self.secret_model._default_manager

    def _issued(self, secret: BearerSecret, plaintext: str, owner: object) -> None:
        self.stdout.write(f"Issued {self.kind} {secret} for {owner} (shown once, store it now):")
        self.stdout.write(plaintext)

    def _add(self, options: dict[str, Any]) -> None:
        owner = self._owner(options[self.owner_field])
        if len(options["name"]) > 100:
            raise CommandError("--name must be at most 100 characters; nothing changed")
        secret, plaintext = self._secrets().issue(owner, name=options["name"])
        self._issued(secret, plaintext, owner)

    def _revoke(self, options: dict[str, Any]) -> None:
        kind = self.kind
        try:
            prefix = self.secret_model.label_of(options["prefix"])
        except ValueError:
            raise CommandError(
                f"give the {kind}'s prefix, not the whole {kind}; nothing changed"
            ) from None
        found = self._secrets().select_related(self.owner_field).filter(prefix=prefix).first()
        if found is None:
            raise CommandError(f"no {kind} with prefix {prefix!r}; nothing changed")
        owner = getattr(found, self.owner_field)
        if found.revoked_at is not None:
            revoked = when(found.revoked_at)
            self.stdout.write(
                f"{kind[:1].upper()}{kind[1:]} {found} of {owner} was already revoked on {revoked}."
            )
            return
        found.revoke()
        self.stdout.write(f"Revoked {kind} {found} of {owner} {CACHE_NOTE}.")

    def _rotate(self, options: dict[str, Any]) -> None:
        owner = self._owner(options[self.owner_field])
        kind, scheme = self.kind, self.secret_model.SCHEME
        with transaction.atomic():
            mine = self._secrets().active().filter(**{self.owner_field: owner})
            old = list(mine.order_by("created_at"))
            secret, plaintext = self._secrets().issue(owner, name="rotated")
            if options["revoke_old"]:
                for previous in old:
                    previous.revoke()
        self._issued(secret, plaintext, owner)
        names = ", ".join(f"{scheme}_{s.prefix}" for s in old)
        if not old:
            self.stdout.write(f"It is the {self.owner_field}'s only active {kind}.")
        elif options["revoke_old"]:
            self.stdout.write(f"Revoked {len(old)} older {kind}(s): {names} {CACHE_NOTE}.")
        else:
            self.stdout.write(
                f"{len(old)} older {kind}(s) stay valid: {names}. Revoke them once callers use "
                f"the new {kind}: {self.command} revoke PREFIX, or {self.command} rotate "
                f"{owner} --revoke-old."
            )

    def _list(self, options: dict[str, Any]) -> None:
        name = options[self.owner_field]
        found = self._secrets().select_related(self.owner_field)
        if name is not None:
            owner = self._owner(name)
            found = found.filter(**{self.owner_field: owner})
        scheme = self.secret_model.SCHEME
        rows = [
            (
                *(() if name is not None else (getattr(s, self.owner_field),)),
                f"{scheme}_{s.prefix}",
                s.name or None,
                when(s.created_at),
                when(s.last_used_at) or "never",
                f"revoked {when(s.revoked_at)}" if s.revoked_at else "active",
            )
            for s in found.order_by(f"{self.owner_field}__name", "-created_at")
        ]
        if not rows:
            whose = f"{self.owner_field.capitalize()} {owner}" if name is not None else "Nobody"
            self.stdout.write(f"{whose} has no {self.kind}s.")
            return
        headers = ("prefix", "note", "created", "last used", "status")
        owner_column = () if name is not None else (self.owner_field,)
        self.stdout.write(table((*owner_column, *headers), rows))
