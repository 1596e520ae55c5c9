"""Contract: the bound a ``CallQuota`` limit guarantees, over adversarial call times.

A limit of ``L`` units per ``W`` ms is a two-window counter (activity/_quota.py,
lua/lib/extract_quota.lua ``quota_take``), not an exact sliding log. What it guarantees, for
the times a counter counts:

* at most ``L`` units in any aligned window ``[kW, (k + 1)W)``;
* at most ``2L - floor(2L / W)`` units in any ``W`` ms (sliding), i.e. twice the limit
  whenever ``2L < W`` (10/s: 20 calls within 999 ms; 60/min: 120 proxies within 59.999 s).
  The worst case is ``L`` units in the last ms of one window and ``L`` more in the next
  window's last-but-one ms, where the previous window's weight rounds down to nothing.

The times a counter counts are the callers' times, except that a call behind the newest
window its counter has admitted a unit in counts as made at that window's start (its
previous window at full weight): a clock that went back never earns room. Over the callers'
raw times the bound holds while they never go back; a clock that jumps ahead two windows
or more and back can get past it, which is why web hosts must keep their clocks in step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activity.contract.harness import PoolFactory, PoolHarness
from activity.errors import QuotaExceeded
from activity.types import CallQuota

MS = timedelta(milliseconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STOCK = 120


def epoch_ms(h: PoolHarness) -> int:
    """The caller's time as the pool counts it: windows are aligned on whole multiples."""
    return (h.now - EPOCH) // MS


@dataclass
class Admitted:
    """The units one limit admitted, at the times its counter counted them."""

    window: int
    limit: int
    times: list[int] = field(default_factory=list)
    newest: int | None = None  # the newest window index a unit was admitted in

    def counted_at(self, now: int) -> int:
        """The time the counter counts a call at ``now`` at (see the module docstring)."""
        if self.newest is None:
            return now
        return max(now, self.newest * self.window)

    def add(self, now: int, units: int) -> None:
        at = self.counted_at(now)
        self.times.extend([at] * units)
        if units:
            self.newest = at // self.window

    def check(self) -> None:
        w, limit = self.window, self.limit
        times = sorted(self.times)
        aligned: dict[int, int] = {}
        for t in times:
            aligned[t // w] = aligned.get(t // w, 0) + 1
        assert max(aligned.values(), default=0) <= limit, aligned
        most = 2 * limit - 2 * limit // w
        for i, start in enumerate(times):  # a busiest window starts at an admitted unit
            inside = sum(1 for t in times[i:] if t < start + w)
            assert inside <= most, (start, inside, most)


def _steps(window: int) -> st.SearchStrategy[int]:
    """Moves of the clock: mostly forward, to the edges of windows, sometimes back."""
    return st.one_of(
        st.integers(0, 3),
        st.integers(0, 2 * window),
        st.sampled_from([window - 2, window - 1, window, window + 1]).filter(lambda d: d >= 0),
        st.integers(-2 * window, -1),
    )


@st.composite
def _histories(draw: st.DrawFn) -> tuple[CallQuota, list[tuple[int, str, int]]]:
    call_window = draw(st.sampled_from([2, 7, 100, 1000]))
    proxy_window = draw(st.sampled_from([3, 50, 1000]))
    quota = CallQuota(
        calls=draw(st.integers(1, 6)),
        proxies=draw(st.integers(1, 6)),
        call_window=call_window * MS,
        proxy_window=proxy_window * MS,
    )
    moves = _steps(min(call_window, proxy_window)) | _steps(max(call_window, proxy_window))
    steps = draw(
        st.lists(
            st.tuples(
                moves, st.sampled_from(["charge", "take"]), st.integers(1, quota.proxies + 1)
            ),
            min_size=1,
            max_size=40,
        )
    )
    return quota, steps


def _run(h: PoolHarness, quota: CallQuota, steps: Iterable[tuple[int, str, int]]) -> None:
    calls = Admitted(quota.call_window // MS, quota.calls)
    proxies = Admitted(quota.proxy_window // MS, quota.proxies)
    for move, kind, count in steps:
        if move >= 0:
            h.advance(move * MS)
        else:
            h.clock.rewind(-move * MS)
        now = epoch_ms(h)
        if kind == "charge":
            with contextlib.suppress(QuotaExceeded):
                h.pool.charge_call("c1", quota)
                calls.add(now, 1)
            continue
        try:
            got = h.take(count, quota=quota).returned
        except QuotaExceeded as refused:
            if refused.reason == "proxies":  # refused after its call unit was taken
                calls.add(now, 1)
            continue
        calls.add(now, 1)
        proxies.add(now, got)
    calls.check()
    proxies.check()
    # A refused call took nothing: the stock is down by exactly what was handed out.
    assert h.pool.inventory("u1") == STOCK - len(proxies.times)


class TestQuotaBound:
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(history=_histories())
    def test_no_window_admits_more_than_the_bound(self, make_pool: PoolFactory, history):
        """CallQuota: at most L per aligned window, 2L - floor(2L / W) per sliding window,
        over any call times (see the module docstring)."""
        quota, steps = history
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(STOCK)], ttl=timedelta(hours=1))
        _run(h, quota, steps)

    def test_the_sliding_bound_is_reached(self, make_pool: PoolFactory):
        """The bound is tight: L in the last ms of a window, L more 999 ms later."""
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(20)], ttl=timedelta(hours=1))
        quota = CallQuota(calls=10, proxies=10, call_window=timedelta(seconds=1))
        h.advance((-epoch_ms(h) - 1) % 1000 * MS)  # the last ms of a window
        assert [h.take(1, quota=quota).returned for _ in range(10)] == [1] * 10
        h.advance(999 * MS)
        for _ in range(10):
            h.pool.charge_call("c1", quota)  # 20 calls within 999 ms against 10/s
        with pytest.raises(QuotaExceeded):
            h.pool.charge_call("c1", quota)  # an 11th in one window
