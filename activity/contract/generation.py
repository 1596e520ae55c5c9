"""Contract: the pool generation an extract reports (ADR-005: losing the store ends a generation).

What a store does when it loses its data is its own (tests/activity/test_redis_generation.py
restarts a Redis); what every store owes is an ID that stays put while it keeps its data.
"""

from __future__ import annotations

import re
from dataclasses import replace

from activity.contract.harness import PoolFactory

_OPAQUE_ID = re.compile(r"[0-9a-f]{16}")


class TestGeneration:
    def test_every_extract_names_one_generation(self, make_pool: PoolFactory):
        """An extract names its pool generation, the same for every call while the store keeps
        its data: a fresh one, an empty one, a replay and another client's."""
        h = make_pool()
        h.stock("p1", "p2", "p3")
        first = h.take(1, key="k1")
        replay = h.take(1, key="k1")
        empty = h.take(5, client="c2", region="nowhere")
        other = h.take(1, client="c3")
        assert _OPAQUE_ID.fullmatch(first.generation), first.generation
        assert replay.replayed
        assert {replay.generation, empty.generation, other.generation} == {first.generation}
        # Not part of the result's value: the differential test compares two stores' results.
        assert replace(first, generation="0" * 16) == first
