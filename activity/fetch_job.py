"""One claimed fetch of one upstream, end to end: the job the fetch task runs, and the tests.

A :class:`FetchJob` is built once per claim with everything it works with: the upstream's
:class:`FetchPlan` (how to ask its vendor and read the answer, how to check what comes), the
pool's ports, the fetch scheduler and the claim it holds there (with the account's limits and
the lease), the holder of the fetched passwords, and a clock. ``run`` then:

1. renews the claim (a claim spent or lost: ``LeaseLost``, nothing done);
2. reads the upstream's unextracted inventory once: the deficit is ``max_size`` less it;
3. takes what the account's proxy budget grants of the deficit (the scheduler's
   ``take_proxies``; nothing granted, or nothing lacking: no vendor call);
4. asks the vendor (activity/providers/fetch.py: a hard deadline, bounded bytes) and reads the
   answer with the plan's format, once; a vendor's error is redacted of what the request
   carried, and the grant is given back;
5. writes the answer's longest-lived proxies through the reconciler (their passwords handed
   over through ``handover``, forgotten once written) and gives back what the vendor did not
   send;
6. checks the proxies the pool took in as new, in the rounds a recheck runs too
   (activity/check_rounds.py), renewing the claim before each (a trusted provider's become
   AVAILABLE without a probe, except those whose exit clients found failing);
7. finishes the claim in every case but a lost lease: next due after the plan's interval, later
   after a vendor error (:data:`WAIT_INTERVALS`, or the vendor's ``Retry-After`` up to the
   plan's bound).

The credential handover: a vendor that hands out a password per proxy gives it to the fetch,
and the pool must resolve it when it writes the proxy. ``handover`` is that meeting point: the
pool must have been built with it as its credentials resolver (``RedisPool(...,
credentials=handover)``); the job puts each password there and discards them all once written.

A proxy is checked once at intake: most vendors' proxies live minutes, and one check when it
arrives (a few seconds at most) is what a short-lived proxy is worth; after that, outcome
reports (passive health) tell, and one that lives long enough is rechecked while idle
(activity/rechecking.py). A proxy handed out again is refreshed with its state kept.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

from activity.check_rounds import CheckItem, CheckTally, check_in_rounds, unusable
from activity.checker import CheckTarget, ProxyEndpoint
from activity.clock import Clock
from activity.credentials import (
    CredentialUnavailable,
    CredentialVersion,
    FetchCredentials,
    SecretRef,
)
from activity.errors import LeaseLost
from activity.ports import HealthStore, InventoryReader, Upserter
from activity.providers.entries import ParsedResponse
from activity.providers.errors import NextStep, ProviderError, VendorError
from activity.providers.fetch import FetchLimits, HttpStatusError, fetch
from activity.providers.presets import Format
from activity.providers.redaction import RequestSecrets
from activity.reconciler import Intake, Reconciler, ReconcileResult, UpstreamTarget
from activity.scheduler.ports import FetchScheduler
from activity.scheduler.types import AccountLimits, Claim
from activity.types import FetchedProxy, HealthUpdate, ProxyState

logger = logging.getLogger(__name__)

#: After a vendor error, the next fetch waits this many intervals (back off: the vendor limits
#: us; disable: the account or order cannot serve, an operator must act), at most MAX_WAIT
#: (or one interval, if that is longer).
WAIT_INTERVALS = {NextStep.RETRY_LATER: 1, NextStep.BACK_OFF: 5, NextStep.DISABLE: 120}
MAX_WAIT = timedelta(hours=1)


class FetchingPool(Upserter, HealthStore, InventoryReader, Protocol):
    """What a fetch needs of the pool: the inventory, the upsert, the health updates."""


@dataclass(frozen=True)
class FetchPlan:
    """How to fetch and check one upstream (built from its configuration by the caller)."""

    target: UpstreamTarget
    url: str
    format: Format
    #: The request parameter that says how many proxies to hand out (None: the vendor's own).
    count_param: str | None = None
    #: May hold the account's credential (``credential_param``): never in a repr.
    params: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    limits: FetchLimits = field(default_factory=FetchLimits)
    #: None: the provider is trusted, no probe.
    check: CheckTarget | None = None
    check_timeout: float = 5.0
    check_concurrency: int = 200
    #: A fixed list to read instead of asking a vendor (a static-list upstream): never in a
    #: repr, it holds the proxies' logins.
    static_body: bytes | None = field(default=None, repr=False)
    #: The account's credential material, whether or not the request sends it as it is: a
    #: vendor's text is redacted of it (and of every parameter and header value).
    secrets: tuple[str, ...] = field(default=(), repr=False)
    #: The cadence: the next fetch is due this long after one ends.
    interval: timedelta = timedelta(seconds=30)
    #: The longest a vendor's ``Retry-After`` is honoured.
    max_retry_after: timedelta = timedelta(hours=1)

    def request_secrets(self) -> RequestSecrets:
        """What the vendor's answers must not repeat: the credential, the request's parameter
        and header values, the endpoint's own query values, and the segments of its path that
        look like a key (8 characters or more, a digit among them: Proxy-Seller's key is in its
        path; ``list`` and ``v1`` are not keys)."""
        endpoint = urlsplit(self.url)
        segments = [s for s in endpoint.path.split("/") if len(s) >= 8 and any(map(str.isdigit, s))]
        return RequestSecrets(
            (
                *self.secrets,
                *self.params.values(),
                *self.headers.values(),
                *(v for _, v in parse_qsl(endpoint.query)),
                *segments,
            )
        )


@dataclass
class FetchReport:
    """What one fetch did: what the vendor's answer became (``reconcile``), and the intake
    checks of what the pool took in (``checks``: AVAILABLE for a trusted provider's)."""

    reconcile: ReconcileResult
    checks: CheckTally = field(default_factory=CheckTally)


class FetchInterrupted(Exception):
    """A fetch that failed on our side (the pool's store) after the vendor answered: its
    ``report`` says what it wrote and checked before it stopped (what is in the pool now);
    ``cause`` is what stopped it. Proxies it wrote and could not check are FETCHED, out of
    extraction, until a recheck takes them (due at once: activity/rechecking.py)."""

    def __init__(self, report: FetchReport, cause: Exception) -> None:
        super().__init__(f"the fetch stopped on our side ({type(cause).__name__})")
        self.report, self.cause = report, cause


class FetchJob:
    """One claimed fetch of one upstream (see the module's text)."""

    def __init__(
        self,
        plan: FetchPlan,
        *,
        pool: FetchingPool,
        scheduler: FetchScheduler,
        claim: Claim,
        limits: AccountLimits,
        lease: timedelta,
        handover: FetchCredentials,
        clock: Clock,
    ) -> None:
        self.plan, self.pool, self.scheduler = plan, pool, scheduler
        self.claim, self.limits, self.lease = claim, limits, lease
        self.handover, self.clock = handover, clock

    def run(self) -> FetchReport:
        """The fetch, its claim finished. Raises ``LeaseLost`` (the claim was spent or lost
        before it began: nothing done), ``ProviderError`` (the vendor: nothing written),
        :class:`FetchInterrupted` (our side, after the vendor answered) or another error of our
        side (before the vendor was asked: nothing written)."""
        self.claim = self.scheduler.renew(self.clock.now(), self.claim, self.lease)
        wait = self.plan.interval
        try:
            return self._fetch()
        except ProviderError as exc:
            wait = self._wait_after(exc)
            raise
        finally:
            self._finish(wait)

    def _finish(self, wait: timedelta) -> None:
        """Finish the claim, next due ``wait`` from now. A finish that fails must not hide how
        the fetch went (its report, or the vendor's error): it is logged, and the claim, left
        running, is given up when its lease ends and claimed again."""
        try:
            self.scheduler.finish(self.clock.now(), self.claim, self.clock.now() + wait)
        except LeaseLost:
            logger.warning(
                "fetch %s: its lease was lost; another fetch runs it", self.claim.upstream_id
            )
        except Exception as exc:
            logger.error(
                "fetch %s: its claim could not be finished (%s); it is claimed again "
                "when its lease ends",
                self.claim.upstream_id,
                type(exc).__name__,
            )

    def _wait_after(self, error: ProviderError) -> timedelta:
        interval = self.plan.interval
        waited = min(interval * WAIT_INTERVALS[error.next_step], max(MAX_WAIT, interval))
        if isinstance(error, HttpStatusError) and error.retry_after is not None:
            waited = max(waited, min(error.retry_after, self.plan.max_retry_after))
        return waited

    def _fetch(self) -> FetchReport:
        plan, clock = self.plan, self.clock
        deficit = max(0, plan.target.max_size - self.pool.inventory(plan.target.upstream_id))
        taken_at = clock.now()
        asked = 0
        if deficit:
            asked = self.scheduler.take_proxies(taken_at, self.claim, self.limits, deficit)
        if asked == 0:
            return FetchReport(ReconcileResult(deficit=deficit))
        try:
            parsed = self._ask(asked)
        except Exception:
            self._give_back(asked, taken_at)  # nothing came: none of it counts
            raise
        # The vendor may have taken its whole deadline: the checks and writes to come need the
        # lease as much (a lost one is logged, and the answer, paid for, is written still).
        self._keep_alive()
        result = ReconcileResult(deficit=deficit, asked=asked)
        interrupted: Exception | None = None
        kept = _Recorded(self.handover)
        try:
            reconciler = Reconciler(self.pool, kept)
            try:
                intake = reconciler.prepare(
                    clock.now(),
                    plan.target,
                    parsed,
                    keep=asked,
                    operation_id=f"fetch:{self.claim.token}",
                )
            except Exception:
                self._give_back(asked, taken_at)  # nothing written: none of it counts
                raise
            got = sum(len(batch.proxies) for batch in intake.batches)
            if got < asked:
                self._give_back(asked - got, taken_at)
            try:
                reconciler.write(intake, into=result)
            except Exception as exc:  # the store failed half-way: what it took is checked still
                interrupted = exc
            # Only what the pool took in as new: a refreshed proxy keeps the state its checks
            # gave it, and one the pool refused (another upstream's exit, a lifetime it does
            # not believe, extracted already) is not the pool's to check or count.
            items = self._check_items(intake, result)
        finally:
            self.handover.discard(kept.refs)  # the records carry them now; nothing else may
        report = FetchReport(result)
        try:
            self._check(items, report.checks)
        except Exception as exc:
            interrupted = interrupted or exc
        if interrupted is not None:
            raise FetchInterrupted(report, interrupted) from interrupted
        return report

    def _ask(self, count: int) -> ParsedResponse:
        """The vendor's answer, parsed; its own error redacted of what the request carried."""
        plan = self.plan
        if plan.static_body is not None:  # the list is here: read it, ask nobody
            return plan.format.parse(plan.static_body, self.clock.now())
        params = dict(plan.params)
        if plan.count_param:
            params[plan.count_param] = str(count)
        answer = fetch(
            plan.url, clock=self.clock, limits=plan.limits, params=params, headers=plan.headers
        )
        try:
            return plan.format.parse(answer.body, answer.sent_at)
        except VendorError as said:
            redacted = said.redacted(plan.request_secrets())
        # Raised here, not in the except clause: there it would carry the vendor's own error,
        # secret and all, as its context.
        raise redacted

    def _give_back(self, count: int, taken_at: datetime) -> None:
        """Return what the vendor did not send to the account's budget; a lease lost meanwhile
        (a vendor that took its whole deadline) keeps it counted, and hides nothing."""
        try:
            self.scheduler.give_back_proxies(self.clock.now(), self.claim, count, taken_at)
        except LeaseLost:
            logger.info(
                "fetch %s: its lease ended before %d proxies could be given back",
                self.claim.upstream_id,
                count,
            )

    def _check_items(self, intake: Intake, result: ReconcileResult) -> list[CheckItem]:
        """The proxies the pool took in as new, each with where to check it (None: it cannot
        be checked as listed, a SOCKS5 login over 255 bytes: UNHEALTHY)."""
        inserted = set(result.inserted_ids)
        return [
            CheckItem(
                proxy.proxy_id,
                ProxyState.FETCHED,
                self._endpoint(proxy),
                proxy.expires_at,
                guarded=False,
            )
            for batch in intake.batches[: result.batches_written]
            for proxy in batch.proxies
            if proxy.proxy_id in inserted
        ]

    def _endpoint(self, proxy: FetchedProxy) -> ProxyEndpoint | None:
        try:
            username = password = None
            if proxy.secret_ref is not None:
                login = self.handover.resolve(proxy.secret_ref)
                username, password = login.username, login.password
            return ProxyEndpoint.of(proxy.host, proxy.port, proxy.protocol, username, password)
        except (CredentialUnavailable, ValueError):
            return None

    def _check(self, items: list[CheckItem], tally: CheckTally) -> None:
        plan = self.plan
        if plan.check is None:
            # Only from FETCHED: a proxy whose exit clients found failing entered SUSPECT
            # (passive health), and trusting the provider does not override what clients saw.
            now = self.clock.now()
            tally.applied(
                self.pool,
                [
                    unusable(item, now)
                    if item.endpoint is None
                    else HealthUpdate(
                        item.proxy_id, ProxyState.AVAILABLE, now, expected=ProxyState.FETCHED
                    )
                    for item in items
                ],
            )
            return
        check_in_rounds(
            items,
            pool=self.pool,
            target=plan.check,
            timeout=plan.check_timeout,
            concurrency=plan.check_concurrency,
            clock=self.clock,
            tally=tally,
            before_round=self._keep_alive,
        )

    def _keep_alive(self) -> None:
        """Renew the claim (after the vendor's answer, before each round of checks). A lease
        already lost (a lease shorter than the fetch) does not stop the fetch: the lease guards
        the vendor account, the answer is paid for, and the proxies this fetch wrote need their
        check whoever fetches next (unchecked, they would hold ``max_size`` places until a
        recheck took them)."""
        try:
            self.claim = self.scheduler.renew(self.clock.now(), self.claim, self.lease)
        except LeaseLost:
            logger.warning(
                "fetch %s: its lease ended before its work did; going on", self.claim.upstream_id
            )


class _Recorded:
    """The handover, with every reference put through it noted (to discard them all, also
    when the fetch fails half-way through putting them)."""

    def __init__(self, store: FetchCredentials) -> None:
        self.store = store
        self.refs: list[SecretRef] = []

    def put(self, username: str, password: str) -> CredentialVersion:
        version = self.store.put(username, password)
        self.refs.append(version.ref)
        return version
