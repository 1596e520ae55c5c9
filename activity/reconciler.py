"""The reconciler: a provider's answer put in the pool in chunks under one operation ID
(ARCHITECTURE.md, "Filling the pool"); the fetch job (activity/fetch_job.py) decides what to
ask for and runs it.

``prepare`` keeps the longest-lived of what an answer listed, up to what was asked (a vendor
may send more than asked; a proxy listed twice counts once), their lifetimes cut to the pool's
bound and their labels mapped (``UpstreamTarget``); ``write`` upserts them ``chunk`` at a time,
chunk ``i`` under ``f"{operation_id}:{i}"`` (an :class:`Intake`). Writing an intake again
(after the store failed mid-way) never changes the counts twice: each chunk already written
replays its first result, and only the chunks the first write did not reach are written. A new
response is a new operation: the pool refuses other proxies under an operation ID it has seen
(``IdempotencyConflict``), and the deficit, read again, accounts for what was written. Exits
quarantined for every host are refused by the upsert itself (counted in ``quarantined``), and
the pool's ``max_size`` check is the last word on capacity.

A proxy's ID and unique key are digests of its upstream and exit (protocol, host, port, user
name): the same proxy handed out again refreshes its record instead of adding one. Its password
goes to ``credentials`` (a store the pool's resolver reads), never into the pool's batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from activity._checks import digest
from activity.credentials import CredentialVersion
from activity.labels import LabelMap
from activity.ports import Upserter
from activity.providers.entries import DropReason, ParsedResponse, ProxyEntry
from activity.types import FetchedBatch, FetchedProxy, PoolOptions, UpsertResult

#: Proxies per upsert call: the pool's own script batch, so one call is one script.
DEFAULT_CHUNK = 500
#: How much of the pool's ``max_proxy_ttl`` a proxy's lifetime in the pool stays under: the
#: pool checks the lifetime on its own clock (Redis's), which may run behind ours.
LIFETIME_CLOCK_MARGIN = timedelta(minutes=1)
#: The longest a proxy lives in the pool from the fetch that listed it (see UpstreamTarget).
MAX_LIFETIME = PoolOptions().max_proxy_ttl - LIFETIME_CLOCK_MARGIN


class CredentialSink(Protocol):
    def put(self, username: str, password: str) -> CredentialVersion: ...


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """What the reconciler keeps an upstream at, from its configuration."""

    upstream_id: str
    max_size: int
    safety_margin: timedelta
    #: Connections one of its proxies takes at once (the vendor's limit per proxy).
    max_concurrency: int = 1
    #: The longest a proxy lives in the pool, from the fetch that listed it: a vendor's
    #: expiry past it (Proxy-Seller's 30-day proxies) is cut to it, and the next fetch that
    #: lists the proxy again renews it (a refresh takes the new expiry). The pool holds no
    #: record longer than its ``max_proxy_ttl`` (bounded everything), and a proxy the vendor
    #: stops listing must not outlive it by weeks; one it keeps listing never expires early.
    max_lifetime: timedelta = MAX_LIFETIME
    #: How the vendor's region and carrier labels become the pool's (the upstream's map and
    #: defaults); none: kept as the vendor wrote them.
    labels: LabelMap = field(default_factory=LabelMap)


@dataclass(slots=True)
class ReconcileResult:
    #: ``max_size`` less the unextracted count, before the budget.
    deficit: int = 0
    #: How many proxies the provider was asked for (0: it was not asked).
    asked: int = 0
    #: Entries the response gave, and those of them left out because more came than asked.
    received: int = 0
    beyond_ask: int = 0
    #: Entries of a proxy listed twice in the response (one kept).
    duplicates: int = 0
    #: The parser's drops, by reason.
    dropped: Counter[DropReason] = field(default_factory=Counter)
    #: The upserts' results, added up over the chunks.
    inserted: int = 0
    refreshed: int = 0
    over_capacity: int = 0
    conflicts: int = 0
    quarantined: int = 0
    #: Of ``inserted``, entered SUSPECT (their exit failed clients lately: passive health).
    suspect: int = 0
    rejected: int = 0  # dropped by the pool (unusable, credentials unresolvable)
    skipped_terminal: int = 0
    replayed_chunks: int = 0
    #: Batches written (or replayed): the ones after a batch ``max_size`` cut are not.
    batches_written: int = 0
    #: The new lifecycles' IDs (``UpsertResult.inserted_ids``): what the intake checks probe.
    inserted_ids: list[str] = field(default_factory=list)

    def add(self, result: UpsertResult) -> None:
        """A chunk's result; a replayed one is counted as such only (its counts were the first
        write's, already told), so a result says what this write changed."""
        if result.replayed:
            self.replayed_chunks += 1
            return
        self.inserted += result.inserted
        self.inserted_ids.extend(result.inserted_ids)
        self.refreshed += result.refreshed
        self.over_capacity += result.over_capacity
        self.conflicts += result.conflicts
        self.quarantined += result.quarantined
        self.suspect += result.suspect
        self.rejected += result.dropped
        self.skipped_terminal += result.skipped_terminal


@dataclass(frozen=True, slots=True)
class Intake:
    """What one response becomes: the batches to write, each under its own operation ID (so
    writing them again replays what was written and writes only the rest), and what was left
    out of it."""

    batches: tuple[FetchedBatch, ...]
    received: int
    beyond_ask: int
    dropped: Counter[DropReason]
    #: Entries of a proxy the response listed already (the same exit): one is kept.
    duplicates: int = 0


class Reconciler:
    def __init__(
        self, pool: Upserter, credentials: CredentialSink, *, chunk: int = DEFAULT_CHUNK
    ) -> None:
        if not 1 <= chunk <= 10_000:
            raise ValueError("chunk must be 1-10,000 proxies")
        self.pool = pool
        self.credentials = credentials
        self.chunk = chunk

    def prepare(
        self,
        now: datetime,
        target: UpstreamTarget,
        parsed: ParsedResponse,
        *,
        keep: int,
        operation_id: str,
    ) -> Intake:
        """The batches of a response, its ``keep`` longest-lived entries (ties by exit), their
        passwords put in the credentials store once."""
        entries: list[ProxyEntry] = []
        seen: set[str] = set()
        for entry in sorted(parsed.entries, key=_keep_order):
            if entry.exit in seen:
                continue  # the same proxy listed twice: its longest-lived listing stands
            seen.add(entry.exit)
            entries.append(entry)
        duplicates = len(parsed.entries) - len(entries)
        entries = entries[:keep]
        proxies = [self._proxy(target, entry, now) for entry in entries]
        batches = tuple(
            FetchedBatch(
                upstream_id=target.upstream_id,
                proxies=tuple(proxies[index : index + self.chunk]),
                max_size=target.max_size,
                safety_margin=target.safety_margin,
                fetched_at=now,
                operation_id=f"{operation_id}:{index // self.chunk}",
            )
            for index in range(0, len(proxies), self.chunk)
        )
        received = len(parsed.entries)
        beyond = received - duplicates - len(entries)
        return Intake(batches, received, beyond, Counter(parsed.dropped), duplicates)

    def write(self, intake: Intake, into: ReconcileResult | None = None) -> ReconcileResult:
        """Upsert the batches in order; stops after one the upstream's ``max_size`` cut. Each
        batch's result is added to ``into`` (a new result if None) as it is written, so a
        caller whose write failed half-way still knows what was written."""
        result = into if into is not None else ReconcileResult()
        result.received, result.beyond_ask = intake.received, intake.beyond_ask
        result.duplicates, result.dropped = intake.duplicates, intake.dropped
        for batch in intake.batches:
            chunk_result = self.pool.upsert_fetched(batch)
            result.add(chunk_result)
            result.batches_written += 1
            if chunk_result.over_capacity:
                break  # full: the batches after it would only be refused
        return result

    def _proxy(
        self, target: UpstreamTarget, entry: ProxyEntry, fetched_at: datetime
    ) -> FetchedProxy:
        secret_ref = None
        if entry.username is not None and entry.password is not None:
            secret_ref = self.credentials.put(entry.username, entry.password).ref
        return FetchedProxy(
            proxy_id=proxy_id_of(target.upstream_id, entry),
            unique_key=digest(entry.exit),
            host=entry.host,
            port=entry.port,
            protocol=entry.protocol,
            expires_at=min(entry.expires_at, fetched_at + target.max_lifetime),
            region=target.labels.region(entry.region),
            carrier=target.labels.carrier(entry.carrier),
            max_concurrency=target.max_concurrency,
            secret_ref=secret_ref,
        )


def proxy_id_of(upstream_id: str, entry: ProxyEntry) -> str:
    """The pool's ID of a provider's proxy: its upstream and a digest of its exit, the same
    each time the provider hands it out."""
    return f"{upstream_id}:{digest(upstream_id, entry.exit)[:24]}"


def _keep_order(entry: ProxyEntry) -> tuple[float, str, int, str]:
    return (-entry.expires_at.timestamp(), entry.host, entry.port, entry.username or "")
