"""Contract: outcome reports and the quarantine of banned exits (issue 5, "outcome")."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from activity.contract.harness import PoolFactory, PoolHarness, ids
from activity.errors import InvalidBatch, InvalidRequest, OutcomeRejected, ScanBudgetExhausted
from activity.types import Outcome, OutcomeReport, OutcomeResult, PoolOptions

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
BANNED = Outcome.BANNED


def report(
    h: PoolHarness,
    proxy_id: str,
    outcome: Outcome = Outcome.OK,
    *,
    client: str = "c1",
    host: str | None = None,
    quarantine: timedelta | None = 10 * MIN,
) -> OutcomeResult:
    return h.pool.report_outcome(
        OutcomeReport(client, proxy_id, outcome, h.now, target_host=host, quarantine=quarantine)
    )


def rejected(h: PoolHarness, proxy_id: str, *args: object, **kwargs: object) -> str | None:
    with pytest.raises(OutcomeRejected) as err:
        report(h, proxy_id, *args, **kwargs)  # type: ignore[arg-type]
    return err.value.reason


def extracted(h: PoolHarness, *proxy_ids: str, client: str = "c1", **kwargs: object) -> None:
    h.stock(*proxy_ids, **kwargs)
    assert sorted(ids(h.take(len(proxy_ids), client=client))) == sorted(proxy_ids)


class TestOutcome:
    def test_only_the_extracting_client_may_report(self, make_pool: PoolFactory):
        """Outcome: only the client that extracted the proxy reports on it; to anyone else
        an unknown, unextracted or foreign proxy is the same not_found."""
        h = make_pool()
        extracted(h, "p1")
        h.stock("p2")
        assert rejected(h, "p1", client="c2") == "not_found"
        assert rejected(h, "p2") == "not_found"
        assert rejected(h, "nope") == "not_found"
        result = report(h, "p1", Outcome.TIMEOUT, host="example.com")
        assert result == OutcomeResult("p1", "u1", Outcome.TIMEOUT, "example.com", False, None)
        assert rejected(h, "p1", Outcome.TIMEOUT, client="c2", host="example.com") == "not_found"

    def test_no_report_once_the_record_is_past_its_hard_expiry(self, make_pool: PoolFactory):
        """Outcome: only while the pool holds the record (before hard expiry or sweep)."""
        h = make_pool()
        extracted(h, "p1", "p2", ttl=MIN)
        h.advance(MIN)
        assert rejected(h, "p1") == "not_found"
        h.pool.sweep(10)
        assert rejected(h, "p2") == "not_found"

    def test_the_same_report_again_replays_and_changes_nothing(self, make_pool: PoolFactory):
        """Outcome: one outcome per proxy; the same outcome and host again is a replay."""
        h = make_pool()
        extracted(h, "p1")
        first = report(h, "p1", BANNED, host="example.com")
        assert first.quarantined_until == h.now + 10 * MIN
        h.advance(MIN)
        again = report(h, "p1", BANNED, host="EXAMPLE.com", quarantine=20 * MIN)
        assert again == replace(first, replayed=True)  # the first end stands

    def test_another_outcome_for_the_same_proxy_conflicts(self, make_pool: PoolFactory):
        """Outcome: a different outcome, or the same one for another host, is a conflict."""
        h = make_pool()
        extracted(h, "p1", "p2")
        report(h, "p1", Outcome.OK)
        assert rejected(h, "p1", BANNED) == "conflict"
        assert rejected(h, "p1", Outcome.OK, host="example.com") == "conflict"
        report(h, "p2", BANNED, host="a.example")
        assert rejected(h, "p2", BANNED, host="b.example") == "conflict"
        assert rejected(h, "p2", BANNED) == "conflict"
        assert h.pool.quarantine_of(["p2"], h.now) == {"p2": frozenset({"a.example"})}

    def test_a_ban_without_host_refuses_the_exit_until_it_ends(self, make_pool: PoolFactory):
        """Quarantine: a banned exit ("*") is not admitted again, under any proxy ID, until
        reported_at + quarantine; then it is."""
        h = make_pool()
        extracted(h, "p1", ttl=MIN)
        result = report(h, "p1", BANNED, quarantine=10 * MIN)
        assert (result.target_host, result.quarantined_until) == (None, h.now + 10 * MIN)
        h.advance(2 * MIN)  # the record is gone; its exit comes back under new IDs
        again = h.upsert([h.proxy("p9", unique_key="key-p1"), h.proxy("q1")])
        assert (again.inserted, again.quarantined, again.conflicts) == (1, 1, 0)
        assert h.upsert([h.proxy("p1")]).quarantined == 1
        assert h.pool.inventory("u1") == 1
        h.advance(8 * MIN)
        later = h.upsert([h.proxy("p9", unique_key="key-p1")])
        assert (later.inserted, later.quarantined) == (1, 0)
        assert h.pool.inventory("u1") == 2

    def test_a_ban_for_one_host_does_not_refuse_the_exit(self, make_pool: PoolFactory):
        """Quarantine: a host-specific ban keeps the exit in the pool; the reconciler learns
        the host from quarantine_of."""
        h = make_pool()
        extracted(h, "p1", ttl=MIN)
        report(h, "p1", BANNED, host="Shop.Example.")
        h.advance(2 * MIN)
        result = h.upsert([h.proxy("p9", unique_key="KEY-P1")])
        assert (result.inserted, result.quarantined) == (1, 0)
        assert h.pool.quarantine_of(["p9"], h.now) == {"p9": frozenset({"shop.example"})}

    def test_quarantine_of_names_live_proxies_with_live_quarantines(self, make_pool: PoolFactory):
        """quarantine_of: only given, live proxies whose exit has a quarantine not yet ended."""
        h = make_pool()
        extracted(h, "a1", "a2", "a3", ttl=MIN)
        report(h, "a1", BANNED, host="x.example", quarantine=5 * MIN)
        report(h, "a2", BANNED, host="y.example", quarantine=20 * MIN)
        report(h, "a3", Outcome.OK)
        h.advance(2 * MIN)
        h.stock("b1")  # a fresh exit
        h.upsert(
            [
                h.proxy("n1", unique_key="key-a1"),
                h.proxy("n2", unique_key="key-a2"),
                h.proxy("n3", unique_key="key-a3"),
            ]
        )
        asked = ["n1", "n2", "n3", "b1", "unknown", "a1"]
        assert h.pool.quarantine_of(asked, h.now) == {
            "n1": frozenset({"x.example"}),
            "n2": frozenset({"y.example"}),
        }
        assert h.pool.quarantine_of(asked, h.now + 4 * MIN) == {"n2": frozenset({"y.example"})}
        assert h.pool.quarantine_of([], h.now) == {}

    def test_every_host_and_one_host_on_one_exit(self, make_pool: PoolFactory):
        """quarantine_of: "*" stands for every host, next to host-specific entries."""
        h = make_pool()
        extracted(h, "p1", ttl=MIN)
        report(h, "p1", BANNED, host="a.example", quarantine=30 * MIN)
        h.advance(2 * MIN)
        extracted(h, "p2", unique_key="key-p1", ttl=MIN)
        report(h, "p2", BANNED, quarantine=5 * MIN)
        assert h.pool.quarantine_of(["p2"], h.now) == {"p2": frozenset({"*", "a.example"})}

    def test_a_longer_quarantine_of_the_same_exit_and_host_stands(self, make_pool: PoolFactory):
        """Quarantine: a later, shorter ban never shortens one that is running."""
        h = make_pool()
        extracted(h, "p1", ttl=MIN)
        first = report(h, "p1", BANNED, host="a.example", quarantine=30 * MIN)
        h.advance(2 * MIN)
        extracted(h, "p2", unique_key="key-p1")
        second = report(h, "p2", BANNED, host="a.example", quarantine=5 * MIN)
        assert second.quarantined_until == first.quarantined_until

    def test_zero_quarantine_records_the_ban_only(self, make_pool: PoolFactory):
        """Quarantine: a zero quarantine stores the outcome and quarantines nothing."""
        h = make_pool()
        extracted(h, "p1", ttl=MIN)
        assert report(h, "p1", BANNED, quarantine=timedelta(0)).quarantined_until is None
        h.advance(2 * MIN)
        assert h.upsert([h.proxy("p1")]).inserted == 1

    def test_no_quarantine_asked_means_the_pools_default(self, make_pool: PoolFactory):
        """Quarantine: OutcomeReport.quarantine None is PoolOptions.default_quarantine."""
        h = make_pool(options=PoolOptions(default_quarantine=3 * MIN))
        extracted(h, "p1")
        assert report(h, "p1", BANNED, quarantine=None).quarantined_until == h.now + 3 * MIN

    def test_ended_quarantines_are_swept_in_bounded_steps(self, make_pool: PoolFactory):
        """Sweep: ended quarantines leave in batches of at most `limit`, like records."""
        h = make_pool()
        names = [f"p{i}" for i in range(5)]
        extracted(h, *names, ttl=MIN)
        for pid in names:
            report(h, pid, BANNED, quarantine=5 * MIN)
        h.advance(6 * MIN)
        results = [h.pool.sweep(2) for _ in range(4)]
        assert [(r.expired, r.quarantines, r.more) for r in results] == [
            (2, 2, True),
            (2, 2, True),
            (1, 1, False),
            (0, 0, False),
        ]
        assert h.upsert([h.proxy(pid) for pid in names]).inserted == 5

    def test_quarantine_of_fails_closed_over_its_scan_budget(self, make_pool: PoolFactory):
        """Bounded everything: more quarantine entries than one read may examine is refused."""
        h = make_pool(options=PoolOptions(scan_budget=2))
        for pid in ("p1", "p2", "p3"):
            extracted(h, pid)
            report(h, pid, BANNED, host="a.example")
        assert len(h.pool.quarantine_of(["p1", "p2"], h.now)) == 2
        with pytest.raises(ScanBudgetExhausted):
            h.pool.quarantine_of(["p1", "p2", "p3"], h.now)


_HOSTS = [
    ("Example.COM", "example.com"),
    ("example.com.", "example.com"),
    ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("10.0.0.1", "10.0.0.1"),
    ("[2001:DB8:0::1]", "2001:db8::1"),
    ("2001:db8::1", "2001:db8::1"),
    ("_dmarc.example", "_dmarc.example"),
]

_BAD_REPORTS = {
    "empty client": {"client_id": ""},
    "client with space": {"client_id": "c 1"},
    "proxy with space": {"proxy_id": "p 1"},
    "long proxy id": {"proxy_id": "p" * 257},
    "outcome as text": {"outcome": "banned"},
    "naive reported_at": {"reported_at": datetime(2026, 1, 1)},  # noqa: DTZ001 - deliberately
    "reported_at in the future": {"reported_at": "future"},
    "scheme": {"target_host": "https://example.com"},
    "port": {"target_host": "example.com:443"},
    "path": {"target_host": "example.com/x"},
    "space": {"target_host": "exa mple.com"},
    "every host": {"target_host": "*"},
    "separator": {"target_host": "a|b.example"},
    "empty host": {"target_host": ""},
    "too long host": {"target_host": "a." * 126 + "com"},
    "unicode host": {"target_host": "bücher.example"},
    "bracketed name": {"target_host": "[example.com]"},
    "numeric last label": {"target_host": "999.1.1.1"},
    "negative quarantine": {"quarantine": -SEC},
    "quarantine over the maximum": {"quarantine": timedelta(days=8)},
    "quarantine as seconds": {"quarantine": 60},
}


class TestOutcomeInput:
    @pytest.mark.parametrize(("given", "stored"), _HOSTS)
    def test_target_hosts_are_stored_in_one_normal_form(self, make_pool, given, stored):
        """Input: host names lowercased without a trailing dot; IPs compressed."""
        h = make_pool()
        extracted(h, "p1")
        assert report(h, "p1", BANNED, host=given).target_host == stored
        assert report(h, "p1", BANNED, host=stored).replayed

    @pytest.mark.parametrize("case", sorted(_BAD_REPORTS))
    def test_bad_reports_raise_and_change_nothing(self, make_pool: PoolFactory, case: str):
        """Input: a malformed report is refused before the store is touched."""
        h = make_pool()
        extracted(h, "p1")
        fields: dict[str, object] = {
            "client_id": "c1",
            "proxy_id": "p1",
            "outcome": BANNED,
            "reported_at": h.now,
            "target_host": None,
            "quarantine": 5 * MIN,
        }
        fields.update(_BAD_REPORTS[case])
        if fields["reported_at"] == "future":
            fields["reported_at"] = h.now + 2 * MIN
        with pytest.raises(InvalidRequest):
            h.pool.report_outcome(OutcomeReport(**fields))  # type: ignore[arg-type]
        assert report(h, "p1", BANNED).replayed is False
        with pytest.raises(InvalidRequest):
            h.pool.report_outcome("p1")  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "proxy_ids",
        ["p1", ("p1", ""), ["p 1"], [1], [f"p{i}" for i in range(1_001)], {"p1"}],
    )
    def test_bad_quarantine_queries_raise(self, make_pool: PoolFactory, proxy_ids):
        """Input: quarantine_of takes a bounded list of proxy IDs."""
        h = make_pool()
        with pytest.raises(InvalidBatch):
            h.pool.quarantine_of(proxy_ids, h.now)

    def test_quarantine_of_needs_an_aware_time(self, make_pool: PoolFactory):
        """Input: datetimes are timezone-aware UTC."""
        h = make_pool()
        with pytest.raises(InvalidBatch):
            h.pool.quarantine_of(["p1"], datetime(2026, 1, 1))  # noqa: DTZ001 - deliberately
        assert h.pool.quarantine_of(["p1"], datetime(2026, 1, 1, tzinfo=UTC)) == {}
