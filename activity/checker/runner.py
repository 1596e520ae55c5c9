"""Many health checks at once, at bounded concurrency, and what each means for the pool.

``probe_all`` checks up to ``MAX_CHECKS`` proxies with at most ``concurrency`` connections
open at once (``concurrency`` workers on one event loop, each taking the next proxy), one
deadline per check. ``health_of`` turns a check's result into the pool's ``HealthUpdate``
(ADR-005: a check moves FETCHED/CHECKING/AVAILABLE/SUSPECT to AVAILABLE, SUSPECT or UNHEALTHY).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

import uvloop

from activity.checker.probe import CheckTarget, Failure, ProbeResult, ProxyEndpoint, probe
from activity.types import HealthUpdate, ProxyState

#: Most proxies one ``probe_all`` checks, and most connections it opens at once.
MAX_CHECKS = 10_000
MAX_CONCURRENCY = 2_000
#: A failure that says the proxy cannot work as given: UNHEALTHY at once. Any other failure
#: may pass (a slow moment, the target's own error): SUSPECT first, UNHEALTHY when the proxy
#: was SUSPECT already.
DEFINITE = frozenset({Failure.REFUSED, Failure.AUTH, Failure.ADDRESS})


#: The event loops ``check_all`` runs on: uvloop, the default (bench/checks.py side by side
#: with asyncio's own: docs/PERFORMANCE.md), or asyncio's.
LOOPS = ("uvloop", "asyncio")


def check_all(
    proxies: Sequence[ProxyEndpoint],
    target: CheckTarget,
    *,
    concurrency: int,
    timeout: float,
    loop: str = "uvloop",
) -> list[ProbeResult]:
    """:func:`probe_all` run to its end on an event loop of its own (from a thread that runs
    none: a fetch or recheck task's), uvloop unless ``loop`` says ``asyncio``."""
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}")
    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(probe_all(proxies, target, concurrency=concurrency, timeout=timeout))


async def probe_all(
    proxies: Sequence[ProxyEndpoint],
    target: CheckTarget,
    *,
    concurrency: int,
    timeout: float,
) -> list[ProbeResult]:
    """One result per proxy, in their order."""
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be 1-{MAX_CONCURRENCY}")
    if len(proxies) > MAX_CHECKS:
        raise ValueError(f"at most {MAX_CHECKS} proxies per call")
    if not 0 < timeout <= 60:
        raise ValueError("timeout must be over 0 and at most 60 seconds")
    results: list[ProbeResult | None] = [None] * len(proxies)
    queue = iter(range(len(proxies)))

    async def worker() -> None:
        for index in queue:  # one iterator shared by the workers: each proxy once
            results[index] = await probe(proxies[index], target, timeout)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(proxies)))))
    return [result for result in results if result is not None]


def health_of(
    proxy_id: str, result: ProbeResult, checked_at: datetime, previous: ProxyState
) -> HealthUpdate:
    """The pool's update for one check of a proxy that was ``previous``."""
    if result.ok:
        return HealthUpdate(proxy_id, ProxyState.AVAILABLE, checked_at, result.latency_ms)
    failure = result.failure or Failure.PROTOCOL
    again = previous is ProxyState.SUSPECT
    state = ProxyState.UNHEALTHY if failure in DEFINITE or again else ProxyState.SUSPECT
    reason = f"check_{failure.value}" + (f"_{result.status}" if result.status else "")
    return HealthUpdate(proxy_id, state, checked_at, result.latency_ms, reason)
