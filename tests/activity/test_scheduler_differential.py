"""MemoryScheduler and RedisScheduler, driven by the same random sequence, must be
indistinguishable: every rule applies one operation to both and demands equal results and
equal exception types. Claim tokens differ by nature (each side makes its own); a claim is
kept as the pair of both sides' and compared without its token. Budget: HYPOTHESIS_EXAMPLES
(default 40) sequences of up to 50 steps."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from activity.errors import ActivityError
from activity.scheduler import AccountLimits, Claim, MemoryScheduler
from activity.scheduler.redis import RedisScheduler
from tests.harness.state_machines import run_machine

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ACCOUNTS = ["a1", "a2"]
UPSTREAMS = ["u1", "u2", "u3", "u4"]
LIMITS = st.builds(
    AccountLimits,
    concurrency=st.integers(1, 3),
    calls_per_second=st.none() | st.integers(1, 3),
    calls_per_minute=st.none() | st.integers(1, 6),
    proxies_per_minute=st.none() | st.integers(1, 20),
)
#: Leases, cooldowns and steps of time around one another, so ends and windows are crossed.
SPANS = st.sampled_from([0, 1, 999, 1000, 1001, 5000, 30000, 60000]).map(
    lambda ms: timedelta(milliseconds=ms)
)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        result = call()
    except ActivityError as exc:
        return (type(exc).__name__, getattr(exc, "reason", None))
    return ("ok", replace(result, token="") if isinstance(result, Claim) else result)


class Differential(RuleBasedStateMachine):
    redis_url = ""

    @initialize()
    def schedulers(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        self.memory = MemoryScheduler()
        client = redis.Redis.from_url(self.redis_url, socket_timeout=10)
        self.redis = RedisScheduler(client, prefix=f"t{uuid.uuid4().hex[:12]}")
        self.claims: list[tuple[Claim, Claim]] = []  # (memory's, redis's)

    def both(self, call: Any) -> tuple[str, Any]:
        a, b = _outcome(lambda: call(self.memory, 0)), _outcome(lambda: call(self.redis, 1))
        assert a == b, f"memory {a!r} != redis {b!r}"
        return a

    @rule(delta=SPANS, back=st.booleans())
    def time_passes(self, delta: timedelta, back: bool) -> None:
        # Backwards too: callers' clocks differ (a dispatcher behind a worker), and every rule
        # must still agree.
        self.now += -delta if back else delta

    @rule(account=st.sampled_from(ACCOUNTS), upstream=st.sampled_from(UPSTREAMS), delta=SPANS)
    def schedule(self, account: str, upstream: str, delta: timedelta) -> None:
        self.both(lambda s, _: s.schedule(account, upstream, self.now + delta))

    @rule(account=st.sampled_from(ACCOUNTS), upstream=st.sampled_from(UPSTREAMS))
    def forget(self, account: str, upstream: str) -> None:
        self.both(lambda s, _: s.forget(account, upstream))

    @rule(account=st.sampled_from(ACCOUNTS))
    def drop_account(self, account: str) -> None:
        self.both(lambda s, _: s.drop_account(account))

    @rule(account=st.sampled_from(ACCOUNTS), limits=LIMITS, lease=SPANS)
    def claim(self, account: str, limits: AccountLimits, lease: timedelta) -> None:
        made: list[Any] = [None, None]

        def call(s: Any, side: int) -> Any:
            made[side] = s.claim(self.now, account, limits, lease)
            return made[side]

        self.both(call)
        if isinstance(made[0], Claim):
            self.claims.append((made[0], made[1]))

    @rule(data=st.data(), lease=SPANS)
    def renew(self, data: st.DataObject, lease: timedelta) -> None:
        if self.claims:
            pair = data.draw(st.sampled_from(self.claims))
            self.both(lambda s, side: s.renew(self.now, pair[side], lease))

    @rule(data=st.data(), limits=LIMITS)
    def take_call(self, data: st.DataObject, limits: AccountLimits) -> None:
        if self.claims:
            pair = data.draw(st.sampled_from(self.claims))
            self.both(lambda s, side: s.take_call(self.now, pair[side], limits))

    @rule(data=st.data(), limits=LIMITS, wanted=st.integers(0, 12))
    def take_proxies(self, data: st.DataObject, limits: AccountLimits, wanted: int) -> None:
        if self.claims:
            pair = data.draw(st.sampled_from(self.claims))
            self.both(lambda s, side: s.take_proxies(self.now, pair[side], limits, wanted))

    @rule(data=st.data(), count=st.integers(0, 12), back=SPANS)
    def give_back_proxies(self, data: st.DataObject, count: int, back: timedelta) -> None:
        if self.claims:
            pair = data.draw(st.sampled_from(self.claims))
            taken = self.now - back
            self.both(lambda s, side: s.give_back_proxies(self.now, pair[side], count, taken))

    @rule(data=st.data(), delta=SPANS)
    def finish(self, data: st.DataObject, delta: timedelta) -> None:
        if self.claims:
            pair = data.draw(st.sampled_from(self.claims))
            self.both(lambda s, side: s.finish(self.now, pair[side], self.now + delta))

    @rule(account=st.sampled_from(ACCOUNTS), upstream=st.sampled_from(UPSTREAMS), cooldown=SPANS)
    def request(self, account: str, upstream: str, cooldown: timedelta) -> None:
        self.both(lambda s, _: s.request(self.now, account, upstream, cooldown))


def test_memory_and_redis_schedulers_agree(redis_url):
    Differential.redis_url = redis_url
    run_machine(Differential, steps=50)
