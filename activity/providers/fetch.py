"""One HTTP request to a vendor's API, bounded in time and size, its failures typed.

The request's moment is taken *before* it is sent (``sent_at``): seconds-left expiries count
from it, so the time the answer took makes them early, never late. The request asks for an
uncompressed answer and a compressed one is refused (:class:`ResponseTooLarge` could not bound
what a few kilobytes of gzip grow to before they are checked). The answer is read to at most
``max_bytes`` and within ``total_timeout`` of the send, a hard deadline: the request runs on
asyncio under ``asyncio.timeout``, so a vendor that hangs before its headers, or sends a byte
just inside each read timeout, is cut off at the deadline itself, not at the next byte (a
vendor call that could outlast its deadline held a fetch worker past every other account's
cadence). A declared ``Content-Length`` over ``max_bytes`` is refused before anything is read.

Errors name what failed, never the URL or a header: vendors put API keys and signatures in
both (Proxy-Seller's key is in the path, Kuaidaili's signature in the query), and httpx's own
messages quote the URL, so none is chained.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import certifi
import httpx

from activity.clock import Clock
from activity.providers.errors import NextStep, ProviderError


class FetchFailed(ProviderError):
    """The vendor could not be reached, or did not answer within the time limits."""

    code = "fetch_failed"


class ResponseTooLarge(ProviderError):
    """The answer is over ``max_bytes``: nothing of it is taken."""

    code = "response_too_large"


class CompressedAnswer(ProviderError):
    """The answer is compressed although an uncompressed one was asked for: refused, since its
    size after decompression is not known until it is decompressed."""

    code = "compressed_answer"


class HttpStatusError(ProviderError):
    """The vendor answered with an HTTP error status; ``retry_after``: how long it asked us to
    wait (its ``Retry-After``, seconds or a date), if it said."""

    code = "http_status"

    def __init__(self, status: int, retry_after: timedelta | None = None) -> None:
        self.status = status
        self.retry_after = retry_after
        if status == 429:
            self.next_step = NextStep.BACK_OFF
        elif status in (401, 402, 403):  # the key, the balance, the caller's address
            self.next_step = NextStep.DISABLE
        else:
            self.next_step = NextStep.RETRY_LATER
        super().__init__(f"the vendor answered HTTP {status}")


#: The longest deadline a vendor call may be given: far below the shortest-lived vendors'
#: proxies' 30-60 s it is not, so the upstream's own default (20 s) is what counts.
MAX_TOTAL_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class FetchLimits:
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    #: The whole call, from the send to the last byte read: a hard deadline.
    total_timeout: float = 20.0
    max_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 0 < self.connect_timeout <= 60 or not 0 < self.read_timeout <= 60:
            raise ValueError("connect_timeout and read_timeout must be above 0 and at most 60 s")
        if not 0 < self.total_timeout <= MAX_TOTAL_TIMEOUT:
            raise ValueError(f"total_timeout must be above 0 and at most {MAX_TOTAL_TIMEOUT:.0f} s")
        if not 1 <= self.max_bytes <= 64 * 1024 * 1024:
            raise ValueError("max_bytes must be 1 byte to 64 MiB")


@dataclass(frozen=True, slots=True)
class Fetched:
    """A vendor's answer: its status and body, and when its request was sent."""

    status: int
    body: bytes
    sent_at: datetime


def fetch(
    url: str,
    *,
    clock: Clock,
    limits: FetchLimits,
    method: str = "GET",
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    """The answer to one request; a 2xx only (:class:`HttpStatusError` otherwise). Returns or
    raises within ``limits.total_timeout`` of the send (plus the loop's start, a millisecond).
    Its own event loop and connection: called from a thread that runs no event loop (a fetch
    worker's), one vendor call per fetch."""
    sent_at = clock.now()
    return _run_within_deadline(_fetch(url, sent_at, limits, method, params, headers))


def _run_within_deadline(call: Coroutine[Any, Any, Fetched]) -> Fetched:
    """``call`` on an event loop of its own that does not wait for its executor's threads when
    it ends. The name lookup runs in such a thread (``getaddrinfo``), and cancelling the call
    at its deadline cannot stop it; ``asyncio.run`` would wait for it (a vendor whose DNS never
    answers held the call for the resolver's whole timeout, past the deadline). The thread
    ends by itself when the resolver gives up; one executor per call bounds them to the calls
    in flight."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vendor-lookup")
    loop.set_default_executor(executor)
    try:
        return loop.run_until_complete(call)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the executor down without waiting for its thread
            executor.shutdown(wait=False, cancel_futures=True)


async def _fetch(
    url: str,
    sent_at: datetime,
    limits: FetchLimits,
    method: str,
    params: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
) -> Fetched:
    timeout = httpx.Timeout(
        connect=limits.connect_timeout,
        read=limits.read_timeout,
        write=limits.read_timeout,
        pool=limits.connect_timeout,
    )
    sent = {**(headers or {}), "Accept-Encoding": "identity"}
    try:
        async with (
            asyncio.timeout(limits.total_timeout),
            httpx.AsyncClient(verify=_tls_context()) as client,
        ):
            # Merged into the URL's own query, not in place of it: httpx drops a URL's query
            # when given params (an endpoint's ``?type=2&ys=1`` would be lost).
            target = httpx.URL(url).copy_merge_params(dict(params or {}))
            request = client.build_request(method, target, headers=sent, timeout=timeout)
            answer = await client.send(request, stream=True)
            try:
                return await _answer(answer, limits.max_bytes, sent_at)
            finally:
                await answer.aclose()
    except TimeoutError:
        raise FetchFailed(f"the vendor did not answer within {limits.total_timeout:g} s") from None
    except httpx.TimeoutException as exc:
        raise FetchFailed(f"the vendor did not answer in time ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"the vendor could not be reached ({type(exc).__name__})") from None


_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """One TLS context for every vendor call of the process (certifi's CAs, as httpx's own
    default): made once, since loading the CAs costs ~20 ms, a client per call would pay it
    every fetch; an SSLContext is safe to share between threads."""
    global _tls
    with _tls_lock:
        if _tls is None:
            _tls = ssl.create_default_context(cafile=certifi.where())
        return _tls


#: The longest Retry-After read as it is: a larger one is read as this (the caller bounds the
#: wait it honours much lower); keeps the arithmetic far from datetime's limits.
MAX_RETRY_AFTER = timedelta(days=30)


def retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A ``Retry-After`` header as a wait: delay-seconds or an HTTP-date (RFC 9110 10.2.3),
    counted from ``now``; None when absent or unreadable, zero for a date already past."""
    if value is None:
        return None
    value = value.strip()[:64]
    if value.isascii() and value.isdigit():
        return min(timedelta(seconds=int(value[:9])), MAX_RETRY_AFTER)
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return min(max(at - now, timedelta(0)), MAX_RETRY_AFTER)


async def _answer(answer: httpx.Response, max_bytes: int, sent_at: datetime) -> Fetched:
    if not 200 <= answer.status_code < 300:
        wait = retry_after(answer.headers.get("retry-after"), sent_at)
        raise HttpStatusError(answer.status_code, wait)
    coding = answer.headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        raise CompressedAnswer(f"the answer is compressed ({coding[:20]})")
    declared = answer.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLarge(f"the answer declares {int(declared):,} bytes")
    chunks: list[bytes] = []
    got = 0
    async for chunk in answer.aiter_raw():
        got += len(chunk)
        if got > max_bytes:
            raise ResponseTooLarge(f"the answer is over {max_bytes:,} bytes")
        chunks.append(chunk)
    return Fetched(answer.status_code, b"".join(chunks), sent_at)
