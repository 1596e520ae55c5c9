"""The usage stream consumer's phases, and the one function that moves it between them.

A consumer is in one of three phases:

* ``RECOVERING``: it reads its own pending entries again (read and not acknowledged), a batch
  at a time, until a read finds none. It starts here, and comes back here after any failure:
  the pending list, not memory, holds what it has not finished.
* ``ONE_AT_A_TIME``: the same, one entry per read. Failures that have lasted the claim time
  (``claim_idle_ms``) put it here, and it stays here, through later failures and successes,
  until its own pending entries are done: a batch that fails every time would otherwise hold
  the consumer for good, and one at a time the good entries go on while only the entry that
  fails every time reaches the dead-letter limit.
* ``READING``: new entries (and, every ``claim_every_s``, what dead consumers left).

The delivery count, in this one place: reading its own entries again counts a delivery
(lua/metrics/read_own.lua) only when ``transition`` sets ``counting`` on ``OWN_DUE``. It does
on the first read after the process starts, so a process that dies on an entry every time gets
it dead-lettered; after that only in ``ONE_AT_A_TIME`` with failures that have lasted the claim
time, and then once per claim time, so the entry that fails every time reaches the limit while
a short outage (a probe that passes while writes fail) brings no good entry nearer to it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Phase(enum.Enum):
    RECOVERING = "recovering"
    ONE_AT_A_TIME = "one at a time"
    READING = "reading"


class PhaseEvent(enum.Enum):
    #: A step failed (either store, or the group gone): what it read is pending again.
    FAILED = "failed"
    #: A step went through.
    SUCCEEDED = "succeeded"
    #: Its own pending entries are about to be read.
    OWN_DUE = "own due"
    #: A read of its own pending entries found some.
    OWN_READ = "own read"
    #: A read of its own pending entries found none.
    OWN_DONE = "own done"


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.RECOVERING
    #: Since when its steps have failed in a row (None: the last one did not).
    failing_since: float | None = None
    #: When a read of its own entries last counted a delivery (None: the first read after the
    #: process started is still to come).
    counted_at: float | None = None
    #: The read of its own entries under way counts a delivery.
    counting: bool = False

    def failing_for(self, now: float) -> float:
        return 0.0 if self.failing_since is None else now - self.failing_since


def transition(state: State, event: PhaseEvent, now: float, claim_idle_s: float) -> State:
    """The state after ``event`` at ``now`` (monotonic seconds); the only place the phase, the
    failure clock and the delivery count change."""
    if event is PhaseEvent.FAILED:
        # What it read and did not acknowledge is pending again: its own entries come first.
        back = Phase.RECOVERING if state.phase is Phase.READING else state.phase
        since = now if state.failing_since is None else state.failing_since
        return replace(state, phase=back, failing_since=since, counting=False)
    if event is PhaseEvent.SUCCEEDED:
        return replace(state, failing_since=None)
    if event is PhaseEvent.OWN_DUE:
        failing_long = state.failing_since is not None and state.failing_for(now) >= claim_idle_s
        counting = state.counted_at is None or (
            failing_long and now - state.counted_at >= claim_idle_s
        )
        if failing_long:
            return replace(state, phase=Phase.ONE_AT_A_TIME, counting=counting)
        return replace(state, counting=counting)
    if event is PhaseEvent.OWN_READ:
        counted_at = now if state.counting else state.counted_at
        return replace(state, counted_at=counted_at, counting=False)
    # OWN_DONE: its own entries are done (the first pass after a start included).
    counted_at = now if state.counted_at is None else state.counted_at
    return State(Phase.READING, state.failing_since, counted_at, counting=False)
