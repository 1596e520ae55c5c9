"""Provider adapters: a vendor's response made proxy entries, strictly (issue 12).

Plain Python, no Django, no Redis, no network: an adapter is given the bytes a vendor answered
and the moment the request was sent, and returns the entries it could take (each checked) and
the count of those it dropped, by reason, or raises a typed :class:`ProviderError` and takes
nothing. Fetching (HTTP, credentials, budgets) and writing to the pool are the reconciler's.
"""

from activity.providers.entries import DropReason, ParsedResponse, ProxyEntry
from activity.providers.errors import MalformedResponse, NextStep, ProviderError, VendorError
from activity.providers.expiry import ExpiryForm, ExpiryRule
from activity.providers.lines import LineFormat, TextFormat

__all__ = [
    "DropReason",
    "ExpiryForm",
    "ExpiryRule",
    "LineFormat",
    "MalformedResponse",
    "NextStep",
    "ParsedResponse",
    "ProviderError",
    "ProxyEntry",
    "TextFormat",
    "VendorError",
]
