"""Every expiry form vendors give (activity/providers/expiry.py) made one UTC ``expires_at``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from activity.providers import DropReason, ExpiryForm, ExpiryRule
from activity.providers.entries import Dropped

SENT = datetime(2026, 12, 1, 4, 0, 0, tzinfo=UTC)  # 12:00 in Asia/Shanghai
FIVE_MINUTES = timedelta(minutes=5)


def rule(form: ExpiryForm, zone: str = "UTC") -> ExpiryRule:
    return ExpiryRule(form=form, default_lifetime=FIVE_MINUTES, zone=zone)


def dropped(form: ExpiryForm, value: object, zone: str = "UTC") -> DropReason:
    with pytest.raises(Dropped) as caught:
        rule(form, zone).expires_at(value, SENT)
    return caught.value.reason


def test_seconds_left_count_from_when_the_request_was_sent():
    """Kuaidaili ``f_et`` / Juliang ``ip_remain``: ``,175`` is 175 s from the request."""
    seconds = rule(ExpiryForm.SECONDS_LEFT)
    assert seconds.expires_at("175", SENT) == SENT + timedelta(seconds=175)
    assert seconds.expires_at(281, SENT) == SENT + timedelta(seconds=281)


@given(st.integers(min_value=1, max_value=10**8))
def test_any_positive_seconds_left_is_that_long_after_the_request(seconds):
    assert rule(ExpiryForm.SECONDS_LEFT).expires_at(str(seconds), SENT) == SENT + timedelta(
        seconds=seconds
    )


def test_a_local_date_time_is_read_in_the_vendors_zone():
    """Zhima ``expire_time`` is Beijing time: 2026-12-01 12:25:00 there is 04:25 UTC."""
    shanghai = rule(ExpiryForm.LOCAL_DATETIME, "Asia/Shanghai")
    assert shanghai.expires_at("2026-12-01 12:25:00", SENT) == datetime(
        2026, 12, 1, 4, 25, tzinfo=UTC
    )
    # Unpadded fields (hahado "2023-3-15 11:16:21"), no seconds, a T between.
    assert shanghai.expires_at("2026-12-1 12:5:7", SENT) == datetime(
        2026, 12, 1, 4, 5, 7, tzinfo=UTC
    )
    assert shanghai.expires_at("2026-12-01T12:30", SENT) == datetime(2026, 12, 1, 4, 30, tzinfo=UTC)
    # The same text read in UTC is eight hours later.
    assert rule(ExpiryForm.LOCAL_DATETIME).expires_at("2026-12-01 12:25:00", SENT) == datetime(
        2026, 12, 1, 12, 25, tzinfo=UTC
    )


def test_in_the_hour_a_clock_repeats_the_earlier_instant_is_taken():
    """2026-11-01 01:30 happens twice in New York; the expiry is never late."""
    sent = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)
    new_york = ExpiryRule(ExpiryForm.LOCAL_DATETIME, FIVE_MINUTES, "America/New_York")
    assert new_york.expires_at("2026-11-01 01:30:00", sent) == datetime(
        2026, 11, 1, 5, 30, tzinfo=UTC
    )


def test_unix_seconds_and_iso_8601_with_an_offset_are_taken_as_they_are():
    an_hour_later = int(SENT.timestamp()) + 3600
    unix = rule(ExpiryForm.UNIX_SECONDS)
    assert unix.expires_at(an_hour_later, SENT) == SENT + timedelta(hours=1)
    assert unix.expires_at(str(an_hour_later), SENT) == SENT + timedelta(hours=1)
    iso = rule(ExpiryForm.ISO_8601)
    assert iso.expires_at("2026-12-01T06:00:00+00:00", SENT) == datetime(2026, 12, 1, 6, tzinfo=UTC)
    assert iso.expires_at("2026-12-01T14:00:00+08:00", SENT) == datetime(2026, 12, 1, 6, tzinfo=UTC)
    assert iso.expires_at("2026-12-01T06:00:00Z", SENT) == datetime(2026, 12, 1, 6, tzinfo=UTC)


def test_a_date_only_serves_to_the_end_of_that_day_in_the_vendors_zone():
    """Proxy-Seller ``date_end`` ``dd.MM.yyyy``: the proxy serves through that day."""
    utc = rule(ExpiryForm.DATE_ONLY)
    assert utc.expires_at("15.12.2026", SENT) == datetime(2026, 12, 16, tzinfo=UTC)
    assert utc.expires_at("2026-12-15", SENT) == datetime(2026, 12, 16, tzinfo=UTC)
    moscow = rule(ExpiryForm.DATE_ONLY, "Europe/Moscow")
    assert moscow.expires_at("1.12.2026", SENT) == datetime(2026, 12, 1, 21, tzinfo=UTC)


def test_no_expiry_is_the_default_lifetime_from_the_request():
    assert rule(ExpiryForm.NONE).expires_at("anything", SENT) == SENT + FIVE_MINUTES
    for form in ExpiryForm:
        assert rule(form).expires_at(None, SENT) == SENT + FIVE_MINUTES
        assert rule(form).expires_at("", SENT) == SENT + FIVE_MINUTES


@pytest.mark.parametrize(
    ("form", "value"),
    [
        (ExpiryForm.SECONDS_LEFT, "-5"),
        (ExpiryForm.SECONDS_LEFT, "1.5"),
        (ExpiryForm.SECONDS_LEFT, True),
        (ExpiryForm.SECONDS_LEFT, "١٢"),  # Arabic-Indic digits: not ASCII
        (ExpiryForm.SECONDS_LEFT, str(10**12)),  # past the longest lifetime
        (ExpiryForm.UNIX_SECONDS, "soon"),
        (ExpiryForm.UNIX_SECONDS, 10**20),
        (ExpiryForm.ISO_8601, "2026-12-01T06:00:00"),  # no offset
        (ExpiryForm.ISO_8601, 1796097600),
        (ExpiryForm.LOCAL_DATETIME, "2026-13-01 00:00:00"),
        (ExpiryForm.LOCAL_DATETIME, "01.12.2026 10:00"),
        (ExpiryForm.LOCAL_DATETIME, "2026-12-01 12:25:00" + " " * 60),  # past the length bound
        (ExpiryForm.DATE_ONLY, "31.02.2026"),
        (ExpiryForm.DATE_ONLY, "12/15/2026"),
    ],
)
def test_an_expiry_that_does_not_parse_drops_the_entry(form, value):
    assert dropped(form, value) is DropReason.BAD_EXPIRY


@pytest.mark.parametrize(
    ("form", "value"),
    [
        (ExpiryForm.SECONDS_LEFT, "0"),
        (ExpiryForm.UNIX_SECONDS, str(int(SENT.timestamp()))),
        (ExpiryForm.ISO_8601, "2026-12-01T03:59:59+00:00"),
        (ExpiryForm.DATE_ONLY, "30.11.2026"),
    ],
)
def test_an_expiry_at_or_before_the_request_drops_the_entry_as_expired(form, value):
    assert dropped(form, value) is DropReason.EXPIRED


def test_a_rule_with_an_unknown_zone_or_a_bad_lifetime_is_refused():
    with pytest.raises(ValueError, match="IANA"):
        ExpiryRule(ExpiryForm.LOCAL_DATETIME, FIVE_MINUTES, "Mars/Olympus")
    with pytest.raises(ValueError, match="IANA"):
        ExpiryRule(ExpiryForm.LOCAL_DATETIME, FIVE_MINUTES, "../../etc/passwd")
    with pytest.raises(ValueError, match="default_lifetime"):
        ExpiryRule(ExpiryForm.NONE, timedelta(0))
    with pytest.raises(ValueError, match="form"):
        ExpiryRule("seconds", FIVE_MINUTES)  # type: ignore[arg-type]


def test_in_the_hour_a_clock_skips_the_earlier_instant_is_taken():
    """2026-03-08 02:30 never shows in New York: read with the offset after the change (EDT),
    it is before 03:00, as it would be on the clock."""
    sent = datetime(2026, 3, 8, 0, tzinfo=UTC)
    new_york = ExpiryRule(ExpiryForm.LOCAL_DATETIME, FIVE_MINUTES, "America/New_York")
    gap = new_york.expires_at("2026-03-08 02:30:00", sent)
    assert gap == datetime(2026, 3, 8, 6, 30, tzinfo=UTC)
    assert gap < new_york.expires_at("2026-03-08 03:00:00", sent)


def test_dates_in_other_digits_are_not_dates():
    arabic_indic = str.maketrans("0123456789", "".join(chr(0x660 + d) for d in range(10)))
    local = "2026-12-01 12:25:00".translate(arabic_indic)
    assert dropped(ExpiryForm.LOCAL_DATETIME, local) is DropReason.BAD_EXPIRY
    assert (
        dropped(ExpiryForm.DATE_ONLY, "15.12.2026".translate(arabic_indic)) is DropReason.BAD_EXPIRY
    )


def test_a_request_time_without_a_zone_and_rules_of_the_wrong_types_are_refused():
    with pytest.raises(ValueError, match="sent_at"):
        rule(ExpiryForm.NONE).expires_at(None, SENT.replace(tzinfo=None))
    for bad in ({"default_lifetime": 5}, {"zone": 5}):
        with pytest.raises(ValueError):
            ExpiryRule(**{"form": ExpiryForm.NONE, "default_lifetime": FIVE_MINUTES, **bad})  # type: ignore[arg-type]
