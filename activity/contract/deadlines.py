"""Contract: per-call deadlines (ARCHITECTURE "Every remote call is bounded in time")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory, ids
from activity.deadline import deadline
from activity.errors import DeadlineExceeded, StoreUnavailable
from activity.types import ProxyState

MIN = timedelta(minutes=1)

CALLS = {
    "upsert": lambda h: h.upsert([h.proxy("new")]),
    "health": lambda h: h.mark(["p1"], ProxyState.UNHEALTHY),
    "extract": lambda h: h.take(1),
    "inventory": lambda h: h.pool.inventory("u1"),
    "slots": lambda h: h.pool.upstream_inventory("u1"),
    "extractable": lambda h: h.pool.extractable("u1"),
    "assign": lambda h: h.pool.assign(h.now, "p1", "w1", MIN),
    "session": lambda h: h.pool.open_session("w1", "s1", MIN),
    "sweep": lambda h: h.pool.sweep(10),
    "expire": lambda h: h.pool.expire(h.now, 10),
}


class TestDeadlines:
    @pytest.mark.parametrize("call", sorted(CALLS))
    def test_a_call_past_its_deadline_changes_nothing(self, make_pool: PoolFactory, call):
        """故障语义: a deadline that passed before sending is DeadlineExceeded, nothing changed."""
        h = make_pool()
        h.stock("p1", "p2")
        with deadline(timedelta(0)), pytest.raises(DeadlineExceeded) as err:
            CALLS[call](h)
        assert isinstance(err.value, StoreUnavailable)  # callers map both to HTTP 503
        assert h.pool.inventory("u1") == 2
        assert h.pool.get("p1") is None
        assert sorted(ids(h.take(5))) == ["p1", "p2"]

    def test_a_call_inside_its_deadline_runs(self, make_pool: PoolFactory):
        """Deadlines bound calls; they do not refuse them."""
        h = make_pool()
        h.stock("p1")
        with deadline(timedelta(seconds=30)):
            assert ids(h.take(1)) == ["p1"]
