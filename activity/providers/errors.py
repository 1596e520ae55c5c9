"""Typed errors of a provider fetch: what went wrong, and what the scheduler should do next.

A fetch either parses (possibly with some entries dropped, each counted by its reason) or fails
with one of these, and then nothing is written. Messages never hold a credential or a response
body: a vendor's own message is kept short and stripped of control characters.
"""

from __future__ import annotations

from enum import StrEnum

#: The most of a vendor's message kept in an error (vendor messages can carry the caller's IP,
#: never a credential, but a body is not a message).
MAX_VENDOR_MESSAGE = 200


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
        self.vendor_code = clean_message(vendor_code)[:32]
        self.vendor_message = clean_message(message)
        self.next_step = next_step
        super().__init__(f"vendor error {self.vendor_code}: {self.vendor_message}")


def clean_message(message: str) -> str:
    """A vendor's message as an error may hold it: printable characters, at most
    :data:`MAX_VENDOR_MESSAGE` of them."""
    head = message[: MAX_VENDOR_MESSAGE * 4]  # bounded work for a message of any length
    printable = "".join(ch if ch.isprintable() else " " for ch in head)
    return " ".join(printable.split())[:MAX_VENDOR_MESSAGE]
