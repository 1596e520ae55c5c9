"""What a contract test gets: a pool with every port, its clocks and its credentials store."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from activity.clock import ManualClock
from activity.credentials import SecretRef, StaticCredentials
from activity.ports import ActivityPool
from activity.types import (
    ExtractFilters,
    ExtractMode,
    ExtractRequest,
    ExtractResult,
    FetchedBatch,
    FetchedProxy,
    HealthUpdate,
    PoolOptions,
    ProxyState,
    UpsertResult,
)


@dataclass
class PoolHarness:
    pool: ActivityPool
    #: The caller's clock (proxy TTLs, health freshness, extract).
    clock: ManualClock
    credentials: StaticCredentials
    options: PoolOptions
    #: Moves the store's own clock (session and report TTLs). MemoryPool: a manual clock;
    #: Redis: real time passes (the harness gives such tests short TTLs).
    advance_server: Callable[[timedelta], None]
    #: Members of one AVAILABLE index, read from the store itself (for the vectors that check
    #: what the ADR says an index holds): ``index_size("region", "us")``,
    #: ``index_size("available", "")``; ``index_size("checks", upstream)``: the upstream's
    #: recheck index. Test-facing only; no port exposes it.
    index_size: Callable[[str, str], int]
    _serial: list[int] = field(default_factory=lambda: [0])

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, delta: timedelta) -> datetime:
        return self.clock.advance(delta)

    # -------------------------------------------------------------- builders
    def proxy(
        self,
        proxy_id: str,
        *,
        ttl: timedelta = timedelta(minutes=10),
        region: str | None = "us",
        carrier: str | None = "att",
        protocol: str = "http",
        max_concurrency: int = 4,
        unique_key: str | None = None,
        secret_ref: SecretRef | None = None,
    ) -> FetchedProxy:
        n = int.from_bytes(proxy_id.encode()[-2:], "big")
        return FetchedProxy(
            proxy_id=proxy_id,
            unique_key=unique_key or f"key-{proxy_id}",
            host=f"10.{n % 250}.0.{n // 250 % 250}",
            port=8000 + n % 1000,
            protocol=protocol,
            expires_at=self.now + ttl,
            region=region,
            carrier=carrier,
            max_concurrency=max_concurrency,
            secret_ref=secret_ref,
        )

    def upsert(
        self,
        proxies: Iterable[FetchedProxy],
        *,
        upstream: str = "u1",
        max_size: int = 1000,
        margin: timedelta = timedelta(seconds=5),
        operation_id: str | None = None,
    ) -> UpsertResult:
        return self.pool.upsert_fetched(
            FetchedBatch(
                upstream_id=upstream,
                proxies=list(proxies),
                max_size=max_size,
                safety_margin=margin,
                fetched_at=self.now,
                operation_id=operation_id,
            )
        )

    def mark(self, ids: Iterable[str], state: ProxyState = ProxyState.AVAILABLE) -> None:
        self.pool.apply_health(
            [HealthUpdate(pid, state, checked_at=self.now, latency_ms=50) for pid in ids]
        )

    def stock(self, *ids: str, upstream: str = "u1", **proxy_kwargs: object) -> list[str]:
        """Upsert the proxies and mark them AVAILABLE."""
        self.upsert([self.proxy(pid, **proxy_kwargs) for pid in ids], upstream=upstream)  # type: ignore[arg-type]
        self.mark(ids)
        return list(ids)

    def take(
        self,
        count: int,
        *,
        client: str = "c1",
        mode: ExtractMode = ExtractMode.PARTIAL,
        key: str | None = None,
        **kwargs: object,
    ) -> ExtractResult:
        filters = ExtractFilters(**{k: kwargs.pop(k) for k in list(kwargs) if k in _FILTERS})  # type: ignore[arg-type]
        return self.pool.extract(
            ExtractRequest(
                client_id=client,
                count=count,
                mode=mode,
                filters=filters,
                idempotency_key=key,
                **kwargs,  # type: ignore[arg-type]
            )
        )

    def serial(self) -> int:
        self._serial[0] += 1
        return self._serial[0]


_FILTERS = ("protocol", "region", "carrier", "upstream")

#: ``make_pool(options=None)`` -> a fresh, empty pool in its own namespace.
PoolFactory = Callable[..., PoolHarness]


def ids(result: ExtractResult) -> list[str]:
    return [p.proxy_id for p in result.proxies]
