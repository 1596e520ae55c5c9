"""The consumer's phases (pool_admin/metrics/phases.py), without Redis or PostgreSQL: which
entries it reads next, and when reading its own entries again counts a delivery."""

from __future__ import annotations

from pool_admin.metrics.phases import Phase, PhaseEvent, State, transition

IDLE = 60.0  # the claim time, in seconds


def run(state: State, *steps: tuple[PhaseEvent, float]) -> State:
    for event, now in steps:
        state = transition(state, event, now, IDLE)
    return state


def test_a_start_recovers_its_own_entries_counting_one_delivery_then_reads_new_ones():
    state = run(State(), (PhaseEvent.OWN_DUE, 0.0))
    assert (state.phase, state.counting) == (Phase.RECOVERING, True)
    state = run(state, (PhaseEvent.OWN_READ, 0.1), (PhaseEvent.OWN_DUE, 0.2))
    assert (state.counting, state.counted_at) == (False, 0.1)  # once, not on every read
    state = run(state, (PhaseEvent.OWN_DONE, 0.3))
    assert (state.phase, state.counted_at) == (Phase.READING, 0.1)


def test_a_start_with_nothing_pending_ends_the_first_pass_too():
    state = run(State(), (PhaseEvent.OWN_DUE, 5.0), (PhaseEvent.OWN_DONE, 5.0))
    assert (state.phase, state.counted_at) == (Phase.READING, 5.0)
    state = run(state, (PhaseEvent.FAILED, 6.0), (PhaseEvent.OWN_DUE, 7.0))
    assert (state.phase, state.counting) == (Phase.RECOVERING, False)


def test_a_failure_sends_it_back_to_its_own_entries_and_a_success_stops_the_clock():
    reading = State(Phase.READING, counted_at=0.0)
    state = run(reading, (PhaseEvent.FAILED, 10.0), (PhaseEvent.FAILED, 11.0))
    assert (state.phase, state.failing_since) == (Phase.RECOVERING, 10.0)  # the first failure
    assert run(state, (PhaseEvent.SUCCEEDED, 12.0)).failing_since is None


def test_failures_that_last_the_claim_time_go_one_at_a_time_counting_once_per_claim_time():
    state = run(State(Phase.READING, counted_at=0.0), (PhaseEvent.FAILED, 100.0))
    state = run(state, (PhaseEvent.OWN_DUE, 100.0 + IDLE - 1))
    assert (state.phase, state.counting) == (Phase.RECOVERING, False)  # a short outage: nothing
    state = run(state, (PhaseEvent.FAILED, 159.5), (PhaseEvent.OWN_DUE, 100.0 + IDLE))
    assert (state.phase, state.counting) == (Phase.ONE_AT_A_TIME, True)
    state = run(state, (PhaseEvent.OWN_READ, 160.0), (PhaseEvent.FAILED, 161.0))
    state = run(state, (PhaseEvent.OWN_DUE, 160.0 + IDLE - 1))
    assert (state.phase, state.counting) == (Phase.ONE_AT_A_TIME, False)  # one per claim time
    state = run(state, (PhaseEvent.FAILED, 219.5), (PhaseEvent.OWN_DUE, 160.0 + IDLE))
    assert state.counting


def test_one_at_a_time_lasts_through_successes_and_new_failures_until_its_entries_are_done():
    state = State(Phase.ONE_AT_A_TIME, failing_since=None, counted_at=0.0)
    state = run(state, (PhaseEvent.OWN_DUE, 1.0), (PhaseEvent.OWN_READ, 1.0))
    state = run(state, (PhaseEvent.SUCCEEDED, 1.0), (PhaseEvent.FAILED, 2.0))
    state = run(state, (PhaseEvent.OWN_DUE, 3.0))
    assert (state.phase, state.counting) == (Phase.ONE_AT_A_TIME, False)
    assert run(state, (PhaseEvent.OWN_DONE, 4.0)).phase is Phase.READING
