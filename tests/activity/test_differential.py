"""MemoryPool and RedisPool, driven by the same random sequence, must be indistinguishable.

After fakeredis's differential tests: every rule applies one operation to both pools and
demands equal results *and* equal exception types (and refusal reasons). Time moves only in its
own rule. Budget: HYPOTHESIS_EXAMPLES (default 40) sequences of up to 40 steps.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import strategies as st
from hypothesis import target
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from activity import (
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    ManualClock,
    MemoryPool,
    Outcome,
    OutcomeReport,
    PoolOptions,
    ProxyState,
    RecheckPolicy,
    RedisPool,
    RuntimeEntry,
    RuntimeReport,
    SnapshotRef,
    SystemClock,
)
from activity._validation.upsert import unique_key_digest
from activity.errors import ActivityError
from tests.harness.state_machines import run_machine

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PROXIES = [f"p{i}" for i in range(10)]
WORKERS = ["w1", "w2"]
UPSTREAMS = ["u1", "u2"]
SEC = timedelta(seconds=1)
# Small bounds so cleaning budgets, chunking and fail-closed scans are exercised too.
OPTIONS = {"clean_budget": 2, "scan_budget": 6, "script_batch_cap": 3}


def _revision(pool: Any, worker: str) -> tuple[int, Any]:
    """worker_revision without the session's expiry, which each store takes from its own clock.
    Both count every change alike, so the revisions themselves must be equal."""
    r = pool.worker_revision(worker)
    s = r.session
    return r.revision, s and (s.session_id, s.generation, s.issued, s.acked)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except ActivityError as exc:
        return (type(exc).__name__, getattr(exc, "reason", None))


class Differential(RuleBasedStateMachine):
    redis_url = ""

    @initialize()
    def pools(self) -> None:
        self.clock = ManualClock(datetime(2026, 3, 1, tzinfo=UTC))
        server = SystemClock()  # Redis's own clock: session and report TTLs are long here
        self.memory = MemoryPool(PoolOptions(**OPTIONS), clock=self.clock, server_clock=server)
        client = redis.Redis.from_url(self.redis_url, socket_timeout=10)
        options = PoolOptions(prefix=f"t{uuid.uuid4().hex[:12]}", **OPTIONS)
        self.redis = RedisPool(client, options, clock=self.clock)
        self.redis_client = client
        self.sessions: dict[str, str] = {}
        self.extracted = 0  # proxies handed out so far: steers the search (teardown)
        self.due = 0  # proxies listed as due for a recheck: steers it too
        self.version = 0
        self.sequences: dict[str, int] = {}

    def both(self, call: Any) -> tuple[str, Any]:
        a, b = _outcome(lambda: call(self.memory)), _outcome(lambda: call(self.redis))
        assert a == b, f"memory {a!r} != redis {b!r}"
        return a

    @rule(
        upstream=st.sampled_from(UPSTREAMS),
        ids=st.lists(st.sampled_from(PROXIES), min_size=1, max_size=5, unique=True),
        ttl=st.sampled_from([10, 30, 90]),
        region=st.sampled_from(["us", "de", None]),
        key_shift=st.integers(0, 2),
        max_size=st.sampled_from([2, 5, 100]),
        operation=st.sampled_from([None, "op-1"]),
    )
    def upsert(self, upstream, ids, ttl, region, key_shift, max_size, operation) -> None:
        now = self.clock.now()
        proxies = [
            FetchedProxy(
                pid,
                f"k{(int(pid[1:]) + key_shift) % 10}",
                "10.0.0.1",
                80,
                "http",
                now + ttl * SEC,
                region=region,
                max_concurrency=3,
            )
            for pid in ids
        ]
        batch = FetchedBatch(upstream, proxies, max_size, 5 * SEC, now, operation_id=operation)
        self.both(lambda p: p.upsert_fetched(batch))

    @rule(
        upstream=st.sampled_from(UPSTREAMS),
        ids=st.lists(st.sampled_from(PROXIES), min_size=1, max_size=4, unique=True),
        ttl=st.sampled_from([30, 90]),
        region=st.sampled_from(["us", "de", None]),
    )
    def stock(self, upstream, ids, ttl, region) -> None:
        """Upsert and mark AVAILABLE at once: with upsert and health drawn apart, random
        sequences almost never had a proxy to extract."""
        self.upsert(upstream, ids, ttl, region, key_shift=0, max_size=100, operation=None)
        now = self.clock.now()
        self.both(
            lambda p: p.apply_health([HealthUpdate(i, ProxyState.AVAILABLE, now) for i in ids])
        )

    @rule(
        ids=st.lists(st.sampled_from(PROXIES), min_size=1, max_size=4, unique=True),
        state=st.sampled_from(
            [ProxyState.AVAILABLE] * 3
            + [ProxyState.SUSPECT, ProxyState.UNHEALTHY, ProxyState.REMOVED, ProxyState.CHECKING]
        ),
        age=st.integers(0, 20),
    )
    def health(self, ids, state, age) -> None:
        checked = self.clock.now() - age * SEC
        self.both(lambda p: p.apply_health([HealthUpdate(i, state, checked) for i in ids]))

    @rule(
        count=st.integers(1, 4),
        mode=st.sampled_from(list(ExtractMode)),
        # A set is "any of these" (a client allowed several that names none): the union of
        # indexes, merged in usable_until order.
        region=st.sampled_from([None, "us", "de", frozenset({"us", "DE"})]),
        upstream=st.sampled_from([None, *UPSTREAMS, frozenset(UPSTREAMS)]),
        key=st.sampled_from([None, None, None, "k1", "k2"]),  # a reused key mostly conflicts
        reserve=st.integers(0, 2),
        max_age=st.sampled_from([None, 5, 60]),
        min_remaining=st.sampled_from([None, 20]),
    )
    def extract(self, count, mode, region, upstream, key, reserve, max_age, min_remaining):
        request = ExtractRequest(
            "c1",
            count,
            mode,
            ExtractFilters(region=region, upstream=upstream),
            idempotency_key=key,
            reserve_for_gateway=reserve,
            max_health_age=None if max_age is None else max_age * SEC,
            min_remaining=None if min_remaining is None else min_remaining * SEC,
        )
        status, result = self.both(lambda p: p.extract(request))
        if status == "ok":
            self.extracted += len(result.proxies)

    @rule(seconds=st.sampled_from([1, 5, 20, 60]))
    def advance(self, seconds) -> None:
        self.clock.advance(seconds * SEC)

    @rule(limit=st.integers(1, 4))
    def sweep(self, limit) -> None:
        # The session part of sweep runs on each store's own clock; compare the records part.
        self.both(
            lambda p: (lambda r: (r.expired, r.quarantines, r.more or r.sessions > 0))(
                p.sweep(limit)
            )
        )

    @rule(pid=st.sampled_from(PROXIES), worker=st.sampled_from(WORKERS), ttl=st.integers(5, 60))
    def assign(self, pid, worker, ttl) -> None:
        self.both(lambda p: p.assign(self.clock.now(), pid, worker, ttl * SEC))

    @rule(worker=st.sampled_from(WORKERS), ttl=st.integers(5, 60), pick=st.integers(0, 9))
    def assign_available(self, worker, ttl, pick) -> None:
        """Assign a proxy the reference holds AVAILABLE and unowned: drawn blindly, an assign
        seldom meets one, and the ownership paths (the holdings revision's) went untried."""
        state = self.memory._state
        free = sorted(
            pid
            for pid, rec in state.records.items()
            if rec.state is ProxyState.AVAILABLE and pid not in state.owners
        )
        if free:
            self.assign(free[pick % len(free)], worker, ttl)

    @rule(
        pick=st.integers(0, 9),
        ttl=st.sampled_from([10, 30, 90]),
        region=st.sampled_from(["us", "de", None]),
    )
    def refresh_held(self, pick, ttl, region) -> None:
        """A provider listing a held proxy again (its own upstream and exit): the record is
        rewritten under its owner, a lease perhaps cut, the holdings revision counted."""
        state = self.memory._state
        held = sorted(pid for pid in state.owners if pid in state.records)
        if not held:
            return
        rec = state.records[held[pick % len(held)]]
        n = int(rec.proxy_id[1:])
        [key] = [i for i in range(10) if unique_key_digest(f"k{i}") == rec.key_digest]
        self.upsert(rec.upstream_id, [rec.proxy_id], ttl, region, (key - n) % 10, 100, None)

    @rule(pid=st.sampled_from(PROXIES), ttl=st.integers(5, 60), wrong=st.booleans())
    def renew(self, pid, ttl, wrong) -> None:
        a = self.memory.get(pid)
        worker, epoch = (a.worker_id, a.epoch + int(wrong)) if a else ("w1", 1)
        self.both(lambda p: p.renew(self.clock.now(), pid, worker, epoch, ttl * SEC))

    @rule(pid=st.sampled_from(PROXIES))
    def begin_drain(self, pid) -> None:
        a = self.memory.get(pid)
        worker, epoch = (a.worker_id, a.epoch) if a else ("w1", 1)
        self.both(lambda p: p.begin_drain(pid, worker, epoch))

    @rule(pid=st.sampled_from(PROXIES), active=st.sampled_from([0, 0, 1]))
    def acknowledge_drain(self, pid, active) -> None:
        a = self.memory.get(pid)
        worker, epoch = (a.worker_id, a.epoch) if a else ("w1", 1)
        self.both(lambda p: p.acknowledge_drain(pid, worker, epoch, active, 0))

    @rule(limit=st.integers(1, 3))
    def expire(self, limit) -> None:
        self.both(lambda p: p.expire(self.clock.now(), limit))

    @rule(worker=st.sampled_from(WORKERS), session=st.sampled_from(["s1", "s2"]))
    def open_session(self, worker, session) -> None:
        # Session expiry times come from each store's own clock: compare what else it says.
        self.both(
            lambda p: (lambda s: (s.session_id, s.issued, s.acked))(
                p.open_session(worker, session, timedelta(minutes=10))
            )
        )
        self.sessions[worker] = session
        self.sequences[worker] = 0

    @rule(
        upstream=st.sampled_from(UPSTREAMS),
        limit=st.integers(1, 4),
        min_remaining=st.sampled_from([0, 20, 60]),
    )
    def assignable(self, upstream, limit, min_remaining) -> None:
        self.both(lambda p: p.assignable(upstream, limit, min_remaining * SEC))

    @rule(worker=st.sampled_from(WORKERS), ack=st.booleans())
    def snapshot(self, worker, ack) -> None:
        view = self.both(lambda p: p.worker_assignments(worker, 10))
        if worker not in self.sessions or view[0] != "ok":
            return
        self.version += 1
        ref = SnapshotRef(self.version, view[1].epoch, f"c{self.version}")
        ids = [a.proxy_id for a in view[1].assignments]
        self.both(lambda p: p.issue_snapshot(worker, self.sessions[worker], ref, ids))
        if ack:
            self.both(
                lambda p: (lambda s: (s.issued, s.acked))(
                    p.acknowledge_snapshot(worker, self.sessions[worker], ref.version)
                )
            )

    @rule(worker=st.sampled_from(WORKERS), busy=st.booleans())
    def report(self, worker, busy) -> None:
        session = self.sessions.get(worker)
        live = self.memory._sessions.get(worker)  # the reference's view picks a plausible body
        if session is None or live is None or live.acked is None:
            return
        view = self.memory.worker_assignments(worker, 10)
        entries = tuple(RuntimeEntry(a.proxy_id, a.epoch, int(busy), 0) for a in view.assignments)
        sequence = self.sequences[worker] + 1
        report = RuntimeReport(
            worker, session, sequence, live.acked.version, live.acked.epoch, entries
        )
        if self.both(lambda p: p.write_report(report))[0] == "ok":
            self.sequences[worker] = sequence

    @rule(
        pid=st.sampled_from(PROXIES),
        client=st.sampled_from(["c1", "c1", "c2"]),
        outcome=st.sampled_from(list(Outcome)),
        host=st.sampled_from([None, "a.example"]),
        quarantine=st.sampled_from([0, 30, 120]),
        taken=st.booleans(),
    )
    def report_outcome(self, pid, client, outcome, host, quarantine, taken=False) -> None:
        extracted = sorted(r.proxy_id for r in self.memory._records.values() if r.extracted_by)
        if taken and extracted:  # the reference's view picks a proxy that was extracted
            pid = extracted[PROXIES.index(pid) % len(extracted)]
        report = OutcomeReport(
            client, pid, outcome, self.clock.now(), target_host=host, quarantine=quarantine * SEC
        )
        self.both(lambda p: p.report_outcome(report))

    @rule(
        pid=st.sampled_from(PROXIES),
        key=st.integers(0, 9),
        outcome=st.sampled_from([Outcome.BANNED, Outcome.BANNED, Outcome.OK]),
        host=st.sampled_from([None, "a.example"]),
        quarantine=st.sampled_from([30, 120]),
    )
    def use_and_report(self, pid, key, outcome, host, quarantine) -> None:
        """Stock one proxy, extract and report: random sequences seldom reach an extracted
        proxy otherwise, and a quarantined exit coming back needs one."""
        now = self.clock.now()
        proxy = FetchedProxy(pid, f"k{key}", "10.0.0.1", 80, "http", now + 30 * SEC)
        self.both(lambda p: p.upsert_fetched(FetchedBatch("u1", [proxy], 100, 5 * SEC, now)))
        self.both(lambda p: p.apply_health([HealthUpdate(pid, ProxyState.AVAILABLE, now)]))
        request = ExtractRequest("c1", 1, filters=ExtractFilters(upstream="u1"))
        status, result = self.both(lambda p: p.extract(request))
        if status == "ok" and result.proxies:
            self.report_outcome(result.proxies[0].proxy_id, "c1", outcome, host, quarantine)

    @rule(ids=st.lists(st.sampled_from(PROXIES), max_size=4, unique=True))
    def quarantine_of(self, ids) -> None:
        self.both(lambda p: p.quarantine_of(ids, self.clock.now()))

    @rule(
        upstream=st.sampled_from(UPSTREAMS),
        interval=st.sampled_from([1, 5, 20]),
        fraction=st.sampled_from([1, 3, 10]),
        min_remaining=st.sampled_from([0, 20]),
        limit=st.integers(1, 4),
        later=st.sampled_from([0, 5, 30, 60]),
        available=st.sampled_from([True, True, False]),
    )
    def take_due_checks(
        self, upstream, interval, fraction, min_remaining, limit, later, available
    ) -> None:
        # Proxies here live 10-90 s: seconds, not the defaults' minutes. The caller's "now"
        # may lie ahead of the clock (a listing names its own instant), so checks have aged.
        policy = RecheckPolicy(interval * SEC, fraction, min_remaining * SEC, available)
        now = self.clock.now() + later * SEC
        status, result = self.both(lambda p: p.take_due_checks(upstream, now, policy, limit))
        if status == "ok":
            self.due += len(result.checks)

    @rule(pid=st.sampled_from(PROXIES))
    def get(self, pid) -> None:
        self.both(lambda p: p.get(pid))

    def teardown(self) -> None:
        # Sequences that hand proxies out reach more of extract's, ownership's and outcome's
        # paths; without a target most random sequences extract nothing.
        if hasattr(self, "memory"):
            target(float(self.extracted), label="proxies extracted")
            target(float(self.due), label="proxies due for a recheck")

    @invariant()
    def recheck_indexes_agree(self) -> None:
        """The checks index is not read whole by any port, and what is left in it decides
        later answers: members and scores must agree on both sides at every step."""
        if not hasattr(self, "memory"):
            return
        for upstream in UPSTREAMS:
            zset = self.memory._state.checkable.get(upstream)
            mine = [] if zset is None else zset.first(10_000)
            key = f"{self.redis.options.prefix}:{{activity}}:checks:{upstream}"
            theirs = [(m.decode(), int(score)) for m, score in
                      self.redis_client.zrange(key, 0, -1, withscores=True)]  # fmt: skip
            assert mine == theirs, upstream

    @invariant()
    def counts_agree(self) -> None:
        if not hasattr(self, "memory"):
            return
        for upstream in UPSTREAMS:
            self.both(lambda p, u=upstream: p.inventory(u))
            self.both(lambda p, u=upstream: p.upstream_inventory(u))
            self.both(lambda p, u=upstream: p.extractable(u))
        for worker in WORKERS:
            self.both(lambda p, w=worker: p.drain_tickets(w, 10))
            self.both(lambda p, w=worker: _revision(p, w))
            self.both(lambda p, w=worker: p.worker_assignments(w, 10))  # with its revision
            self.both(
                lambda p, w=worker: (lambda r: r and (r.sequence, r.entries))(p.read_runtime(w))
            )


def test_memory_and_redis_agree(redis_url):
    Differential.redis_url = redis_url
    run_machine(Differential, steps=40)
