"""The sliding window arithmetic of CallQuota (activity/_quota.py; lua/lib/extract_quota.lua
mirrors it and the contract suite holds the two to the same answers): a refusal's wait is
exactly the first millisecond at which the cost fits, found here by trying every millisecond."""

from __future__ import annotations

import random

from activity._quota import Refusal, Window, take


def first_fit(state: Window | None, now: int, limit: int, window: int, cost: int) -> int:
    if cost > limit:
        return 2 * window  # never fits: the longest wait there is
    for wait in range(0, 4 * window):  # at most a window behind (clock), then two windows
        if isinstance(take(state, now + wait, limit, window, cost), Window):
            return wait
    raise AssertionError("never fits")


def test_a_refusal_waits_exactly_until_the_first_millisecond_that_fits():
    rng = random.Random(11)
    refusals = 0
    for _ in range(1500):
        window = rng.choice([7, 100, 1000])
        limit = rng.randrange(1, 12)
        index = rng.randrange(5, 9)
        state = Window(index, rng.randrange(0, limit + 1), rng.randrange(0, limit + 1))
        now = rng.randrange((index - 1) * window, (index + 3) * window)
        cost = rng.randrange(0, limit + 3)
        answer = take(state, now, limit, window, cost)
        if isinstance(answer, Window):
            continue
        refusals += 1
        assert isinstance(answer, Refusal)
        assert answer.wait_ms == first_fit(state, now, limit, window, cost)
        assert 0 <= answer.left <= limit
    assert refusals > 300


def test_taking_adds_to_the_current_window_and_rolls_over():
    assert take(None, 2_500, 10, 1_000, 3) == Window(2, 3, 0)
    assert take(Window(2, 3, 0), 3_100, 10, 1_000, 1) == Window(3, 1, 3)
    assert take(Window(2, 3, 0), 4_000, 10, 1_000, 1) == Window(4, 1, 0)  # two windows on
    # A clock that went back keeps counting in the newest window seen.
    assert take(Window(5, 2, 1), 4_200, 10, 1_000, 1) == Window(5, 3, 1)
