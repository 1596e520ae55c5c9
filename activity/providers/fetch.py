"""One HTTP request to a vendor's API, bounded in time and size, its failures typed.

The request's moment is taken *before* it is sent (``sent_at``): seconds-left expiries count
from it, so the time the answer took makes them early, never late. The request asks for an
uncompressed answer and a compressed one is refused (:class:`ResponseTooLarge` could not bound
what a few kilobytes of gzip grow to before they are checked). The answer is read to at most
``max_bytes`` and within ``total_timeout`` of the send; a vendor that sends a byte a second is
cut off at the first chunk after the total timeout, so a fetch takes at most
``total_timeout`` + ``read_timeout``.
A declared ``Content-Length`` over ``max_bytes`` is refused before anything is read.

Errors name what failed, never the URL or a header: vendors put API keys and signatures in
both (Proxy-Seller's key is in the path, Kuaidaili's signature in the query), and httpx's own
messages quote the URL, so none is chained.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

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
    """The vendor answered with an HTTP error status."""

    code = "http_status"

    def __init__(self, status: int) -> None:
        self.status = status
        if status == 429:
            self.next_step = NextStep.BACK_OFF
        elif status in (401, 402, 403):  # the key, the balance, the caller's address
            self.next_step = NextStep.DISABLE
        else:
            self.next_step = NextStep.RETRY_LATER
        super().__init__(f"the vendor answered HTTP {status}")


@dataclass(frozen=True, slots=True)
class FetchLimits:
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    total_timeout: float = 30.0
    max_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 0 < self.connect_timeout <= 60 or not 0 < self.read_timeout <= 60:
            raise ValueError("connect_timeout and read_timeout must be above 0 and at most 60 s")
        if not 0 < self.total_timeout <= 300:
            raise ValueError("total_timeout must be above 0 and at most 300 s")
        if not 1 <= self.max_bytes <= 64 * 1024 * 1024:
            raise ValueError("max_bytes must be 1 byte to 64 MiB")


@dataclass(frozen=True, slots=True)
class Fetched:
    """A vendor's answer: its status and body, and when its request was sent."""

    status: int
    body: bytes
    sent_at: datetime


def fetch(
    client: httpx.Client,
    url: str,
    *,
    clock: Clock,
    limits: FetchLimits,
    method: str = "GET",
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    """The answer to one request; a 2xx only (:class:`HttpStatusError` otherwise)."""
    timeout = httpx.Timeout(
        connect=limits.connect_timeout,
        read=limits.read_timeout,
        write=limits.read_timeout,
        pool=limits.connect_timeout,
    )
    sent = {**(headers or {}), "Accept-Encoding": "identity"}
    sent_at = clock.now()
    deadline = time.monotonic() + limits.total_timeout
    try:
        with client.stream(method, url, params=params, headers=sent, timeout=timeout) as answer:
            if not 200 <= answer.status_code < 300:
                raise HttpStatusError(answer.status_code)
            coding = answer.headers.get("content-encoding", "identity").strip().lower()
            if coding not in ("", "identity"):
                raise CompressedAnswer(f"the answer is compressed ({coding[:20]})")
            declared = answer.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limits.max_bytes:
                raise ResponseTooLarge(f"the answer declares {int(declared):,} bytes")
            body = _read(answer, limits.max_bytes, deadline)
            return Fetched(answer.status_code, body, sent_at)
    except httpx.TimeoutException as exc:
        raise FetchFailed(f"the vendor did not answer in time ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"the vendor could not be reached ({type(exc).__name__})") from None


def _read(answer: httpx.Response, max_bytes: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    got = 0
    for chunk in answer.iter_raw():
        got += len(chunk)
        if got > max_bytes:
            raise ResponseTooLarge(f"the answer is over {max_bytes:,} bytes")
        if time.monotonic() > deadline:
            raise FetchFailed("the vendor took too long to send its answer")
        chunks.append(chunk)
    return b"".join(chunks)
