"""``make run``'s status line: the pool's inventory and the last interval's extracts and gateway
requests, read from the web server's own ``GET /metrics`` (pool_admin/metrics/exposition.py)
and parsed with prometheus_client's text parser. No Django import: the launcher runs it.

The usage counters come from the metrics consumer's totals, so a rate lags the traffic by the
consumer's batch (seconds). A read that fails makes the line say so in a few words.
"""

from __future__ import annotations

import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: Seconds one read of /metrics may take (it is served from a cache of a few seconds).
READ_TIMEOUT_S = 2.0
#: At most this much of the exposition is read; a longer one is not parsed.
MAX_EXPOSITION_BYTES = 4 * 1024 * 1024

_GAUGES = {
    "proxypool_upstream_managed_proxies": "managed",
    "proxypool_upstream_unextracted_proxies": "unextracted",
}
_COUNTERS = {
    "proxypool_extract_calls": "extract_calls",
    "proxypool_extracted_proxies": "extracted",
    "proxypool_gateway_requests": "gateway_requests",
}


class FiguresUnavailable(Exception):
    """/metrics could not be read or parsed; the message says why in a few words."""


@dataclass(frozen=True)
class Figures:
    managed: float = 0.0
    unextracted: float = 0.0
    extract_calls: float = 0.0
    extracted: float = 0.0
    gateway_requests: float = 0.0


def parse_figures(text: str) -> Figures:
    """The figures the status line shows, summed over upstreams (and groups) from ``text``."""
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            field = _GAUGES.get(family.name) or _COUNTERS.get(family.name)
            if field is None:
                continue
            wanted = family.name if family.name in _GAUGES else f"{family.name}_total"
            total = sum(s.value for s in family.samples if s.name == wanted)
            sums[field] = sums.get(field, 0.0) + total
    except ValueError as exc:
        raise FiguresUnavailable(f"unreadable exposition ({str(exc)[:80]})") from None
    if "managed" not in sums:
        raise FiguresUnavailable("no pool figures in it")
    return Figures(**sums)


def read_figures(base_url: str) -> Figures:
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=READ_TIMEOUT_S) as response:  # noqa: S310
            body = response.read(MAX_EXPOSITION_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise FiguresUnavailable(f"HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise FiguresUnavailable(str(reason)[:80]) from None
    if len(body) > MAX_EXPOSITION_BYTES:
        raise FiguresUnavailable(f"over {MAX_EXPOSITION_BYTES} bytes")
    return parse_figures(body.decode(errors="replace"))


def status_line(before: Figures | None, now: Figures, seconds: float) -> str:
    """One line: the inventory now, and per-minute rates since ``before`` (if any)."""

    def per_minute(field: str) -> str:
        if before is None or seconds <= 0:
            return "-"
        delta = getattr(now, field) - getattr(before, field)
        return "-" if delta < 0 else f"{delta * 60 / seconds:.0f}"  # a reset total: no rate

    return (
        f"pool {now.managed:.0f} proxies, {now.unextracted:.0f} not extracted | "
        f"extract calls {per_minute('extract_calls')}/min "
        f"({per_minute('extracted')} proxies/min) | "
        f"gateway {per_minute('gateway_requests')} requests/min"
    )


class StatusReporter:
    """Writes a status line every ``interval`` seconds (0: never), rates over the interval."""

    def __init__(
        self,
        base_url: str,
        interval: float,
        write: Callable[[str], None],
        read: Callable[[str], Figures] = read_figures,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base_url = base_url
        self._interval = interval
        self._write = write
        self._read = read
        self._clock = clock
        self._last: tuple[float, Figures] | None = None
        self._next = clock()

    def start(self) -> None:
        """Take the baseline the first line's rates are counted from (nothing written)."""
        if self._interval > 0:
            self._next = self._clock() + self._interval
            with contextlib.suppress(FiguresUnavailable):  # the first line then says it
                self._sample()

    def tick(self) -> None:
        if self._interval <= 0 or self._clock() < self._next:
            return
        self._next = self._clock() + self._interval
        before = self._last
        try:
            figures = self._sample()
        except FiguresUnavailable as exc:
            self._write(f"status: figures unavailable ({exc})")
            return
        seconds = self._clock() - before[0] if before else 0.0
        self._write(f"status: {status_line(before[1] if before else None, figures, seconds)}")

    def _sample(self) -> Figures:
        try:
            figures = self._read(self._base_url)
        except FiguresUnavailable:
            self._last = None  # the next good read starts a new baseline
            raise
        self._last = (self._clock(), figures)
        return figures
