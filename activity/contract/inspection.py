"""Contract: the console's reads (port PoolInspector): bounded pages in expiry order with a
cursor, filters, partial pages when the budget runs out, one proxy whole; nothing changes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from activity.contract.harness import PoolFactory
from activity.contract.runtime import _World
from activity.errors import InvalidRequest
from activity.inspection import MAX_PAGE, BrowseCursor, BrowseQuery
from activity.types import HealthUpdate, ProxyState

MIN = timedelta(minutes=1)


def ids(page) -> list[str]:
    return [p.proxy_id for p in page.proxies]


def every_page(h, **query) -> tuple[list[str], int]:
    """Every proxy the query finds, page after page, and how many pages it took."""
    found, after, pages = [], None, 0
    while True:
        page = h.pool.browse(BrowseQuery(after=after, **query))
        found += ids(page)
        pages += 1
        if page.next is None:
            return found, pages
        after = page.next
        assert pages < 100


class TestBrowse:
    def test_pages_go_in_expiry_order_and_the_cursor_goes_on(self, make_pool: PoolFactory):
        h = make_pool()
        for i in range(7):  # one upsert each: hard expiries a second apart, p0 first
            h.upsert([h.proxy(f"p{i}", ttl=10 * MIN + i * timedelta(seconds=1))])
        first = h.pool.browse(BrowseQuery(limit=3))
        assert ids(first) == ["p0", "p1", "p2"] and not first.partial
        assert first.next == BrowseCursor(
            int(first.proxies[-1].expires_at.timestamp() * 1000), "p2"
        )
        second = h.pool.browse(BrowseQuery(limit=3, after=first.next))
        assert ids(second) == ["p3", "p4", "p5"]
        last = h.pool.browse(BrowseQuery(limit=3, after=second.next))
        assert ids(last) == ["p6"] and last.next is None
        assert every_page(h, limit=2) == ([f"p{i}" for i in range(7)], 4)

    def test_ties_in_expiry_go_by_id_and_a_cursor_whose_proxy_left_still_goes_on(
        self, make_pool: PoolFactory
    ):
        h = make_pool()
        h.stock(*[f"p{i}" for i in range(6)])  # one batch: one hard expiry for all
        first = h.pool.browse(BrowseQuery(limit=2))
        assert ids(first) == ["p0", "p1"]
        # p1 is listed again with a longer life: its index entry moves, the cursor's is gone.
        h.upsert([h.proxy("p1", ttl=20 * MIN)])
        rest = h.pool.browse(BrowseQuery(limit=10, after=first.next))
        assert ids(rest) == ["p2", "p3", "p4", "p5", "p1"]
        assert rest.examined == 6  # p0 (tied with the cursor, before it) is skipped and counted

    def test_filters_and_the_state_the_pool_counts(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a1", "a2", "a3", region="us")
        h.stock("e1", region="eu", protocol="socks5")
        h.stock("b1", upstream="u2", region="us")
        h.upsert([h.proxy("f1")])  # FETCHED
        taken = h.take(1, region="us", upstream="u1").proxies[0].proxy_id
        assign = h.pool.assign(h.now, "a3" if taken != "a3" else "a2", "w1", 5 * MIN)
        h.pool.begin_drain(assign.proxy_id, "w1", assign.epoch)
        assert sorted(every_page(h, upstream="u2")[0]) == ["b1"]
        assert sorted(every_page(h, region="eu")[0]) == ["e1"]
        assert sorted(every_page(h, protocol="socks5")[0]) == ["e1"]
        assert every_page(h, state=ProxyState.FETCHED)[0] == ["f1"]
        assert every_page(h, state=ProxyState.EXTRACTED)[0] == [taken]
        assert every_page(h, state=ProxyState.DRAINING)[0] == [assign.proxy_id]
        [row] = h.pool.browse(BrowseQuery(state=ProxyState.DRAINING)).proxies
        assert (row.worker_id, row.extracted_by) == ("w1", None)
        [row] = h.pool.browse(BrowseQuery(state=ProxyState.EXTRACTED)).proxies
        assert (row.extracted_by, row.worker_id, row.upstream_id) == ("c1", None, "u1")
        assert row.checked_at == h.now and row.fetched_at == h.now

    def test_vendor_labels_are_listed_as_sent_and_filtered_in_any_case(
        self, make_pool: PoolFactory
    ):
        h = make_pool()
        h.stock("gz", region="广东省广州市", carrier="电信")
        h.stock("us", region="United States", carrier="AT&T Mobility")
        assert every_page(h, region="united STATES")[0] == ["us"]
        assert every_page(h, carrier="at&t mobility")[0] == ["us"]
        assert every_page(h, region="广东省广州市", carrier="电信")[0] == ["gz"]
        [row] = h.pool.browse(BrowseQuery(region="UNITED STATES")).proxies
        assert (row.region, row.carrier) == ("United States", "AT&T Mobility")

    def test_a_budget_spent_before_the_page_is_full_says_partial_and_goes_on(
        self, make_pool: PoolFactory
    ):
        h = make_pool()
        for i in range(5):
            h.upsert([h.proxy(f"x{i}", region="us", ttl=10 * MIN + i * timedelta(seconds=1))])
        h.upsert([h.proxy("eu1", region="eu", ttl=20 * MIN)])
        page = h.pool.browse(BrowseQuery(region="eu", budget=3))
        assert (ids(page), page.partial, page.examined) == ([], True, 3)
        assert page.next is not None
        rest = h.pool.browse(BrowseQuery(region="eu", budget=3, after=page.next))
        assert (ids(rest), rest.partial) == (["eu1"], False)

    def test_expired_records_are_not_listed_and_nothing_changes(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("old", ttl=MIN)
        h.stock("live", ttl=10 * MIN)
        h.advance(2 * MIN)
        assert every_page(h)[0] == ["live"]
        assert h.pool.sweep(10).expired == 1  # the read removed nothing: the sweep still does

    def test_no_password_and_a_login_only_as_a_hint(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a")
        [row] = h.pool.browse(BrowseQuery()).proxies
        assert not hasattr(row, "password")
        assert row.username_hint is None  # the harness's proxies have no login

    @pytest.mark.parametrize(
        "query",
        [
            BrowseQuery(limit=0),
            BrowseQuery(limit=MAX_PAGE + 1),
            BrowseQuery(budget=0),
            BrowseQuery(upstream="has space"),
            BrowseQuery(region=""),
            BrowseQuery(state="available"),  # type: ignore[arg-type]
            BrowseQuery(after=BrowseCursor(-1, "p")),
            BrowseQuery(after=BrowseCursor(1, "")),
            "not a query",
        ],
    )
    def test_bad_queries_are_refused(self, make_pool: PoolFactory, query):
        with pytest.raises(InvalidRequest):
            make_pool().pool.browse(query)

    def test_a_cursor_reads_back_from_its_token(self):
        cursor = BrowseCursor(1_796_000_000_000, "acme:p-1")
        assert BrowseCursor.parse(cursor.token()) == cursor
        for bad in ("", "x.y", "123", "1" * 15 + ".p", "12.has space"):
            with pytest.raises(InvalidRequest):
                BrowseCursor.parse(bad)


class TestProxyDetail:
    def test_a_proxy_whole_with_its_health_and_owner(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a", "b")
        assignment = h.pool.assign(h.now, "a", "w1", 5 * MIN)
        detail = h.pool.proxy_detail("a")
        assert detail is not None
        assert (detail.summary.state, detail.summary.worker_id) == (ProxyState.AVAILABLE, "w1")
        assert detail.assignment == assignment
        assert (detail.last_success_at, detail.latency_ms) == (h.now, 50)
        assert detail.max_concurrency == 4 and detail.failure_reason is None
        h.pool.apply_health([h_update(h, "b", ProxyState.UNHEALTHY, reason="refused")])
        failed = h.pool.proxy_detail("b")
        assert failed is not None
        assert (failed.summary.state, failed.failure_reason) == (ProxyState.UNHEALTHY, "refused")

    def test_none_for_a_proxy_never_held_or_past_its_expiry(self, make_pool: PoolFactory):
        h = make_pool()
        h.stock("a", ttl=MIN)
        assert h.pool.proxy_detail("nope") is None
        h.advance(2 * MIN)
        assert h.pool.proxy_detail("a") is None
        with pytest.raises(InvalidRequest):
            h.pool.proxy_detail("")


def h_update(h, pid: str, state: ProxyState, reason: str | None = None) -> HealthUpdate:
    h.advance(timedelta(seconds=1))
    return HealthUpdate(pid, state, h.now, None, reason)


class TestWorkerSessions:
    def test_live_sessions_with_their_fresh_reports_and_counts(self, make_pool: PoolFactory):
        h = make_pool()
        w1 = _World(h, "p1", "p2", "p3")
        h.pool.begin_drain("p3", "w1", w1.assignments["p3"].epoch)
        h.pool.write_report(w1.report(w1.entry("p1", active=1)))
        h.pool.open_session("w2", "s2", 2 * MIN)
        live = h.pool.worker_sessions(10)
        assert live.complete
        by_worker = {w.session.worker_id: w for w in live.workers}
        assert set(by_worker) == {"w1", "w2"}
        one = by_worker["w1"]
        assert (one.assigned, one.draining) == (2, 1)
        assert one.session.acked == w1.ref and one.runtime is not None
        assert one.runtime.sequence == 1 and one.runtime.reported_at is not None
        assert one.runtime.expires_at - one.runtime.reported_at == h.options.report_ttl
        two = by_worker["w2"]
        assert (two.runtime, two.assigned, two.draining, two.session.acked) == (None, 0, 0, None)
        # The soonest to expire first, and a limit that leaves some out says so.
        assert [w.session.worker_id for w in live.workers] == ["w2", "w1"]
        first = h.pool.worker_sessions(1)
        assert (len(first.workers), first.complete) == (1, False)
        [ticket] = h.pool.drain_tickets("w1", 10)
        assert ticket.began_at is not None and ticket.began_at <= one.runtime.reported_at

    def test_an_ended_session_is_not_listed(self, make_pool: PoolFactory):
        h = make_pool()
        h.pool.open_session("w1", "s1", timedelta(milliseconds=500))
        h.advance_server(timedelta(milliseconds=600))
        assert h.pool.worker_sessions(10).workers == ()

    @pytest.mark.parametrize("limit", [0, -1, 10**9, "3"])
    def test_bad_limits(self, make_pool: PoolFactory, limit):
        with pytest.raises(InvalidRequest):
            make_pool().pool.worker_sessions(limit)


__all__ = ["TestBrowse", "TestProxyDetail", "TestWorkerSessions"]
