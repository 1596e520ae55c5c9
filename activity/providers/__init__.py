"""Provider adapters: a vendor's response made proxy entries, strictly (issue 12).

Plain Python, no Django, no Redis, no network: an adapter is given the bytes a vendor answered
and the moment the request was sent, and returns the entries it could take (each checked) and
the count of those it dropped, by reason, or raises a typed :class:`ProviderError` and takes
nothing. Fetching (HTTP, credentials, budgets) and writing to the pool are the reconciler's.
"""

from activity.providers.entries import DropReason, ParsedResponse, ProxyEntry
from activity.providers.errors import MalformedResponse, NextStep, ProviderError, VendorError
from activity.providers.expiry import ExpiryForm, ExpiryRule
from activity.providers.json_api import EntryFields, JsonFormat
from activity.providers.lines import LineFormat, TextFormat
from activity.providers.presets import PRESETS, Preset, UpstreamOptions

__all__ = [
    "PRESETS",
    "DropReason",
    "EntryFields",
    "ExpiryForm",
    "ExpiryRule",
    "JsonFormat",
    "LineFormat",
    "MalformedResponse",
    "NextStep",
    "ParsedResponse",
    "Preset",
    "ProviderError",
    "ProxyEntry",
    "TextFormat",
    "UpstreamOptions",
    "VendorError",
]
