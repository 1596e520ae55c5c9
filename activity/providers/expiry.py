"""Every form vendors give a proxy's expiry in, made one ``expires_at`` (UTC).

The forms vendors give it in (``activity/providers/presets.py`` names the documentation of
each preset's vendor; proxy-ipv4.com's is docs.proxy-ipv4.com/developers-api): seconds left
(Kuaidaili ``f_et``, Juliang ``ip_remain``), a date-time without a zone in the vendor's zone
(Zhima ``expire_time``, Tianqi, Juliang ``order_endtime``; some vendors do not pad the fields),
Unix seconds (Thordata), ISO 8601 with an offset (proxy-ipv4.com), a date only (Proxy-Seller
``dd.MM.yyyy``: the end of that day), or none (Webshare, Xiequ: the upstream's configured
lifetime).

Seconds left count from when the request was *sent*, taken before the HTTP call, so the time
the answer took makes the estimate early, never late. An entry without the field gets the
default lifetime too. An expiry that does not parse is :data:`DropReason.BAD_EXPIRY`; one at or
before the request is :data:`DropReason.EXPIRED`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from activity.providers.entries import Dropped, DropReason

#: The longest expiry value read (a date-time with an offset is 32 characters at most).
MAX_EXPIRY_TEXT = 64
#: The furthest an expiry may lie after the request (vendors' longest plans are a year).
MAX_LIFETIME = timedelta(days=3660)
_LOCAL = re.compile(
    r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2}))?", re.ASCII
)
_DAY_FIRST = re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{4})", re.ASCII)
_YEAR_FIRST = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})", re.ASCII)


class ExpiryForm(StrEnum):
    SECONDS_LEFT = "seconds_left"
    LOCAL_DATETIME = "local_datetime"
    UNIX_SECONDS = "unix_seconds"
    ISO_8601 = "iso_8601"
    DATE_ONLY = "date_only"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ExpiryRule:
    """How one upstream's entries give their expiry: ``form``; ``zone`` (IANA name) for a
    date-time or date without an offset; ``default_lifetime`` for an entry that gives none."""

    form: ExpiryForm
    default_lifetime: timedelta
    zone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.form, ExpiryForm):
            raise ValueError(f"form must be one of {', '.join(ExpiryForm)}")
        if not isinstance(self.default_lifetime, timedelta) or not isinstance(self.zone, str):
            raise ValueError("default_lifetime must be a timedelta and zone a string")
        if not timedelta(0) < self.default_lifetime <= MAX_LIFETIME:
            raise ValueError("default_lifetime must be positive and at most 3660 days")
        try:
            ZoneInfo(self.zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"zone must be an IANA time zone name, got {self.zone!r}") from None

    def expires_at(self, value: object, sent_at: datetime) -> datetime:
        """The entry's expiry (UTC) from its field ``value`` (None: the entry has none), for a
        request sent at ``sent_at`` (aware)."""
        if sent_at.tzinfo is None:
            raise ValueError("sent_at must be timezone-aware")
        if value is None or value == "" or self.form is ExpiryForm.NONE:
            expiry = sent_at + self.default_lifetime
        else:
            expiry = self._parse(value, sent_at)
        if expiry <= sent_at:
            raise Dropped(DropReason.EXPIRED)
        if expiry - sent_at > MAX_LIFETIME:
            raise Dropped(DropReason.BAD_EXPIRY)
        return expiry.astimezone(UTC)

    def _parse(self, value: object, sent_at: datetime) -> datetime:
        if isinstance(value, str) and len(value) > MAX_EXPIRY_TEXT:
            raise Dropped(DropReason.BAD_EXPIRY)
        try:
            if self.form is ExpiryForm.SECONDS_LEFT:
                return sent_at + timedelta(seconds=_whole_number(value))
            if self.form is ExpiryForm.UNIX_SECONDS:
                return datetime.fromtimestamp(_whole_number(value), UTC)
            if not isinstance(value, str):
                raise ValueError("a date or date-time must be a string")
            text = value.strip()
            if self.form is ExpiryForm.ISO_8601:
                parsed = datetime.fromisoformat(text)
                if parsed.tzinfo is None:
                    raise ValueError("an ISO 8601 expiry must carry its offset")
                return parsed
            if self.form is ExpiryForm.LOCAL_DATETIME:
                return self._local_datetime(text)
            return self._end_of_day(text)
        except (ValueError, OverflowError, OSError):
            raise Dropped(DropReason.BAD_EXPIRY) from None

    def _local_datetime(self, text: str) -> datetime:
        match = _LOCAL.fullmatch(text)
        if match is None:
            raise ValueError("not a date-time")
        year, month, day, hour, minute, second = (int(part or 0) for part in match.groups())
        zone = ZoneInfo(self.zone)
        # The earlier instant, so the expiry is never late: fold=0 in the hour a clock repeats;
        # in the hour it skips (a time that never shows), fold=1, the offset after the change.
        wall = datetime(year, month, day, hour, minute, second, tzinfo=zone)
        if wall.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall.replace(tzinfo=None):
            wall = wall.replace(fold=1)
        return wall

    def _end_of_day(self, text: str) -> datetime:
        if match := _DAY_FIRST.fullmatch(text):
            day, month, year = (int(part) for part in match.groups())
        elif match := _YEAR_FIRST.fullmatch(text):
            year, month, day = (int(part) for part in match.groups())
        else:
            raise ValueError("not a date")
        start = datetime(year, month, day, tzinfo=ZoneInfo(self.zone))
        return datetime.combine(start.date() + timedelta(days=1), start.time(), start.tzinfo)


def _whole_number(value: object) -> int:
    """A whole number of seconds from an int or a string of digits (vendors give both)."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()):
            raise ValueError("not a whole number")
        return int(text)
    if isinstance(value, int) and value >= 0:
        return value
    raise ValueError("not a whole number")
