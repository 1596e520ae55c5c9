"""One gateway worker process: its local state, its control-plane client, its HTTP and SOCKS5
listeners and its metrics endpoint, started together and stopped gracefully (stop accepting,
let tunnels and requests in flight finish up to ``Limits.drain_timeout``, close the rest, send
a final report).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gateway_runtime.control_client import ControlClient
from gateway_runtime.selection import Selector
from gateway_runtime.server.config import Limits
from gateway_runtime.server.conn import Serve, listen
from gateway_runtime.server.gateway import Gateway
from gateway_runtime.server.http_listener import HttpListener
from gateway_runtime.server.metrics import MetricsServer
from gateway_runtime.server.socks_listener import SocksListener
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.traffic import TrafficCounter

log = logging.getLogger("gateway_runtime")

#: How often kept upstream connections past their idle time are closed.
SWEEP_INTERVAL = 1.0
#: A SOCKS5 client connection's unread bytes, at most (its handshake is a few hundred bytes).
SOCKS_BUFFER = 2**16
#: The final report on shutdown gets this long.
FINAL_REPORT_TIMEOUT = 5.0


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Bind:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Bind:
        """``host:port`` (``[v6]:port`` for IPv6); port 0 takes a free one."""
        host, colon, port = text.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) <= 65_535 or not host:
            raise ValueError(f"a bind address is host:port, not {text!r}")
        return cls(host.strip("[]"), int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    control_url: str
    token: str = field(repr=False)
    http: Bind
    socks: Bind | None = None
    metrics: Bind | None = None
    limits: Limits = field(default_factory=Limits)
    control_timeout: float = 10.0
    #: The TLS to the control plane (gateway_runtime/control_tls.py); None: the system's CAs.
    control_tls: ssl.SSLContext | None = field(default=None, repr=False)


class Worker:
    def __init__(self, settings: WorkerSettings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.store = SnapshotStore(clock)
        self.traffic = TrafficCounter()
        self.gateway = Gateway(
            self.store, Selector(self.store, clock), self.traffic, settings.limits
        )
        self.control = ControlClient(
            settings.control_url,
            settings.token,
            self.store,
            traffic=self.traffic,
            timeout=settings.control_timeout,
            tls=settings.control_tls,
        )
        self._http = HttpListener(self.gateway)
        self._socks = SocksListener(self.gateway)
        self._servers: list[asyncio.Server] = []
        self._handlers: set[asyncio.Task[None]] = set()
        #: Where each listener ended up (a port 0 bind takes a free one).
        self.bound: dict[str, Bind] = {}
        self.ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then shut down gracefully."""
        settings, limits = self.settings, self.settings.limits
        listeners: list[tuple[str, Bind | None, Serve, int]] = [
            ("http", settings.http, self._http.serve, limits.max_header_bytes),
            ("socks", settings.socks, self._socks.serve, SOCKS_BUFFER),
        ]
        try:
            for name, bind, serve, limit in listeners:
                if bind is None:
                    continue
                server = await listen(serve, bind.host, bind.port, limit, self._handlers)
                self._listening(name, bind, server)
            if settings.metrics is not None:
                metrics = MetricsServer(self.gateway, self._control_state)
                server = await asyncio.start_server(
                    metrics.serve, settings.metrics.host, settings.metrics.port, limit=4096
                )
                self._listening("metrics", settings.metrics, server)
            control_stop = asyncio.Event()
            control = asyncio.create_task(self.control.run(control_stop), name="control-plane")
            sweeper = asyncio.create_task(self._sweep(stop), name="kept-connections")
            self.ready.set()
            await stop.wait()
            await self._shutdown(control, control_stop, sweeper)
        finally:
            for server in self._servers:
                server.close()
            await self.control.close()

    async def _shutdown(
        self, control: asyncio.Task[None], control_stop: asyncio.Event, sweeper: asyncio.Task[None]
    ) -> None:
        log.info("gateway worker: stopping; %d connections to drain", len(self._handlers))
        for server in self._servers:
            server.close()
        self.gateway.closing = True
        sweeper.cancel()
        deadline = asyncio.get_running_loop().time() + self.settings.limits.drain_timeout
        while self._handlers and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        self.gateway.kept.close_all()
        control_stop.set()
        with contextlib.suppress(Exception):
            await control
        with contextlib.suppress(Exception):
            async with asyncio.timeout(FINAL_REPORT_TIMEOUT):
                await self.control.send_report()  # the counts at zero, the last traffic
        log.info("gateway worker: stopped")

    def _listening(self, name: str, bind: Bind, server: asyncio.Server) -> None:
        self._servers.append(server)
        port = server.sockets[0].getsockname()[1]
        self.bound[name] = Bind(bind.host, port)

    async def _sweep(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(SWEEP_INTERVAL)
            view = self.store.served
            self.gateway.kept.sweep(None if view is None else view.proxies)

    def _control_state(self) -> dict[str, float]:
        return {
            "session_generation": float(self.control.generation or 0),
            "session_open": float(self.control.session_id is not None),
        }
