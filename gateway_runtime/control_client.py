"""A gateway worker's client of the control plane (``/api/v1/gateway/``, docs/gateway.md "The
control API"): its session, its snapshot (fetched conditionally, verified by the wire before
use, installed in the local store, then ACKed) and its reports, each on its interval, retried
with backoff and jitter, the session re-opened when the control plane says it was fenced or
expired. Never on the request path: connections read only the local store.

Every call is bounded by ``timeout``; a snapshot's body by the wire's byte bound (decode_snapshot
checks it before parsing). A refusal the worker cannot act on is raised as ``ControlError`` with
its problem ``code``, never with a body that might hold a secret.

A report carries the traffic taken from the ``TrafficCounter`` and the snapshots the store
refused since the previous report. Once taken, they are the *pending* report's until the
control plane accepts it (a 200, a replay too): the same body is sent again after a failure
whose outcome is unknown (unreachable, a 5xx), so a copy the control plane took but whose
answer was lost is answered as a replay, never counted twice nor refused as a conflict. After
a refusal (a 4xx problem: it changed nothing) the body is built again from the store, the same
traffic in it. A new session (a new sequence) carries the pending traffic in its first report.
One case stays ambiguous: a report accepted whose answer was lost, and then the session ended
before a resend could be answered as a replay; its traffic goes in the new session's first
report too (counted twice, rather than lost: the control plane keeps no replay across
sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import ssl
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.traffic import TrafficCounter
from gateway_runtime.wire import (
    ClientTraffic,
    RuntimeReportBody,
    decode_snapshot,
    encode_ack,
    encode_report,
)
from gateway_runtime.wire.limits import MAX_SNAPSHOT_BYTES, MAX_TRAFFIC_ENTRIES

logger = logging.getLogger(__name__)

BASE_PATH = "/api/v1/gateway"
SESSION_HEADER = "Gateway-Session"
#: Codes after which the session is opened again (docs/gateway.md "What a refusal says").
REOPEN = frozenset({"session_fenced", "session_expired"})
#: Any answer but a snapshot is small: a session's, an ACK's, a report's, a problem.
MAX_ANSWER_BYTES = 64 * 1024
#: Codes after which the snapshot is fetched again, unconditionally.
REFETCH = frozenset({"unknown_snapshot", "stale_epoch", "checksum_mismatch", "snapshot_conflict"})
#: Codes saying the worker's report sequence is not the session's: they do not happen while this
#: client is the session's only writer, and the worker cannot learn the session's sequence, so
#: it opens a new session (its pending traffic carried) rather than guess.
RESEQUENCE = frozenset({"sequence_regression", "sequence_conflict", "sequence_gap"})


class ControlError(Exception):
    """The control plane refused a call, or could not be reached (``code``: its problem code,
    or ``unreachable``, ``tls_failed``, ``unexpected_answer``; ``detail``: for ``tls_failed``,
    OpenSSL's reason, e.g. ``CERTIFICATE_VERIFY_FAILED``)."""

    def __init__(self, code: str, status: int = 0, detail: str = "") -> None:
        super().__init__(
            f"control plane: {code}"
            + (f" ({status})" if status else "")
            + (f": {detail}" if detail else "")
        )
        self.code = code
        self.status = status
        self.detail = detail


@dataclass(slots=True)
class _Pending:
    """A report's traffic and refused snapshots, taken once, until a report with them is
    accepted."""

    traffic: tuple[ClientTraffic, ...]
    refused_snapshots: int
    #: The body last sent with them: sent again unchanged while its fate is unknown; None to
    #: build it afresh (nothing sent yet, a refusal that changed nothing, a new session).
    body: RuntimeReportBody | None = None


@dataclass(frozen=True, slots=True)
class Intervals:
    """What the session's answer told the worker to keep (seconds)."""

    heartbeat: float = 10
    snapshot: float = 2
    report: float = 5


class ControlClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        store: SnapshotStore,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        traffic: TrafficCounter | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``tls``: the context for an https:// ``base_url`` (its CA, the worker's certificate:
        gateway_runtime/control_tls.py); None: the system's CAs, no client certificate."""
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + BASE_PATH,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
            verify=tls if tls is not None else True,
        )
        self._store = store
        self.session_id: str | None = None
        self.generation: int | None = None
        self.intervals = Intervals()
        self._etag: str | None = None
        self._sequence = 0
        #: The proxy server's counter (None: the reports carry no traffic).
        self._traffic = traffic
        self._pending: _Pending | None = None
        #: The store's refusals already put in a report.
        self._refusals_taken = 0

    async def close(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------------ calls
    async def open_session(self, session_id: str | None = None) -> None:
        """Open (or renew, with the live ID) the worker's session; a new one starts its own
        snapshot and report sequence."""
        wanted = session_id or self.session_id or uuid.uuid4().hex
        answer = await self._call("POST", "/sessions", json_body={"session_id": wanted})
        body = _json(answer)
        # A new ID, or the same ID in a new generation (it had been fenced or had expired):
        # a new session, with its own snapshots and report sequence.
        new = (body.get("session_id"), body.get("generation")) != (
            self.session_id,
            self.generation,
        )
        self.session_id = str(body["session_id"])
        self.generation = int(body["generation"])
        self.intervals = Intervals(
            float(body["heartbeat_interval_s"]),
            float(body["snapshot_interval_s"]),
            float(body["report_interval_s"]),
        )
        if new:
            self._etag, self._sequence = None, 0
            if self._pending is not None:  # its traffic goes in the new session's first report
                self._pending.body = None

    async def refresh_snapshot(self) -> bool:
        """Fetch the snapshot unless unchanged (304: confirmed), verify and install it, then ACK
        it. True when a new snapshot is served; raises ``ControlError`` (a ``WireError`` for a
        snapshot that fails verification: it is never installed)."""
        headers = {"If-None-Match": self._etag} if self._etag else {}
        answer = await self._call(
            "GET", "/snapshot", headers=headers, session=True, max_body=MAX_SNAPSHOT_BYTES
        )
        if answer.status == 304:
            self._store.confirm()
            return False
        snapshot = decode_snapshot(answer.body)  # checks the checksum before anything
        installed = self._store.install(snapshot)
        if not installed.taken:
            # The next report says so too (refused_snapshots); the message has numbers only.
            logger.warning(
                "snapshot version %d refused (%s): the view served stays", snapshot.version,
                installed.refused,
            )  # fmt: skip
            self._etag = None  # fetch whole next time: the store kept the older view
            return False
        ack = snapshot.ack()
        await self._call("POST", "/snapshot/ack", content=encode_ack(ack), session=True)
        self._store.acknowledged(ack)
        self._etag = answer.headers.get("ETag")
        return True

    async def send_report(self) -> bool:
        """Send the pending report, or the next one; False when there is none to send yet (no
        ACK). Raises ``ControlError``; the report's traffic stays pending then (module text)."""
        pending = self._pending
        if pending is None or pending.body is None:
            basis = self._store.report(self._sequence + 1)
            if basis is None:
                return False  # no ACK yet: nothing taken
            if pending is None:
                pending = self._pending = self._take()
            pending.body = dataclasses.replace(
                basis, traffic=pending.traffic, refused_snapshots=pending.refused_snapshots
            )
        body = pending.body
        try:
            await self._call("POST", "/reports", content=encode_report(body), session=True)
        except ControlError as exc:
            if 400 <= exc.status < 500 and exc.code != "unexpected_answer":
                # Refused, so nothing changed: built afresh next time (the snapshot it names
                # may have moved on), the same traffic in it.
                pending.body = None
            raise
        self._pending = None
        self._sequence = body.report_sequence
        return True

    def _take(self) -> _Pending:
        traffic = self._traffic.take(MAX_TRAFFIC_ENTRIES) if self._traffic is not None else ()
        refusals = self._store.refusals
        pending = _Pending(traffic, refusals - self._refusals_taken)
        self._refusals_taken = refusals
        return pending

    # ------------------------------------------------------------------ the loop
    async def run(self, stop: asyncio.Event, max_backoff: float = 30.0) -> None:
        """Keep the session, the snapshot and the reports going until ``stop`` is set: each on
        its interval; after a failure, back off (doubling, with jitter, at most
        ``max_backoff``); re-open the session when fenced, re-fetch when the snapshot was not
        the one issued."""
        due = {"heartbeat": 0.0, "snapshot": 0.0, "report": 0.0}
        backoff = 0.0
        loop = asyncio.get_running_loop()
        #: The last failure logged: a run of the same one is logged once, not at each retry.
        failing: str | None = None
        while not stop.is_set():
            now = loop.time()
            try:
                if self.session_id is None:
                    await self.open_session()
                    due = dict.fromkeys(due, now)
                for name in ("heartbeat", "snapshot", "report"):
                    if now >= due[name]:
                        await self._step(name)
                        due[name] = now + getattr(self.intervals, name)
                backoff = 0.0
                if failing is not None:
                    logger.warning("control plane reached again")
                    failing = None
            except ControlError as exc:
                if str(exc) != failing:
                    # The code, status and TLS reason only: an answer's body is never logged.
                    logger.warning("%s; retrying with backoff", exc)
                    failing = str(exc)
                if exc.code in REOPEN or exc.code in RESEQUENCE:
                    self.session_id = None
                elif exc.code in REFETCH:
                    self._etag = None
                backoff = min(max_backoff, max(0.5, backoff * 2))
            wait = min(due.values()) - loop.time()
            if backoff:
                # Jitter keeps a fleet's retries apart; it needs no unpredictability.
                wait = backoff * random.uniform(0.5, 1.0)  # noqa: S311
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(0.05, wait))

    async def _step(self, name: str) -> None:
        if name == "heartbeat":
            await self.open_session()
        elif name == "snapshot":
            await self.refresh_snapshot()
        else:
            await self.send_report()

    # ------------------------------------------------------------------ HTTP
    async def _call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        session: bool = False,
        max_body: int = MAX_ANSWER_BYTES,
    ) -> Answer:
        sent = dict(headers or {})
        if session:
            if self.session_id is None:
                raise ControlError("session_fenced")
            sent[SESSION_HEADER] = self.session_id
        if content is not None:
            sent["Content-Type"] = "application/json"
        try:
            async with self._http.stream(
                method, path, json=json_body, content=content, headers=sent
            ) as response:
                body = await _bounded(response, max_body)
        except httpx.HTTPError as exc:
            reason = _tls_reason(exc)
            if reason is not None:
                raise ControlError("tls_failed", detail=reason) from None
            raise ControlError("unreachable") from None
        answer = Answer(response.status_code, response.headers, body)
        if answer.status in (200, 304):
            return answer
        code = "unexpected_answer"
        if answer.headers.get("Content-Type", "").startswith("application/problem+json"):
            code = str(_json(answer).get("code", code))
        raise ControlError(code, answer.status)


def _tls_reason(exc: BaseException) -> str | None:
    """OpenSSL's reason when a TLS error caused ``exc`` (a short constant naming no secret),
    else None."""
    seen: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; the bound keeps a cycle from looping
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return str(seen.reason or type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes


async def _bounded(response: httpx.Response, limit: int) -> bytes:
    """The body, read no further than ``limit`` bytes (more is an unexpected answer)."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ControlError("unexpected_answer", response.status_code)
        chunks.append(chunk)
    return b"".join(chunks)


def _json(answer: Answer) -> dict[str, Any]:
    try:
        body = json.loads(answer.body)
    except ValueError:
        raise ControlError("unexpected_answer", answer.status) from None
    if not isinstance(body, dict):
        raise ControlError("unexpected_answer", answer.status)
    return body
