"""The sliding window counter of ``CallQuota``: MemoryPool runs it, ``quota_take`` in
``lua/lib/extract_quota.lua`` mirrors it line for line, and the contract suite holds both to the
same answers.

One counter per client, limit and window: ``index`` (the window ``current`` counts in, i.e.
``now // window``), ``current`` and ``previous`` (the units of the window before it). The count
at ``now`` is ``previous`` weighted by how much of the previous window still overlaps the last
``window`` ms, rounded down, plus ``current``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Window:
    index: int
    current: int
    previous: int


@dataclass(frozen=True, slots=True)
class Refusal:
    #: Milliseconds until ``cost`` would fit if nothing else were taken (two windows: never).
    wait_ms: int
    #: Units free now.
    left: int


def take(state: Window | None, now: int, limit: int, window: int, cost: int) -> Window | Refusal:
    """The counter with ``cost`` more units at ``now``, or why they do not fit."""
    index = now // window
    current, previous = 0, 0
    if state is not None and state.index >= index - 1:
        if state.index == index - 1:
            previous = state.current
        else:
            current, previous = state.current, state.previous
            index = max(index, state.index)  # the clock went back: keep the newest window
    elapsed = now - index * window
    behind = max(0, -elapsed)  # ms until the newest window seen starts (a clock that went back)
    elapsed = max(0, elapsed)
    count = previous * (window - elapsed) // window + current
    if count + cost <= limit:
        return Window(index, current + cost, previous)
    # The first whole ms at which the count has fallen to room = limit - cost. n units of the
    # previous window weigh floor(n * (window - t) / window) at t ms into the current one,
    # which is at most r once t > window * (n - r - 1) / n.
    room = limit - cost
    wait = 0
    if room < 0:
        wait = 2 * window  # never fits
    elif current > room:
        # This window alone is over: it must become the previous one, then decay far enough.
        wait = behind + (window - elapsed) + window * (current - room - 1) // current + 1
    elif previous > 0:
        # Only the previous window's share must decay, to room - current.
        wait = behind + window * (previous - room + current - 1) // previous + 1 - elapsed
    return Refusal(wait, max(0, limit - count))
