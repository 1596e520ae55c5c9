"""Sweep: the maintenance pass that removes, a bounded number at a time, what expired in every
family (port Maintenance)."""

from __future__ import annotations

from activity._validation.common import limit as check_limit
from activity.deadline import check_deadline
from activity.memory._state import PoolState
from activity.memory.outcomes import clean_quarantine
from activity.memory.sessions import clean_sessions
from activity.types import SweepResult


class Sweeper:
    def __init__(self, state: PoolState) -> None:
        self._s = state

    def sweep(self, limit: int) -> SweepResult:
        s = self._s
        n = check_limit(limit, s.options)
        with s.lock:
            check_deadline()
            removed, more_records = s.clean_expired(s.now(), n)
            sessions, more_sessions = clean_sessions(s, s.server_now(), n)
            quarantines, more_quarantines = clean_quarantine(s, s.now(), n)
            return SweepResult(
                expired=removed,
                sessions=sessions,
                more=more_records or more_sessions or more_quarantines,
                quarantines=quarantines,
                tally=s.take_expired_tally(),
            )
