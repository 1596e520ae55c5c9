"""What every configuration model shares: timestamps, validation on save, the label rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from activity import PoolOptions
from activity.labels import MAX_LABEL, BadLabel, clean_label
from activity.types import LABEL_MAX_LENGTH, LABEL_PATTERN, PROTOCOLS

#: The pool's bounds: a value the admin accepts, the pool must accept too.
POOL_LIMITS = PoolOptions()

# Names and labels become upstream IDs, client IDs and index key names in Redis: the pool's own
# label rule, so the pool never refuses what the admin stored.
LABEL_RE = rf"\A{LABEL_PATTERN}\Z"
LABEL_HELP = (
    f"1-{LABEL_MAX_LENGTH} characters of A-Z a-z 0-9 . _ : @ + -, starting with a letter or digit."
)
validate_label = RegexValidator(
    LABEL_RE, message=f"Enter a valid label: {LABEL_HELP}", code="invalid_label"
)

PROTOCOL_CHOICES = [(p, p) for p in sorted(PROTOCOLS)]  # one source of truth: activity.types


def label_field(verbose_name: str | None = None, **options: Any) -> models.CharField[str, str]:
    """A text field holding one label (a name the pool uses as an ID or index key part)."""
    return models.CharField(
        verbose_name, max_length=LABEL_MAX_LENGTH, validators=[validate_label], **options
    )


def bounds(low: int, high: int) -> list[Any]:
    """The validators of a number field that must lie in ``[low, high]``."""
    return [MinValueValidator(low), MaxValueValidator(high)]


def seconds(span: timedelta) -> int:
    """A pool option's span as the whole seconds a model field stores."""
    return int(span.total_seconds())


class ConfigModel(models.Model):
    """Timestamps, and validation on every save."""

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)


def validate_vendor_label(value: str) -> None:
    """A region or carrier as vendors write them (activity/labels.py), matched in any case."""
    try:
        clean_label(value)
    except BadLabel:
        raise ValidationError(
            f"Enter a region or carrier label: 1-{MAX_LABEL} printable characters."
        ) from None
