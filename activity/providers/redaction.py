"""What a vendor's own text must not repeat: the values its request carried.

Vendors quote what they were sent in their errors (``{"code": -1, "msg": "invalid secret_id
<secret>"}``, ``ERROR(-1): bad key <secret>``), and a vendor's message is logged, kept in an
alert, shown in the console and sent by email and webhook. So every vendor-supplied text is put
through the request's :class:`RequestSecrets` first: the account's credential material and every
query parameter and header value the request carried (anything that looks like a secret is one
of those), each also in its pieces (``Token abc``: ``abc`` too) and URL-encoded, matched without
regard to case. Values shorter than :data:`MIN_SECRET_LENGTH` are left alone: a count of ``10``
or a flag of ``1`` would blank every number in a message and hide nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

REDACTED = "[redacted]"
#: Shorter values are not secrets worth hiding (counts, flags, two-letter regions).
MIN_SECRET_LENGTH = 4
#: Values longer than this are matched on their first this many characters (a vendor quoting
#: a longer value quotes its start too); bounds the pattern.
MAX_SECRET_LENGTH = 1_024
#: The most values one request carries into the pattern (its parameters and headers).
MAX_VALUES = 256

_PIECES = re.compile(r"[\s,;:=&|/]+")


class RequestSecrets:
    """The values one vendor request carried, and the redaction of a text of them."""

    def __init__(self, values: Iterable[str]) -> None:
        pieces: set[str] = set()
        for value in list(values)[:MAX_VALUES]:
            value = value[:MAX_SECRET_LENGTH]
            for piece in (value, *_PIECES.split(value)):
                if len(piece) >= MIN_SECRET_LENGTH:
                    pieces.update((piece, quote(piece, safe="")))
        # Longest first, so a value is hidden whole and not around a piece of it.
        ordered = sorted(pieces, key=lambda p: (-len(p), p))
        self._pieces = tuple(piece.casefold() for piece in ordered)
        self._pattern = (
            re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE) if ordered else None
        )

    def __repr__(self) -> str:
        return "RequestSecrets(...)"

    def redact(self, text: str, *, cut: bool = False) -> str:
        """``text`` with every value the request carried replaced by ``[redacted]``. ``cut``:
        the text may have been cut short after a value's start (a vendor's message is kept to
        a bound), so a tail that begins a value (4 characters of it or more) goes too."""
        if self._pattern is None:
            return text
        text = self._pattern.sub(REDACTED, text)
        if cut:
            text = self._without_a_started_value(text)
        return text

    def _without_a_started_value(self, text: str) -> str:
        folded = text.casefold()
        longest = 0
        for piece in self._pieces:
            for size in range(min(len(piece) - 1, len(text)), MIN_SECRET_LENGTH - 1, -1):
                if size <= longest:
                    break
                if folded.endswith(piece[:size]):
                    longest = size
                    break
        return text[: len(text) - longest] + REDACTED if longest else text
