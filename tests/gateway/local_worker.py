"""A gateway worker's request path served from a snapshot the test installs (no control
plane): the real store, selection, listeners and upstream dialing, on an event loop in a thread
of its own, with real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import uvloop

from gateway_runtime.selection import Selector
from gateway_runtime.server.config import Limits
from gateway_runtime.server.conn import listen
from gateway_runtime.server.gateway import Gateway
from gateway_runtime.server.http_listener import HttpListener
from gateway_runtime.server.socks_listener import SocksListener
from gateway_runtime.server.worker import SOCKS_BUFFER
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.traffic import TrafficCounter
from gateway_runtime.wire import (
    Credential,
    GatewayClient,
    Snapshot,
    SnapshotProxy,
    decode_snapshot,
    encode_snapshot,
    make_verifier,
    new_salt,
)

API_KEY = "pp_0123456789ab_abcdefghijklmnopqrstuvwxyz0123456789"


def client(name: str = "shop", key: str = API_KEY, **fields: Any) -> GatewayClient:
    base: dict[str, Any] = {"max_connections": 100, "requests_per_second": 10_000}
    return GatewayClient(name=name, verifiers=(make_verifier(key, new_salt()),), **(base | fields))


def proxy(
    proxy_id: str,
    port: int,
    protocol: str = "http",
    *,
    upstream: str = "acme-us",
    region: str = "us",
    credential_ref: str | None = "c1",
    max_concurrency: int = 50,
    epoch: int = 1,
    host: str = "127.0.0.1",
) -> SnapshotProxy:
    now = datetime.now(UTC)
    return SnapshotProxy(
        proxy_id=proxy_id, host=host, port=port, protocol=protocol, region=region,
        carrier=None, upstream=upstream, labels={}, max_concurrency=max_concurrency,
        assignment_epoch=epoch, lease_expires_at=now + timedelta(hours=1),
        usable_until=now + timedelta(hours=1), credential_ref=credential_ref,
    )  # fmt: skip


def snapshot(
    version: int,
    proxies: tuple[SnapshotProxy, ...],
    credentials: tuple[Credential, ...],
    clients: tuple[GatewayClient, ...],
    max_staleness: timedelta = timedelta(seconds=30),
) -> Snapshot:
    """Sealed by the wire, as a worker receives it."""
    made = Snapshot(
        version=version, epoch=1, issued_at=datetime.now(UTC), max_staleness=max_staleness,
        proxies=proxies, credentials=credentials, clients=clients,
    )  # fmt: skip
    return decode_snapshot(encode_snapshot(made))


class LocalWorker:
    def __init__(self, limits: Limits | None = None, clock: Callable[[], datetime] | None = None):
        self.limits = limits or Limits()
        self._clock = clock or (lambda: datetime.now(UTC))
        self.loop = uvloop.new_event_loop()
        self.http_port = self.socks_port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.store = SnapshotStore(self._clock)
        self.traffic = TrafficCounter()
        self.selector = Selector(self.store, self._clock)
        self.gateway = Gateway(self.store, self.selector, self.traffic, self.limits)
        self.http = HttpListener(self.gateway)
        self.socks = SocksListener(self.gateway)
        handlers: set[asyncio.Task[None]] = set()
        http = self.loop.run_until_complete(
            listen(self.http.serve, "127.0.0.1", 0, self.limits.max_header_bytes, handlers)
        )
        socks = self.loop.run_until_complete(
            listen(self.socks.serve, "127.0.0.1", 0, SOCKS_BUFFER, handlers)
        )
        self.http_port = http.sockets[0].getsockname()[1]
        self.socks_port = socks.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        self.gateway.kept.close_all()
        http.close()
        socks.close()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    def call(self, function: Callable[[], Any]) -> Any:
        """``function()`` run on the worker's loop (its state is confined to it)."""

        async def run() -> Any:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def install(self, made: Snapshot) -> None:
        installed = self.call(lambda: self.store.install(made))
        assert installed.taken, installed.refused

    def proxy_url(self, username: str, key: str = API_KEY) -> str:
        return f"http://{username}:{key}@127.0.0.1:{self.http_port}"

    def __enter__(self) -> LocalWorker:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
