"""A simulated gateway worker: a client of the real control API that does what the worker will
(open a session, fetch and verify its snapshot, ACK it, report counts), with every call's
answer kept for the test to judge."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx
from rest_framework.test import APIClient

from gateway_runtime.wire import (
    ClientTraffic,
    ReportEntry,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    decode_snapshot,
    encode_ack,
    encode_report,
)

BASE = "/api/v1/gateway"


class OverHttp:
    """The test client's calls (``post``, ``get``, ``credentials``) over real HTTP to a
    running web server, so one simulated worker drives either."""

    def __init__(self, port: int) -> None:
        self._http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def credentials(self, HTTP_AUTHORIZATION: str) -> None:
        self._http.headers["Authorization"] = HTTP_AUTHORIZATION

    @staticmethod
    def _headers(meta: dict[str, str]) -> dict[str, str]:
        return {k.removeprefix("HTTP_").replace("_", "-"): v for k, v in meta.items()}

    def post(self, path, data=None, format=None, content_type=None, **meta):
        if format == "json":
            return _Answer(self._http.post(path, json=data, headers=self._headers(meta)))
        headers = {**self._headers(meta), "Content-Type": content_type or "application/json"}
        return _Answer(self._http.post(path, content=data, headers=headers))

    def get(self, path, **meta):
        return _Answer(self._http.get(path, headers=self._headers(meta)))

    def close(self) -> None:
        self._http.close()


class _Answer:
    """An httpx response read as the test client's (``status_code``, ``content``, ``[h]``)."""

    def __init__(self, response: httpx.Response) -> None:
        self.status_code, self.content, self._headers = (
            response.status_code,
            response.content,
            response.headers,
        )

    def __getitem__(self, name: str) -> str:
        return self._headers[name]


@dataclass
class SimulatedWorker:
    token: str
    client: APIClient | OverHttp = field(default_factory=APIClient)
    session_id: str | None = None
    #: The snapshot last fetched, and the one last ACKed (what reports name).
    snapshot: Snapshot | None = None
    acked: Snapshot | None = None
    etag: str | None = None
    sequence: int = 0
    #: Connections the worker has open through each proxy: what its reports say.
    active: dict[str, int] = field(default_factory=dict)
    #: The assignment epoch of each proxy the worker ever held (a proxy left out of a newer
    #: snapshot is still reported under the epoch it was held at while it drains).
    epochs: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")

    def _headers(self, session_id: str | None = None) -> dict[str, str]:
        sid = session_id if session_id is not None else self.session_id
        return {} if sid is None else {"HTTP_GATEWAY_SESSION": sid}

    def open(self, session_id: str | None = None):
        body = {} if session_id is None else {"session_id": session_id}
        response = self.client.post(f"{BASE}/sessions", body, format="json")
        if response.status_code == 200:
            session_id = json.loads(response.content)["session_id"]
            if session_id != self.session_id:  # a new session: its own snapshots and reports
                self.etag, self.sequence, self.acked = None, 0, None
            self.session_id = session_id
        return response

    def fetch(self, conditional: bool = True, **headers: str):
        if conditional and self.etag:
            headers.setdefault("HTTP_IF_NONE_MATCH", self.etag)
        response = self.client.get(f"{BASE}/snapshot", **self._headers(), **headers)
        if response.status_code == 200:
            self.snapshot = decode_snapshot(response.content)  # verifies the checksum
            self.epochs.update({p.proxy_id: p.assignment_epoch for p in self.snapshot.proxies})
            self.etag = response["ETag"]
        return response

    def ack(self, ack: SnapshotAck | None = None, session_id: str | None = None):
        assert ack is not None or self.snapshot is not None
        data = encode_ack(ack or self.snapshot.ack())
        response = self.client.post(
            f"{BASE}/snapshot/ack",
            data,
            content_type="application/json",
            **self._headers(session_id),
        )
        if response.status_code == 200 and ack is None:
            self.acked = self.snapshot
        return response

    def sync(self) -> Snapshot:
        """Fetch (unless unchanged) and ACK the current snapshot."""
        fetched = self.fetch()
        assert fetched.status_code in (200, 304), fetched.content
        if fetched.status_code == 200:
            acked = self.ack()
            assert acked.status_code == 200, acked.content
        assert self.snapshot is not None
        return self.snapshot

    def report_body(
        self,
        sequence: int | None = None,
        version: int | None = None,
        epoch: int | None = None,
        entries: tuple[ReportEntry, ...] | None = None,
        traffic: tuple[ClientTraffic, ...] = (),
        refused_snapshots: int = 0,
    ) -> RuntimeReportBody:
        basis = self.acked or self.snapshot
        assert basis is not None
        held = {p.proxy_id for p in basis.proxies}
        if entries is None:
            entries = tuple(
                ReportEntry(pid, self._epoch_of(pid), count, 0)
                for pid, count in sorted(self.active.items())
                if count or pid in held
            )
        return RuntimeReportBody(
            report_sequence=self.sequence + 1 if sequence is None else sequence,
            snapshot_version=basis.version if version is None else version,
            epoch=basis.epoch if epoch is None else epoch,
            entries=entries,
            traffic=traffic,
            refused_snapshots=refused_snapshots,
        )

    def report(self, body: RuntimeReportBody | None = None, session_id: str | None = None):
        body = body or self.report_body()
        response = self.client.post(
            f"{BASE}/reports",
            encode_report(body),
            content_type="application/json",
            **self._headers(session_id),
        )
        if response.status_code == 200:
            self.sequence = max(self.sequence, body.report_sequence)
        return response

    def _epoch_of(self, proxy_id: str) -> int:
        return self.epochs[proxy_id]
