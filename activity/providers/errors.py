"""Typed errors of a provider fetch: what went wrong, and what the scheduler should do next.

A fetch either parses (possibly with some entries dropped, each counted by its reason) or fails
with one of these, and then nothing is written. Messages never hold a credential or a response
body: a vendor's own message is kept short and stripped of control characters, and the fetch
takes every value its request carried out of it (``VendorError.redacted``) before anyone sees
it: vendors quote the key they were sent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from activity.providers.redaction import RequestSecrets

#: The most of a vendor's message kept in an error (a body is not a message).
MAX_VENDOR_MESSAGE = 200
#: What of a vendor's code and message an error keeps until it is redacted: enough that a
#: value quoted near the cut is still whole (credentials are far shorter).
_MAX_SAID = MAX_VENDOR_MESSAGE * 10


class NextStep(StrEnum):
    """What the scheduler does after a failed fetch."""

    RETRY_LATER = "retry_later"  # transient: the next due fetch may succeed
    BACK_OFF = "back_off"  # the vendor is limiting us: wait longer than the cadence
    DISABLE = "disable"  # the account or order cannot serve (balance, expiry, whitelist): alert


class ProviderError(Exception):
    """Base of every error a provider fetch raises."""

    code = "provider_error"
    next_step = NextStep.RETRY_LATER


class MalformedResponse(ProviderError):
    """The response is not in the configured shape (not JSON, no list where one is expected,
    an unreadable text body): nothing from it is taken."""

    code = "malformed_response"


class VendorError(ProviderError):
    """The vendor answered with an error of its own (``code != 0``, ``ERROR(code): msg``)."""

    code = "vendor_error"

    def __init__(self, vendor_code: str, message: str, next_step: NextStep) -> None:
        # What the vendor said, before it is cut short: a value it quotes is redacted whole
        # (``redacted``), not after a cut left only its start.
        self._said = (vendor_code[:_MAX_SAID], message[:_MAX_SAID])
        self.vendor_code = clean_message(vendor_code)[:32]
        self.vendor_message = clean_message(message)
        self.next_step = next_step
        super().__init__(f"vendor error {self.vendor_code}: {self.vendor_message}")

    def redacted(self, secrets: RequestSecrets) -> VendorError:
        """The same error with every value the request carried taken out of what the vendor
        said (the only vendor-supplied text an error holds)."""
        code, message = self._said
        return VendorError(
            secrets.redact(code, cut=True), secrets.redact(message, cut=True), self.next_step
        )


def clean_message(message: str) -> str:
    """A vendor's message as an error may hold it: printable characters, at most
    :data:`MAX_VENDOR_MESSAGE` of them."""
    head = message[: MAX_VENDOR_MESSAGE * 4]  # bounded work for a message of any length
    printable = "".join(ch if ch.isprintable() else " " for ch in head)
    return " ".join(printable.split())[:MAX_VENDOR_MESSAGE]
