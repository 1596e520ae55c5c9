"""A vendor's text redacted of what its request carried (activity/providers/redaction.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from activity.fetch_job import FetchPlan
from activity.providers import NextStep, VendorError
from activity.providers.errors import MAX_VENDOR_MESSAGE
from activity.providers.expiry import ExpiryForm, ExpiryRule
from activity.providers.lines import MAX_LINE, LineFormat, TextFormat
from activity.providers.presets import PRESETS, UpstreamOptions
from activity.providers.redaction import REDACTED, RequestSecrets
from activity.reconciler import UpstreamTarget

MINUTE = timedelta(minutes=1)

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


def test_a_value_cut_short_at_the_end_of_a_kept_text_goes_too():
    secrets = RequestSecrets([KEY])
    assert secrets.redact(f"bad key {KEY[:9]}", cut=True) == f"bad key {REDACTED}"
    assert secrets.redact(f"bad key {KEY[:9]}") == f"bad key {KEY[:9]}"  # not cut: a word
    assert secrets.redact("bad key sk-", cut=True) == "bad key sk-"  # 3 characters: no key


def test_a_text_vendors_error_cut_inside_the_key_leaves_no_start_of_it():
    """Before: the line was cut at its bound inside the key, whitespace collapsed, and the
    key's first 11 characters were kept."""
    key = "AKIAQWERTYUIOPASDFGHJKLZXCVBNM1234567890"
    fmt = TextFormat(LineFormat.HOST_PORT, "http", ExpiryRule(ExpiryForm.NONE, MINUTE), 10,
                     {})  # fmt: skip
    body = b"ERROR(-1): x" + b" " * (MAX_LINE - 23) + key.encode()
    with pytest.raises(VendorError) as caught:
        fmt.parse(body, datetime(2026, 12, 1, tzinfo=UTC))
    clean = caught.value.redacted(RequestSecrets([key]))
    assert key[:4] not in str(clean), str(clean)


def test_an_endpoints_path_and_query_carry_values_to_redact_too():
    plan = FetchPlan(
        target=UpstreamTarget("u1", 10, timedelta(seconds=5)),
        url="https://seller.example/personal/api/v1/0a1b2c3d4e5f6a7b8c9d/proxy/list?token=Zz9yX8",
        format=PRESETS["webshare_list"].format(UpstreamOptions("http", MINUTE, 10)),
    )
    said = plan.request_secrets().redact("key 0a1b2c3d4e5f6a7b8c9d, token Zz9yX8: proxy list")
    assert said == f"key {REDACTED}, token {REDACTED}: proxy list"
