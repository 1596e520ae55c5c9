"""The worker's control client (gateway_runtime/control_client.py) against answers a real
control plane does not give: an unreachable one, an oversized or tampered snapshot, a body
that is not a problem. Each is a ControlError or a WireError, and nothing is installed.

And its reports against a scripted control plane: the traffic taken once and sent until a
report with it is accepted (a lost answer, a refusal, a new session), never twice."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from gateway_runtime import control_client
from gateway_runtime.control_client import ControlClient, ControlError
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.traffic import TrafficCounter
from gateway_runtime.wire import Snapshot, WireChecksumError, decode_report, seal_snapshot

SESSION = {
    "session_id": "s1",
    "generation": 1,
    "expires_at": "2026-12-03T12:00:00Z",
    "heartbeat_interval_s": 10,
    "snapshot_interval_s": 2,
    "report_interval_s": 5,
    "max_staleness_s": 30,
}


def client_answering(snapshot_answer: httpx.Response) -> tuple[ControlClient, SnapshotStore]:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/sessions"):
            return httpx.Response(200, json=SESSION)
        return snapshot_answer

    store = SnapshotStore(lambda: datetime.now(UTC))
    transport = httpx.MockTransport(handle)
    return ControlClient("http://control", "pw_x", store, transport=transport), store


def run(coroutine):
    return asyncio.run(coroutine)


def sealed_bytes() -> bytes:
    snapshot = Snapshot(1, 1, datetime.now(UTC), timedelta(seconds=30))
    return seal_snapshot(snapshot).data


def test_a_tampered_snapshot_is_never_installed():
    data = sealed_bytes().replace(b'"epoch":1', b'"epoch":2')
    client, store = client_answering(httpx.Response(200, content=data))

    async def scenario() -> None:
        await client.open_session()
        with pytest.raises(WireChecksumError):
            await client.refresh_snapshot()
        await client.close()

    run(scenario())
    assert store.view() is None


def test_an_oversized_answer_is_refused_unread(monkeypatch):
    monkeypatch.setattr(control_client, "MAX_SNAPSHOT_BYTES", 100)
    client, store = client_answering(httpx.Response(200, content=b"x" * 1000))

    async def scenario() -> None:
        await client.open_session()
        with pytest.raises(ControlError) as refused:
            await client.refresh_snapshot()
        assert refused.value.code == "unexpected_answer"
        await client.close()

    run(scenario())
    assert store.view() is None


def test_a_refusal_is_its_problem_code_and_anything_else_unexpected():
    problem = httpx.Response(
        409,
        content=json.dumps({"code": "session_fenced"}).encode(),
        headers={"Content-Type": "application/problem+json"},
    )
    client, _ = client_answering(problem)
    html, _ = client_answering(httpx.Response(502, content=b"<html>bad gateway</html>"))

    async def scenario() -> None:
        for one, code in ((client, "session_fenced"), (html, "unexpected_answer")):
            await one.open_session()
            with pytest.raises(ControlError) as refused:
                await one.refresh_snapshot()
            assert refused.value.code == code
            await one.close()

    run(scenario())


def test_an_unreachable_control_plane_is_a_control_error():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    store = SnapshotStore(lambda: datetime.now(UTC))
    client = ControlClient("http://control", "pw_x", store, transport=httpx.MockTransport(refuse))

    async def scenario() -> None:
        with pytest.raises(ControlError) as refused:
            await client.open_session()
        assert refused.value.code == "unreachable"
        stop = asyncio.Event()
        task = asyncio.create_task(client.run(stop, max_backoff=0.2))
        await asyncio.sleep(0.5)  # retries with backoff, never raises
        stop.set()
        await task
        await client.close()

    run(scenario())


# --- reports: the traffic taken once, sent until accepted -----------------------------------


class ControlPlane:
    """A control plane's answers, scripted per report: "ok" (accepted), "lost" (accepted, the
    answer lost on the way), or a problem code (refused: 409). Every body it accepted is kept
    by sequence, and a replay (the same sequence and body) is answered as one."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.session = dict(SESSION)
        self.accepted: dict[int, bytes] = {}
        self.sent: list[bytes] = []
        self.snapshot = sealed_bytes()

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/sessions"):
            return httpx.Response(200, json=self.session)
        if path.endswith("/snapshot"):
            return httpx.Response(200, content=self.snapshot, headers={"ETag": '"e1"'})
        if path.endswith("/ack"):
            return httpx.Response(200, json={})
        body = request.content
        self.sent.append(body)
        sequence = decode_report(body).report_sequence
        if self.accepted.get(sequence) == body:
            return httpx.Response(200, json={"replayed": True, "released": []})
        what = self.script.pop(0) if self.script else "ok"
        if what in ("ok", "lost"):
            self.accepted[sequence] = body
            if what == "lost":
                raise httpx.ReadError("answer lost", request=request)
            return httpx.Response(200, json={"replayed": False, "released": []})
        return httpx.Response(
            409,
            content=json.dumps({"code": what}).encode(),
            headers={"Content-Type": "application/problem+json"},
        )

    def counted(self) -> dict[tuple[str, str], int]:
        """Requests per pair over the accepted reports (each sequence once)."""
        totals: dict[tuple[str, str], int] = {}
        for body in self.accepted.values():
            for t in decode_report(body).traffic:
                totals[(t.client, t.upstream)] = totals.get((t.client, t.upstream), 0) + t.requests
        return totals


def reporting_client(plane: ControlPlane) -> tuple[ControlClient, SnapshotStore, TrafficCounter]:
    store = SnapshotStore(lambda: datetime.now(UTC))
    counter = TrafficCounter()
    transport = httpx.MockTransport(plane.handle)
    client = ControlClient("http://control", "pw_x", store, transport=transport, traffic=counter)
    return client, store, counter


def test_a_report_whose_answer_was_lost_is_sent_again_unchanged_and_counted_once():
    plane = ControlPlane()
    client, _, counter = reporting_client(plane)
    plane.script = ["lost"]

    async def scenario() -> None:
        await client.open_session()
        await client.refresh_snapshot()
        counter.record("shop", "u1").requests += 3
        with pytest.raises(ControlError) as lost:
            await client.send_report()
        assert lost.value.code == "unreachable"
        counter.record("shop", "u1").requests += 4  # waits for the next report
        assert await client.send_report() is True  # the same body: a replay
        assert plane.sent[1] == plane.sent[0]
        assert await client.send_report() is True
        await client.close()

    run(scenario())
    assert sorted(plane.accepted) == [1, 2]
    assert plane.counted() == {("shop", "u1"): 7}


def test_a_refused_report_is_built_again_with_the_same_traffic():
    plane = ControlPlane()
    client, _, counter = reporting_client(plane)
    plane.script = ["stale_snapshot"]

    async def scenario() -> None:
        await client.open_session()
        await client.refresh_snapshot()
        counter.record("shop", "u1").requests += 2
        with pytest.raises(ControlError) as refused:
            await client.send_report()
        assert refused.value.code == "stale_snapshot"
        newer = Snapshot(2, 3, datetime.now(UTC), timedelta(seconds=30))
        plane.snapshot = seal_snapshot(newer).data
        assert await client.refresh_snapshot() is True
        assert await client.send_report() is True
        await client.close()

    run(scenario())
    first, second = (decode_report(b) for b in plane.sent)
    assert (first.report_sequence, first.snapshot_version) == (1, 1)
    assert (second.report_sequence, second.snapshot_version) == (1, 2)  # built afresh
    assert second.traffic == first.traffic
    assert plane.counted() == {("shop", "u1"): 2}


def test_a_new_session_carries_the_pending_traffic_in_its_first_report():
    plane = ControlPlane()
    client, _, counter = reporting_client(plane)
    plane.script = ["ok", "session_fenced"]

    async def scenario() -> None:
        await client.open_session()
        await client.refresh_snapshot()
        counter.record("shop", "u1").requests += 5
        assert await client.send_report() is True  # sequence 1: those 5
        counter.record("shop", "u1").requests += 6
        with pytest.raises(ControlError):
            await client.send_report()
        plane.session = {**SESSION, "session_id": "s2", "generation": 2}
        plane.accepted.clear()  # the new session's sequence starts again
        await client.open_session()
        await client.refresh_snapshot()
        counter.record("crawler", "u1").requests += 1  # the report after carries this
        assert await client.send_report() is True
        assert await client.send_report() is True
        await client.close()

    run(scenario())
    carried, after = (decode_report(plane.accepted[s]) for s in (1, 2))
    assert carried.report_sequence == 1
    assert [(t.client, t.requests) for t in carried.traffic] == [("shop", 6)]
    assert [(t.client, t.requests) for t in after.traffic] == [("crawler", 1)]


def test_a_refused_snapshot_is_logged_and_reported_once(caplog):
    plane = ControlPlane()
    client, store, _ = reporting_client(plane)

    async def scenario() -> None:
        await client.open_session()
        await client.refresh_snapshot()
        client._etag = None  # the same version again: the store refuses it
        assert await client.refresh_snapshot() is False
        assert await client.send_report() is True
        assert await client.send_report() is True
        await client.close()

    with caplog.at_level("WARNING", logger="gateway_runtime.control_client"):
        run(scenario())
    assert store.refusals == 1
    assert [decode_report(plane.accepted[s]).refused_snapshots for s in (1, 2)] == [1, 0]
    assert "snapshot version 1 refused" in caplog.text
