"""One vendor request through a real socket (activity/providers/fetch.py): the answer within
its bounds, every fault a typed error naming neither the URL nor a header."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest

from activity.clock import ManualClock
from activity.providers import NextStep
from activity.providers.fetch import (
    CompressedAnswer,
    FetchFailed,
    FetchLimits,
    HttpStatusError,
    ResponseTooLarge,
    fetch,
)
from tests.harness.vendor_server import OK_BODY, vendor_server

LIMITS = FetchLimits(connect_timeout=1, read_timeout=0.5, total_timeout=1.5, max_bytes=100_000)
SENT = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
SECRET = "k3y-s3cr3t"


@pytest.fixture(scope="module")
def vendor():
    with vendor_server() as base:
        yield base


def get(base: str, path: str, limits: FetchLimits = LIMITS, **options):
    return fetch(f"{base}{path}", clock=ManualClock(SENT), limits=limits, **options)


def test_an_answer_with_its_status_body_and_the_moment_it_was_sent(vendor):
    got = get(vendor, "/ok")
    assert (got.status, got.body, got.sent_at) == (200, OK_BODY, SENT)


def test_the_endpoints_own_query_is_kept_beside_the_requests_parameters(vendor):
    """Before: an endpoint URL's query (Zhima's ``?type=2&ys=1``) was dropped whole."""
    got = get(vendor, "/echo?type=2&num=1", params={"num": "5", "key": SECRET})
    assert json.loads(got.body)["query"] == {"type": "2", "num": "5", "key": SECRET}


def test_the_request_carries_its_query_and_headers_and_asks_for_no_compression(vendor):
    got = get(vendor, "/echo", params={"num": "5"}, headers={"X-Key": SECRET})
    shown = json.loads(got.body)
    assert shown["query"] == {"num": "5"} and shown["headers"]["X-Key"] == SECRET
    assert shown["headers"]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize(
    ("status", "step"),
    [(500, NextStep.RETRY_LATER), (503, NextStep.RETRY_LATER), (429, NextStep.BACK_OFF),
     (403, NextStep.DISABLE), (401, NextStep.DISABLE), (404, NextStep.RETRY_LATER)],
)  # fmt: skip
def test_an_http_error_status_is_typed_with_its_next_step(vendor, status, step):
    with pytest.raises(HttpStatusError) as caught:
        get(vendor, f"/status/{status}?key={SECRET}")
    assert (caught.value.status, caught.value.next_step) == (status, step)
    assert SECRET not in str(caught.value)


def test_an_answer_that_trickles_is_cut_off_by_the_total_timeout(vendor):
    started = time.monotonic()
    with pytest.raises(FetchFailed) as caught:
        get(vendor, f"/trickle?key={SECRET}")
    took = time.monotonic() - started
    assert LIMITS.total_timeout <= took < LIMITS.total_timeout + 0.3
    assert SECRET not in str(caught.value) and caught.value.__cause__ is None


def test_a_byte_just_inside_each_read_timeout_is_cut_off_at_the_deadline_itself(vendor):
    """A byte every 0.45 s never trips the 0.5 s read timeout: the deadline cuts it at 1.5 s,
    not at the first byte after it."""
    started = time.monotonic()
    with pytest.raises(FetchFailed) as caught:
        get(vendor, f"/drip?key={SECRET}")
    took = time.monotonic() - started
    assert LIMITS.total_timeout <= took < LIMITS.total_timeout + 0.2
    assert "1.5 s" in str(caught.value) and SECRET not in str(caught.value)


def test_a_vendor_silent_for_longer_than_the_deadline_is_cut_off_at_the_deadline(vendor):
    """Its read timeout (5 s) is longer than its deadline (1 s): the deadline wins."""
    limits = FetchLimits(connect_timeout=1, read_timeout=5, total_timeout=1, max_bytes=100)
    started = time.monotonic()
    with pytest.raises(FetchFailed):
        get(vendor, "/silent", limits)
    assert time.monotonic() - started < 1.2


def test_an_endless_answer_is_cut_off_at_max_bytes(vendor):
    with pytest.raises(ResponseTooLarge):
        get(vendor, "/endless")


def test_a_declared_length_over_max_bytes_is_refused_before_reading(vendor):
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge):
        get(vendor, "/declared-huge")
    assert time.monotonic() - started < LIMITS.read_timeout


def test_a_compressed_answer_is_refused(vendor):
    with pytest.raises(CompressedAnswer):
        get(vendor, "/gzip")


def test_a_vendor_that_never_answers_fails_after_the_read_timeout(vendor):
    started = time.monotonic()
    with pytest.raises(FetchFailed) as caught:
        get(vendor, f"/silent?key={SECRET}")
    assert time.monotonic() - started < LIMITS.read_timeout + 0.5
    assert SECRET not in str(caught.value) and caught.value.__cause__ is None


def test_a_vendor_that_cannot_be_reached_is_typed_without_the_url(vendor):
    with pytest.raises(FetchFailed) as caught:  # nothing listens on port 9 of loopback
        fetch(f"http://127.0.0.1:9/{SECRET}", clock=ManualClock(SENT), limits=LIMITS)
    assert SECRET not in str(caught.value) and caught.value.__cause__ is None


def test_limits_out_of_their_bounds_are_refused():
    for bad in ({"read_timeout": 0}, {"total_timeout": 121}, {"max_bytes": 0}):
        with pytest.raises(ValueError):
            FetchLimits(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("3600", timedelta(hours=1)),
        ("0", timedelta(0)),
        ("Tue, 01 Dec 2026 05:00:00 GMT", timedelta(hours=1)),  # an hour after SENT
        ("Tue, 01 Dec 2026 03:00:00 GMT", timedelta(0)),  # already past
        ("999999999999", timedelta(days=30)),  # bounded
        ("soon", None),
    ],
)
def test_a_vendors_retry_after_is_read_as_a_wait(vendor, header, wait):
    with pytest.raises(HttpStatusError) as caught:
        get(vendor, f"/status/429?retry_after={quote(header)}")
    assert caught.value.retry_after == wait


def test_a_name_that_never_resolves_is_cut_off_at_the_deadline(monkeypatch):
    """The name lookup runs in a thread the deadline cannot stop; the call does not wait for
    it (before: asyncio.run waited for the lookup, 6 s past a 1 s deadline)."""
    import socket

    def slow_lookup(*args, **kwargs):
        time.sleep(3)
        raise socket.gaierror("planted: no answer")

    monkeypatch.setattr(socket, "getaddrinfo", slow_lookup)
    limits = FetchLimits(connect_timeout=5, read_timeout=5, total_timeout=1, max_bytes=100)
    started = time.monotonic()
    with pytest.raises(FetchFailed, match="within 1 s"):
        fetch("http://vendor.invalid/list", clock=ManualClock(SENT), limits=limits)
    assert time.monotonic() - started < 1.5
