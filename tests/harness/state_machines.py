"""Running a Hypothesis state machine as the differential tests do."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine

#: Sequences per differential test (HYPOTHESIS_EXAMPLES, default 40).
EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", "40"))


def run_machine(machine: type[RuleBasedStateMachine], steps: int) -> None:
    """``EXAMPLES`` random sequences of up to ``steps`` steps, no deadline per example (each
    step is a round trip to a real server)."""
    test = machine.TestCase
    test.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    test().runTest()
