"""Proxy labels (a region, a carrier) as vendors send them, and the one form they match in.

Vendors label proxies in their own words: Webshare's ``country_code`` may carry a space,
Zhima's cities and carriers are Chinese (``广东省广州市``, ``电信``), and clients ask for ``us``
where the vendor wrote ``US``. So a label is stored as the vendor sent it, cleaned
(:func:`clean_label`: Unicode NFC, runs of whitespace made one space, printable, at most
:data:`MAX_LABEL` characters), and is indexed and matched in one normalised form
(:func:`label_key`: the clean label case-folded). The pool's region and carrier indexes, the
extract's and the console's filters, a client's allowed regions and the gateway's username
grammar all compare labels through ``label_key``: two labels are the same label exactly when
their keys are equal.

The key holds no ``|`` (the pool's hot record separates its fields with it: Lua
``lib/records.lua``) and so no ``%`` unescaped either: both are percent-escaped, so the key
stays one-to-one with the case-folded label.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeGuard

#: The longest label, in characters (Unicode code points), as the vendor's text is kept.
MAX_LABEL = 64


class BadLabel(ValueError):
    """A label that cannot be kept: empty, unprintable, or longer than :data:`MAX_LABEL`."""


class LabelTooLong(BadLabel):
    """A label longer than :data:`MAX_LABEL` once cleaned."""


def clean_label(value: str) -> str:
    """``value`` as a label is kept: NFC, whitespace runs made one space, stripped. Raises
    :class:`BadLabel` when that is empty, longer than :data:`MAX_LABEL` or not printable."""
    if not isinstance(value, str):
        raise BadLabel("a label is a string")
    text = " ".join(unicodedata.normalize("NFC", value[: MAX_LABEL * 4]).split())
    if not text:
        raise BadLabel("a label is not empty")
    if len(text) > MAX_LABEL:
        raise LabelTooLong(f"a label is at most {MAX_LABEL} characters")
    if not text.isprintable():
        raise BadLabel("a label is printable text")
    return text


def is_kept_label(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a label as it is kept: a string that cleaning leaves unchanged
    (what the pool stores, a client's allowed regions, a usage event's region)."""
    if type(value) is str and value.isascii() and value.isalnum() and len(value) <= MAX_LABEL:
        return True  # the usual label ("US", "telecom"): clean as it is
    try:
        return isinstance(value, str) and clean_label(value) == value
    except BadLabel:
        return False


def label_key(value: str) -> str:
    """The form ``value`` is indexed and matched in: its clean form, case-folded (``US``,
    ``us`` and ``Us`` are one label). Raises :class:`BadLabel` as :func:`clean_label` does."""
    if value.isascii() and value.isalnum() and len(value) <= MAX_LABEL:  # "US": no work
        return value.lower()
    folded = unicodedata.normalize("NFC", clean_label(value).casefold())
    return folded.replace("%", "%25").replace("|", "%7C")


#: The most vendor labels one upstream's map may name per dimension.
MAX_MAPPED = 1_000


@dataclass(frozen=True)
class LabelMap:
    """How one upstream's vendor labels become the pool's: a vendor's region or carrier found
    in the map (in any case) becomes the operator's label (``广东省广州市`` -> ``cn-gd``); one
    not found stays as the vendor wrote it; an entry without one takes the upstream's default,
    if it has one."""

    #: By the vendor label's matching form (:func:`label_key`): the label to keep instead.
    regions: Mapping[str, str] = field(default_factory=dict)
    carriers: Mapping[str, str] = field(default_factory=dict)
    default_region: str | None = None
    default_carrier: str | None = None

    @classmethod
    def of(
        cls,
        config: object,
        default_region: str | None = None,
        default_carrier: str | None = None,
    ) -> LabelMap:
        """From an upstream's configuration, ``{"region": {vendor: ours}, "carrier": {...}}``;
        :class:`BadLabel` naming what is wrong."""
        if not isinstance(config, Mapping):
            raise BadLabel('the label map is a JSON object: {"region": {...}, "carrier": {...}}')
        unknown = set(config) - {"region", "carrier"}
        if unknown:
            raise BadLabel(
                f"the label map maps region and carrier only, not {sorted(unknown)[0]!r}"
            )
        maps: dict[str, dict[str, str]] = {}
        for dimension in ("region", "carrier"):
            given = config.get(dimension, {})
            if not isinstance(given, Mapping) or len(given) > MAX_MAPPED:
                raise BadLabel(f"{dimension}: a JSON object of at most {MAX_MAPPED:,} labels")
            mapped: dict[str, str] = {}
            for vendor, ours in given.items():
                try:
                    mapped[label_key(vendor)] = clean_label(ours)
                except (BadLabel, AttributeError, TypeError):
                    raise BadLabel(
                        f"{dimension}: {str(vendor)[:40]!r} -> {str(ours)[:40]!r} is not a label "
                        f"to a label (1-{MAX_LABEL} printable characters each)"
                    ) from None
            maps[dimension] = mapped
        return cls(
            maps["region"],
            maps["carrier"],
            None if not default_region else clean_label(default_region),
            None if not default_carrier else clean_label(default_carrier),
        )

    def region(self, label: str | None) -> str | None:
        """The region a proxy the vendor labelled ``label`` is kept with."""
        if label is None:
            return self.default_region
        return self.regions.get(label_key(label), label)

    def carrier(self, label: str | None) -> str | None:
        """The carrier a proxy the vendor labelled ``label`` is kept with."""
        if label is None:
            return self.default_carrier
        return self.carriers.get(label_key(label), label)
