"""Typed errors of the activity pool.

Every refusal a caller can see is an :class:`ActivityError` with a stable ``code``. The codes
form one table shared by the Lua scripts (which return ``{err = "<code>[:<reason>]"}``) and by
``MemoryPool`` (which raises the same classes), so the two implementations cannot drift: a test
compares the ``Errors:`` headers of ``lua/`` with :data:`ERROR_CODES`.

Messages never contain a password, a raw ``SecretRef`` or a Redis URL.
"""

from __future__ import annotations

from collections.abc import Sequence


class ActivityError(Exception):
    """Base of every error the activity pool raises."""

    code: str = "activity_error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, reason={self.reason!r}, {self.args[0]!r})"
        )


class InvalidRequest(ActivityError):
    """The caller's input is malformed; nothing was changed."""

    code = "invalid_request"


class InvalidBatch(InvalidRequest):
    """A batch (upsert, health, report) is malformed as a whole; nothing was changed."""

    code = "invalid_batch"


class StoreUnavailable(ActivityError):
    """The store could not be reached or did not answer in time (HTTP 503)."""

    code = "store_unavailable"


class DeadlineExceeded(StoreUnavailable):
    """The call's deadline passed; if it passed before sending, nothing was changed."""

    code = "deadline_exceeded"


class ScanBudgetExhausted(ActivityError):
    """A bounded scan ended before it could answer: temporarily unavailable, never 'empty'."""

    code = "scan_budget_exhausted"


class IdempotencyConflict(ActivityError):
    """The idempotency key (or operation ID) was used before with a different request."""

    code = "idempotency_conflict"


class InsufficientInventory(ActivityError):
    """An all-or-nothing extract found fewer matching proxies than asked; nothing changed."""

    code = "insufficient_inventory"

    def __init__(self, message: str, *, requested: int, available: int) -> None:
        super().__init__(message)
        self.requested = requested
        self.available = available


class QuotaExceeded(ActivityError):
    """A client's rate limit (``CallQuota``) has no room for this call (``reason``:
    ``QUOTA_REASONS``). A refused extract changed nothing but, when its proxies were refused,
    the call unit it took."""

    code = "quota_exceeded"

    def __init__(self, message: str, *, reason: str, retry_after_ms: int, left: int) -> None:
        super().__init__(message, reason=reason)
        #: Milliseconds until the refused units would fit if nothing else were taken.
        self.retry_after_ms = retry_after_ms
        #: Units of the refused limit still free now.
        self.left = left


class OwnershipConflict(ActivityError):
    """An ownership operation does not match the proxy's current state or assignment."""

    code = "ownership_conflict"


class SessionFenced(ActivityError):
    """The worker session was replaced (or never opened); its writes are refused."""

    code = "session_fenced"


class SessionExpired(SessionFenced):
    """The worker session's TTL (Redis server time) has passed."""

    code = "session_expired"


class SnapshotRejected(ActivityError):
    """A snapshot issue or ACK does not follow the session's snapshot sequence."""

    code = "snapshot_rejected"


class ReportRejected(ActivityError):
    """A runtime report broke one of the ADR's report rules; nothing was changed."""

    code = "report_rejected"

    def __init__(self, message: str, *, reason: str, proxy_ids: Sequence[str] = ()) -> None:
        super().__init__(message, reason=reason)
        self.proxy_ids = tuple(proxy_ids)


class OutcomeRejected(ActivityError):
    """An outcome report was refused (``reason``: ``OUTCOME_REASONS``); nothing changed."""

    code = "outcome_rejected"


class LayoutMismatch(ActivityError):
    """The store holds data in a layout version this code does not understand."""

    code = "layout_mismatch"


#: Reasons carried by :class:`OwnershipConflict`.
OWNERSHIP_REASONS = (
    "not_found",  # no live record with that ID
    "not_available",  # not AVAILABLE (extracted, unhealthy, ...)
    "past_usable",  # now is at or past usable_until
    "already_owned",  # another assignment holds it
    "not_owned",  # no assignment
    "wrong_worker",
    "wrong_epoch",
    "lease_expired",
    "draining",  # renew refused: the assignment is draining
    "not_draining",  # acknowledge_drain before begin_drain
)

#: Reasons carried by :class:`QuotaExceeded`: which limit refused.
QUOTA_REASONS = (
    "calls",  # CallQuota.calls: the call itself (nothing taken)
    "proxies",  # CallQuota.proxies: count more do not fit (the call's unit stays taken)
)

#: Reasons carried by :class:`ReportRejected`.
REPORT_REASONS = (
    "snapshot_mismatch",  # version/epoch differ from the session's ACKed snapshot
    "sequence_regression",  # sequence lower than the last accepted one
    "sequence_conflict",  # same sequence, different body
    "sequence_gap",  # a sequence was skipped
    "ownership_mismatch",  # non-zero counts for a proxy not owned by this worker at this epoch
)

#: Reasons carried by :class:`SnapshotRejected`.
SNAPSHOT_REASONS = (
    "epoch_ahead",  # the snapshot claims an epoch the pool has not reached
    "version_order",  # versions issued to one session increase, their epochs never go back
    "includes_draining",  # a snapshot at or past a ticket's epoch still contains that proxy
    "not_issued",  # an ACK for a version that is not the last issued
)

#: Reasons carried by :class:`OutcomeRejected`.
OUTCOME_REASONS = (
    "not_found",  # no live record, not extracted, or extracted by another client (one answer,
    # so a client never learns about another client's proxies)
    "conflict",  # the proxy already has another outcome (or the same one for another host)
)


class LeaseLost(ActivityError):
    """The fetch scheduler's claim token is not the upstream's current one (its lease ended,
    or it finished): the caller must stop; nothing was changed (activity.scheduler)."""

    code = "lease_lost"


_ALL_ERRORS: tuple[type[ActivityError], ...] = (
    ActivityError,
    InvalidRequest,
    InvalidBatch,
    StoreUnavailable,
    DeadlineExceeded,
    ScanBudgetExhausted,
    IdempotencyConflict,
    InsufficientInventory,
    QuotaExceeded,
    OwnershipConflict,
    SessionFenced,
    SessionExpired,
    SnapshotRejected,
    ReportRejected,
    OutcomeRejected,
    LayoutMismatch,
    LeaseLost,
)

#: The shared code table: stable code -> exception class.
ERROR_CODES: dict[str, type[ActivityError]] = {cls.code: cls for cls in _ALL_ERRORS}
