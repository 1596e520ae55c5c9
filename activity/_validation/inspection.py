"""Checks of the console's reads (activity/inspection.py), before any store is touched."""

from __future__ import annotations

from dataclasses import dataclass

from activity._checks import MAX_MS, count, token
from activity._validation.common import filter_key, text
from activity.errors import InvalidRequest
from activity.inspection import MAX_BUDGET, MAX_PAGE, BrowseQuery
from activity.types import PoolOptions, ProxyState


@dataclass(frozen=True, slots=True)
class PreparedBrowse:
    upstream: str  # "" for none, as the other filters
    state: str
    protocol: str
    region: str
    carrier: str
    after_ms: int | None
    after_id: str
    limit: int
    budget: int


def prepare_browse(query: object, options: PoolOptions) -> PreparedBrowse:
    if not isinstance(query, BrowseQuery):
        raise InvalidRequest("query must be a BrowseQuery")
    labels = {}
    upstream = query.upstream
    labels["upstream"] = "" if upstream is None else token(upstream, "upstream")
    for name in ("region", "carrier"):
        value = getattr(query, name)
        labels[name] = "" if value is None else filter_key(value, name)
    protocol = "" if query.protocol is None else text(query.protocol, "protocol", options)
    if query.state is not None and not isinstance(query.state, ProxyState):
        raise InvalidRequest("state must be a ProxyState")
    most = min(options.scan_budget, MAX_BUDGET)
    budget = most if query.budget is None else count(query.budget, "budget", low=1, high=most)
    after = query.after
    after_id = "" if after is None else text(after.proxy_id, "after.proxy_id", options)
    after_ms = (
        None if after is None else count(after.expires_ms, "after.expires_ms", low=0, high=MAX_MS)
    )
    return PreparedBrowse(
        upstream=labels["upstream"],
        state="" if query.state is None else query.state.value,
        protocol=protocol,
        region=labels["region"],
        carrier=labels["carrier"],
        after_ms=after_ms,
        after_id=after_id,
        limit=count(query.limit, "limit", low=1, high=MAX_PAGE),
        budget=budget,
    )
