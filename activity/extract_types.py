"""What the extract and quota ports take and answer (ADR-005 "独占提取"). Imported from
``activity.types`` as well, where every other port's types are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


class ExtractMode(StrEnum):
    PARTIAL = "partial"
    ALL_OR_NOTHING = "all_or_nothing"


#: Most values one filter dimension may name: an extract reads one index per value.
MAX_FILTER_VALUES = 64


@dataclass(frozen=True, slots=True)
class ExtractFilters:
    """Which proxies an extract may draw, per dimension: None (any), one value, or a set of
    values (any one of them: a client allowed several upstreams that names none draws from all
    of them). The dimensions combine with AND. Regions and carriers match in their label form
    (``us`` finds ``US``). A set holds 1-:data:`MAX_FILTER_VALUES` values."""

    protocol: str | frozenset[str] | None = None
    region: str | frozenset[str] | None = None
    carrier: str | frozenset[str] | None = None
    upstream: str | frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class CallQuota:
    """A client's two rate limits, counted by the pool in the same atomic step as its extract.

    Each is a sliding window counter: the count at a moment is the current window's units plus
    the previous window's, weighted by how much of it still overlaps the last window length
    (rounded down). ``calls``: every call takes one unit (an extract, also one the pool refuses,
    and :meth:`~activity.ports.CallCounter.charge_call`). ``proxies``: the proxies extracts
    returned; an extract is refused unless ``count`` more fit. A limit's count starts afresh when
    the limit or its window changes.
    """

    calls: int
    proxies: int
    call_window: timedelta = timedelta(seconds=1)
    proxy_window: timedelta = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class ExtractRequest:
    client_id: str
    count: int
    mode: ExtractMode = ExtractMode.PARTIAL
    filters: ExtractFilters = field(default_factory=ExtractFilters)
    idempotency_key: str | None = None
    #: Internal operation ID for one low-level retry when the client gave no key.
    request_id: str | None = None
    #: Only proxies whose last check is at most this old.
    max_health_age: timedelta | None = None
    #: Only proxies usable for at least this long from now.
    min_remaining: timedelta | None = None
    #: Matching proxies to leave in the pool for gateway workers.
    reserve_for_gateway: int = 0
    #: The client's rate limits, checked and charged atomically with the extract; None: none.
    quota: CallQuota | None = None
    #: How long the replay of a keyed extract lives (capped by the earliest hard expiry it
    #: returns); None: ``PoolOptions.idempotency_ttl``. At most ``PoolOptions.max_proxy_ttl``.
    idempotency_ttl: timedelta | None = None


@dataclass(frozen=True, slots=True)
class ExtractedProxy:
    proxy_id: str
    upstream_id: str
    host: str
    port: int
    protocol: str
    region: str | None
    carrier: str | None
    expires_at: datetime
    usable_until: datetime
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: When a provider's response last listed it (its insert, or its latest refresh): the
    #: usage metrics' time from fetch to first use.
    fetched_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExtractResult:
    proxies: tuple[ExtractedProxy, ...]
    requested: int
    replayed: bool = False
    #: The pool generation the proxies come from (ADR-005: losing the store ends a generation,
    #: and exclusivity does not carry over to the next one). An opaque ID that changes when the
    #: store loses its data (a Redis restart or flush, an idle namespace that expired), so a
    #: client can tell that proxies it holds came from an ended generation. Not part of the
    #: result's value: two stores that hand out the same proxies give equal results.
    generation: str = field(default="", compare=False)

    @property
    def returned(self) -> int:
        return len(self.proxies)
