"""The fetch scheduler: per provider account, which upstream to fetch next, under leases and
the account's limits (seed 001, adapted). A port (``FetchScheduler``), a reference model
(``MemoryScheduler``), a Redis implementation (``activity.scheduler.redis.RedisScheduler``)
and one contract (``activity.scheduler.contract``)."""

from activity.errors import LeaseLost
from activity.scheduler.memory import MemoryScheduler
from activity.scheduler.ports import FetchScheduler
from activity.scheduler.types import AccountLimits, Claim, NoClaim, Refusal, RequestOutcome

__all__ = [
    "AccountLimits",
    "Claim",
    "FetchScheduler",
    "LeaseLost",
    "MemoryScheduler",
    "NoClaim",
    "Refusal",
    "RequestOutcome",
]
