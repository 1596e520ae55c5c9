"""Bearer secrets: what API keys and gateway worker tokens share.

Each is ``<scheme>_<prefix>_<secret>``: the scheme tells the kinds apart (``pp`` an API key,
``pw`` a worker token), so one is never checked as the other; the prefix (12 hex characters)
names the secret in lists and logs; only a SHA-256 of the whole plaintext is stored, and the
plaintext is returned once, by ``issue``. A secret is revoked, never deleted, so lists and
history keep what it was.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

S = TypeVar("S", bound="BearerSecret")


def secret_hash(plaintext: str) -> str:
    """The stored form of a bearer secret."""
    # SHA-256, not a password hasher (PBKDF2/argon2): the secret is 256 random bits, so
    # stretching adds nothing against brute force, while it would cost ~100 ms of CPU on every
    # API request and cap the extract API far below its throughput target.
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


class BearerSecretQuerySet(models.QuerySet[S], Generic[S]):
    def active(self) -> BearerSecretQuerySet[S]:
        return self.filter(revoked_at__isnull=True)


class BearerSecretManager(models.Manager[S], Generic[S]):
    """Issue and verify the secrets of one kind; its owner is the concrete model's business."""

    def get_queryset(self) -> BearerSecretQuerySet[S]:
        return BearerSecretQuerySet(self.model, using=self._db)

    def active(self) -> BearerSecretQuerySet[S]:
        return self.get_queryset().active()

    def _issue(self, **fields: Any) -> tuple[S, str]:
        """A new secret with ``fields`` (its owner, a note); it and its plaintext, never stored."""
        model = self.model
        for _attempt in range(5):
            prefix = secrets.token_hex(model.PREFIX_BYTES)
            plaintext = f"{model.SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
            secret = model(
                prefix=prefix,
                key_hash=secret_hash(plaintext),
                **model.derived_from(plaintext),
                **fields,
            )
            try:
                with transaction.atomic():
                    secret.save()
            except ValidationError as exc:
                if "prefix" not in exc.error_dict:  # anything but a (rare) prefix collision
                    raise
                continue
            except IntegrityError:  # a concurrent issue took the same prefix
                continue
            return secret, plaintext
        raise RuntimeError(f"could not find a free {model.KIND} prefix")

    def _verify(self, plaintext: str, usable: Q, related: str) -> S | None:
        """The active secret ``plaintext`` is, whose owner is ``usable``, with ``related``
        loaded; None for anything else (another kind's secret among them)."""
        prefix = self.model.prefix_of(plaintext)
        if prefix is None:
            return None
        found = (
            self.get_queryset()
            .active()
            .filter(usable, prefix=prefix)
            .select_related(related)
            .first()
        )
        if found is None or not hmac.compare_digest(found.key_hash, secret_hash(plaintext)):
            return None
        return found


#: Kept out of every kind's history: the hash and the last-used time (written at most once a
#: minute on use, not a change anyone made).
HISTORY_EXCLUDED = ["key_hash", "last_used_at"]


class BearerSecret(models.Model):
    """One bearer secret. Only a hash is stored; the prefix identifies it in lists."""

    SCHEME: ClassVar[str]
    #: What an operator calls it ("API key").
    KIND: ClassVar[str]
    PREFIX_BYTES = 6  # 12 hex characters: collisions are rare, and retried in issue()
    TOUCH_EVERY = timedelta(minutes=1)

    name = models.CharField(max_length=100, blank=True, help_text="Optional note, e.g. 'prod'.")
    prefix = models.CharField(max_length=2 * PREFIX_BYTES, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    # Each concrete kind declares its own history, without HISTORY_EXCLUDED and whatever else
    # it keeps out (an API key's gateway verifier).

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.SCHEME}_{self.prefix}…"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)

    @classmethod
    def derived_from(cls, plaintext: str) -> dict[str, str]:
        """Fields a kind keeps that can only be made from the plaintext, at its issue."""
        return {}

    @classmethod
    def prefix_of(cls, plaintext: str) -> str | None:
        """The prefix of a secret of this kind; None for anything else."""
        scheme, sep, rest = plaintext.partition("_")
        prefix, sep2, secret = rest.partition("_")
        size = 2 * cls.PREFIX_BYTES
        if scheme != cls.SCHEME or not sep or not sep2 or len(prefix) != size or not secret:
            return None
        return prefix

    @classmethod
    def adoptable_prefix(cls, plaintext: str) -> str:
        """The prefix of a secret chosen outside, in this kind's format with at least 32 random
        characters; ValueError otherwise."""
        prefix = cls.prefix_of(plaintext)
        secret = plaintext.split("_", 2)[-1]  # what follows the prefix (it may hold "_")
        if prefix is None or not re.fullmatch(r"[0-9a-f]+", prefix) or len(secret) < 32:
            raise ValueError(
                f"not an {cls.KIND} of this project ({cls.SCHEME}_<{2 * cls.PREFIX_BYTES} hex>_"
                "<32 or more random characters>)"
            )
        return prefix

    @classmethod
    def label_of(cls, text: str) -> str:
        """The prefix an operator means by ``text`` (``<scheme>_<prefix>``, ``<prefix>`` or the
        listed ``<scheme>_<prefix>…``); ValueError for a whole secret, which is never a name."""
        given = text.strip().rstrip("…")
        if len(given.split("_")) > 2:
            raise ValueError("give the prefix, not the whole secret")
        return given.removeprefix(f"{cls.SCHEME}_").split("_", 1)[0]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def touch(self) -> None:
        """Record use, at most once a minute per secret (one UPDATE, skipped when recent)."""
        now = timezone.now()
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - self.TOUCH_EVERY)
        if type(self)._default_manager.filter(Q(pk=self.pk) & stale).update(last_used_at=now):
            self.last_used_at = now
