"""A vendor's text redacted of what its request carried (activity/providers/redaction.py)."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from activity.providers import NextStep, VendorError
from activity.providers.errors import MAX_VENDOR_MESSAGE
from activity.providers.redaction import REDACTED, RequestSecrets

KEY = "sk-Hq4!vZ9#Leak/me+not"


def test_a_value_is_redacted_as_sent_in_any_case_and_url_encoded():
    secrets = RequestSecrets([KEY])
    text = f"bad key {KEY}, {KEY.upper()}, {quote(KEY, safe='')}."
    assert secrets.redact(text) == f"bad key {REDACTED}, {REDACTED}, {REDACTED}."


def test_the_pieces_of_a_header_value_are_redacted_too():
    secrets = RequestSecrets(["Token abc123xyz"])
    assert secrets.redact("token abc123xyz refused") == f"{REDACTED} refused"
    assert secrets.redact("abc123xyz is not a key") == f"{REDACTED} is not a key"


def test_short_values_are_not_secrets():
    secrets = RequestSecrets(["10", "1", "us", "json-x"])
    assert secrets.redact("asked 10 of 1 in us as json-x") == f"asked 10 of 1 in us as {REDACTED}"
    assert RequestSecrets([]).redact("as it was") == "as it was"


def test_a_vendor_error_is_redacted_whole_before_it_is_cut_short():
    """The key stands across the 200-character cut: what is kept holds no start of it."""
    message = "x" * (MAX_VENDOR_MESSAGE - 5) + f" {KEY} and more"
    error = VendorError("-1", message, NextStep.DISABLE)
    assert KEY[:4] in str(error)  # cut short, the key's start would be left
    clean = error.redacted(RequestSecrets([KEY]))
    assert KEY[:4] not in str(clean) and KEY[:4] not in clean.vendor_message
    assert (clean.vendor_code, clean.next_step) == ("-1", NextStep.DISABLE)


def test_a_vendor_code_quoting_the_key_is_redacted_too():
    clean = VendorError(KEY, "no", NextStep.RETRY_LATER).redacted(RequestSecrets([KEY]))
    assert KEY not in str(clean) and clean.vendor_code == REDACTED


@given(
    secret=st.text(min_size=4, max_size=40).filter(lambda s: s.strip() == s and s.isprintable()),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_no_value_survives_its_redaction(secret, before, after):
    redacted = RequestSecrets([secret]).redact(before + secret + after)
    assert secret.lower() not in redacted.lower() or secret.lower() in REDACTED.lower()
