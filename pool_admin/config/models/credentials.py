"""Provider credentials, encrypted at rest (``pool_admin.config.secrets``)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from simple_history.models import HistoricalRecords

from pool_admin.config import secrets as secret_box
from pool_admin.config.models.base import ConfigModel, label_field


class Credential(ConfigModel):
    """A provider API credential, encrypted at rest; see ``pool_admin.config.secrets``."""

    class Purpose(models.TextChoices):
        PROVIDER_API = "provider_api", "Provider API credential"
        PROXY_AUTH = "proxy_auth", "Account-wide proxy authentication"
        OTHER = "other", "Other"

    name = label_field(unique=True)
    purpose = models.CharField(max_length=20, choices=Purpose, default=Purpose.PROVIDER_API)
    username = models.CharField(
        max_length=256,
        blank=True,
        help_text="Account or user name, if the provider uses one. Not secret: shown as is.",
    )
    # Fernet token; BinaryField is not editable, so no form ever renders it.
    ciphertext = models.BinaryField(default=b"")
    version = models.PositiveIntegerField(
        default=0, editable=False, help_text="Raised each time the secret is replaced."
    )
    key_id = models.CharField(
        max_length=12, blank=True, editable=False, help_text="Fingerprint of the encrypting key."
    )
    secret_set_at = models.DateTimeField(null=True, blank=True, editable=False)

    # The ciphertext stays out of history: old ciphertexts there would outlive key rotation.
    history = HistoricalRecords(excluded_fields=["ciphertext"])

    MAX_SECRET = 8192

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def set_secret(self, plaintext: str) -> None:
        """Encrypt ``plaintext`` as this credential's new version (saved by the caller)."""
        if not plaintext:
            raise ValidationError({"secret": "The secret must not be empty."})
        if len(plaintext) > self.MAX_SECRET:
            raise ValidationError({"secret": f"At most {self.MAX_SECRET} characters."})
        self.ciphertext = secret_box.encrypt(plaintext)
        self.key_id = secret_box.key_id()
        self.version = (self.version or 0) + 1
        self.secret_set_at = timezone.now()

    def reveal(self) -> str:
        """The plaintext secret. For the pool's resolver only: never render or log it."""
        return secret_box.decrypt(self.ciphertext)

    @property
    def secret_status(self) -> str:
        if not self.secret_set_at:
            return "not set"
        return f"set on {self.secret_set_at:%Y-%m-%d %H:%M} UTC"

    def clean(self) -> None:
        if not self.ciphertext:
            raise ValidationError({"secret": "Enter the secret."})
