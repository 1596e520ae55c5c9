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

#: The longest label, in characters (Unicode code points), as the vendor's text is kept.
MAX_LABEL = 64


class BadLabel(ValueError):
    """A label that cannot be kept: empty, unprintable, or longer than :data:`MAX_LABEL`."""


def clean_label(value: str) -> str:
    """``value`` as a label is kept: NFC, whitespace runs made one space, stripped. Raises
    :class:`BadLabel` when that is empty, longer than :data:`MAX_LABEL` or not printable."""
    if not isinstance(value, str):
        raise BadLabel("a label is a string")
    text = " ".join(unicodedata.normalize("NFC", value[: MAX_LABEL * 4]).split())
    if not text:
        raise BadLabel("a label is not empty")
    if len(text) > MAX_LABEL:
        raise BadLabel(f"a label is at most {MAX_LABEL} characters")
    if not text.isprintable():
        raise BadLabel("a label is printable text")
    return text


def label_key(value: str) -> str:
    """The form ``value`` is indexed and matched in: its clean form, case-folded (``US``,
    ``us`` and ``Us`` are one label). Raises :class:`BadLabel` as :func:`clean_label` does."""
    if value.isascii() and value.isalnum() and len(value) <= MAX_LABEL:  # "US": no work
        return value.lower()
    folded = unicodedata.normalize("NFC", clean_label(value).casefold())
    return folded.replace("%", "%25").replace("|", "%7C")
