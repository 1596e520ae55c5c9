"""A stand-in for the gateway control API (``/api/v1/gateway/``), for bench/gateway_forward.py
only: it lets a gateway worker run against a fixed snapshot without Django, PostgreSQL or
Redis, so the forwarding bench measures forwarding alone.

It answers the four calls as pool_admin/api/gateway_views.py does (the same paths, bodies,
``Gateway-Session`` header, ETag and 304, ``application/problem+json`` refusals with a
``code``), with the documents encoded by gateway_runtime.wire, the code both sides share. It
keeps one worker's session and issues a new snapshot version on every unconditional fetch, as
the real publisher does; it checks ACKs and report sequences only as far as a bench needs (a
worker that gets them wrong sees the real refusal codes, not silence).

    .venv/bin/python bench/gateway_control_standin.py --check

``--check`` drives it with the worker's own ControlClient (session, snapshot installed into a
SnapshotStore and ACKed, a 304, a report) and prints what it saw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from gateway_runtime.wire import (  # noqa: E402
    Credential,
    GatewayClient,
    SealedSnapshot,
    Snapshot,
    SnapshotProxy,
    WireError,
    decode_ack,
    decode_report,
    make_verifier,
    new_salt,
    seal_snapshot,
)

BASE = "/api/v1/gateway"
#: The control plane's defaults (pool_admin/settings.py GATEWAY_*).
HEARTBEAT_S, SNAPSHOT_INTERVAL_S, REPORT_INTERVAL_S = 10, 2, 5
MAX_STALENESS_S, SESSION_TTL_S = 30, 30
#: A bench client's key, in the shape the project issues (``pp_<12 hex>_<32+ characters>``).
BENCH_KEY = "pp_000000000b3c_" + "benchkey" * 5


@dataclass(frozen=True)
class Upstream:
    """The one forward proxy every snapshot proxy points at."""

    host: str
    port: int
    username: str
    password: str


def build_snapshot(
    upstream: Upstream, version: int, client: str, key: str, proxies: int = 10
) -> SealedSnapshot:
    """``proxies`` distinct snapshot proxies, all the one ``upstream`` (so a per-request choice
    among them is real work for the worker, while every request lands on the same server),
    and one gateway client ``client`` whose key is ``key``; leases an hour ahead."""
    now = datetime.now(UTC)
    hour = now + timedelta(hours=1)
    login = Credential("c1", upstream.username, upstream.password)
    return seal_snapshot(
        Snapshot(
            version=version,
            epoch=1,
            issued_at=now,
            max_staleness=timedelta(seconds=MAX_STALENESS_S),
            proxies=tuple(
                SnapshotProxy(
                    proxy_id=f"bench-{i:02d}",
                    host=upstream.host,
                    port=upstream.port,
                    protocol="http",
                    region=None,
                    carrier=None,
                    upstream="bench",
                    labels={},
                    max_concurrency=10_000,
                    assignment_epoch=1,
                    lease_expires_at=hour,
                    usable_until=hour,
                    credential_ref=login.ref,
                )
                for i in range(proxies)
            ),
            credentials=(login,),
            clients=(GatewayClient(client, (make_verifier(key, new_salt()),), 100_000, 100_000),),
        )
    )


class Problem(Exception):
    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


class ControlStandin:
    """The control API for one worker (``token``), served from a thread of this process."""

    def __init__(
        self,
        upstream: Upstream,
        token: str,
        client: str = "bench",
        key: str = BENCH_KEY,
        proxies: int = 10,
    ) -> None:
        self.upstream, self.token, self.client, self.key = upstream, token, client, key
        self.proxies = proxies
        self._lock = threading.Lock()  # the server answers each request in its own thread
        self.session_id: str | None = None
        self.generation = 0
        self.issued: SealedSnapshot | None = None
        self.acked: int | None = None
        self.sequence = 0
        self.calls: dict[str, int] = {}
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ serving
    def start(self, port: int = 0) -> str:
        standin = self

        class Handler(_Handler):
            owner = standin

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ------------------------------------------------------------------ the four calls
    def answer(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if headers.get("authorization") != f"Bearer {self.token}":
            raise Problem(401, "unauthenticated", "A worker token is required.")
        with self._lock:
            name = f"{method} {path}"
            self.calls[name] = self.calls.get(name, 0) + 1
            if (method, path) == ("POST", f"{BASE}/sessions"):
                return self._session(body)
            if (method, path) == ("GET", f"{BASE}/snapshot"):
                return self._snapshot(headers)
            if (method, path) == ("POST", f"{BASE}/snapshot/ack"):
                self._live(headers)
                return self._ack(self._wire_body(headers, body))
            if (method, path) == ("POST", f"{BASE}/reports"):
                self._live(headers)
                return self._report(self._wire_body(headers, body))
        raise Problem(404, "not_found", "Not found.")

    def _session(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        try:
            given = json.loads(body or b"{}")
        except ValueError:
            raise Problem(400, "invalid_request", "session_id: not JSON") from None
        wanted = given.get("session_id") if isinstance(given, dict) else None
        if wanted is not None and not isinstance(wanted, str):
            raise Problem(400, "invalid_request", "session_id: a string")
        wanted = wanted or uuid.uuid4().hex
        if wanted != self.session_id:
            # Another ID replaces the live session (the real pool fences the old one): a new
            # generation, its own snapshot versions and report sequence.
            self.session_id, self.generation = wanted, self.generation + 1
            self.issued, self.acked, self.sequence = None, None, 0
        expires = datetime.now(UTC) + timedelta(seconds=SESSION_TTL_S)
        return _json(
            200,
            {
                "session_id": self.session_id,
                "generation": self.generation,
                "expires_at": expires.isoformat().replace("+00:00", "Z"),
                "heartbeat_interval_s": HEARTBEAT_S,
                "snapshot_interval_s": SNAPSHOT_INTERVAL_S,
                "report_interval_s": REPORT_INTERVAL_S,
                "max_staleness_s": MAX_STALENESS_S,
            },
        )

    def _etag(self) -> str:
        assert self.issued is not None
        # The real tag's shape (activity/snapshot_publisher.py); revision and clients fixed.
        return f'"g{self.generation}-r1-c1-v{self.issued.snapshot.version}"'

    def _snapshot(self, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        self._live(headers)
        tag = headers.get("if-none-match")
        if self.issued is not None and tag == self._etag():
            return 304, {"ETag": tag, "Cache-Control": "no-store"}, b""
        version = 1 if self.issued is None else self.issued.snapshot.version + 1
        self.issued = build_snapshot(self.upstream, version, self.client, self.key, self.proxies)
        return (
            200,
            {"Content-Type": "application/json", "ETag": self._etag(), "Cache-Control": "no-store"},
            self.issued.data,
        )

    def _ack(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        ack = decode_ack(body)
        issued = self.issued.snapshot if self.issued else None
        if issued is None or ack.version != issued.version:
            raise Problem(409, "unknown_snapshot", "That version was not issued to the session.")
        if ack.epoch != issued.epoch:
            raise Problem(409, "stale_epoch", "Issued at another epoch.")
        if ack.checksum != issued.checksum:
            raise Problem(409, "checksum_mismatch", "Issued with another checksum.")
        self.acked = ack.version
        return _json(200, {"acked_version": ack.version})

    def _report(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        report = decode_report(body)
        if self.acked is None or report.snapshot_version != self.acked:
            raise Problem(409, "stale_snapshot", "Report under the snapshot last ACKed.")
        if report.report_sequence <= self.sequence:
            raise Problem(409, "sequence_regression", "Sequences increase.")
        if report.report_sequence != self.sequence + 1:
            raise Problem(409, "sequence_gap", "A report is missing.")
        self.sequence = report.report_sequence
        return _json(200, {"replayed": False, "released": []})

    def _live(self, headers: dict[str, str]) -> None:
        session = headers.get("gateway-session")
        if not session:
            raise Problem(400, "invalid_request", "Name the session: 'Gateway-Session'.")
        if session != self.session_id:
            raise Problem(409, "session_fenced", "Not the worker's live session.")

    @staticmethod
    def _wire_body(headers: dict[str, str], body: bytes) -> bytes:
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise Problem(415, "unsupported_media_type", "application/json")
        return body


def _json(status: int, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    owner: ControlStandin
    protocol_version = "HTTP/1.1"  # the worker's httpx client keeps its connection

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, out, data = self.owner.answer(
                self.command, self.path.split("?")[0], headers, body
            )
        except (Problem, WireError) as exc:
            problem = exc if isinstance(exc, Problem) else Problem(400, "invalid_request", str(exc))
            status = problem.status
            data = json.dumps(
                {"status": problem.status, "code": problem.code, "detail": problem.detail}
            ).encode()
            out = {"Content-Type": "application/problem+json"}
        self.send_response(status)
        for name, value in out.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a call every few seconds; the counts are in ``calls``


# ---------------------------------------------------------------------- checked by the client
async def check_with_control_client(url: str, token: str) -> list[str]:
    """Drive the stand-in with the worker's own ControlClient; what it saw, line by line
    (AssertionError if the client did not end with the snapshot installed and ACKed)."""
    from gateway_runtime.control_client import ControlClient
    from gateway_runtime.snapshot_store import SnapshotStore

    store = SnapshotStore(lambda: datetime.now(UTC))
    client = ControlClient(url, token, store)
    seen = []
    try:
        await client.open_session()
        seen.append(
            f"session {client.session_id} generation {client.generation}, {client.intervals}"
        )
        assert await client.refresh_snapshot(), "the first snapshot was not installed"
        view = store.view()
        assert view is not None, "no view after the snapshot"
        seen.append(
            f"snapshot v{view.snapshot.version}: {len(view.proxies)} proxies, "
            f"clients {[c.name for c in view.snapshot.clients]}, installed and ACKed"
        )
        assert not await client.refresh_snapshot(), "an unchanged snapshot was not a 304"
        seen.append("second fetch: 304 (confirmed)")
        assert await client.send_report(), "no report was sent"
        seen.append("report 1: 200")
        await client.open_session()
        seen.append(f"heartbeat: same session, generation {client.generation}")
    finally:
        await client.close()
    return seen


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="drive it with ControlClient")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", default="127.0.0.1:3128:user:pass")
    args = parser.parse_args()
    host, port, user, password = args.upstream.split(":")
    token = "bench-worker-token"
    standin = ControlStandin(Upstream(host, int(port), user, password), token)
    url = standin.start(args.port)
    if args.check:
        for line in asyncio.run(check_with_control_client(url, token)):
            print(line)
        print(f"calls: {standin.calls}")
        standin.stop()
        return 0
    print(f"{url} (token {token}; client bench:{BENCH_KEY}); Ctrl-C stops it")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
