"""The worker's control client (gateway_runtime/control_client.py) against answers a real
control plane does not give: an unreachable one, an oversized or tampered snapshot, a body
that is not a problem. Each is a ControlError or a WireError, and nothing is installed."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from gateway_runtime import control_client
from gateway_runtime.control_client import ControlClient, ControlError
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.wire import Snapshot, WireChecksumError, seal_snapshot

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
