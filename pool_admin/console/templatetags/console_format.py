"""Small formatters of the console's figures: relative times, shares, a value of a limit."""

from __future__ import annotations

from datetime import datetime

from django import template

from activity.inspection import WorkerStatus
from pool_admin.console.ownership import FRESHNESS
from pool_admin.console.ownership import freshness as freshness_of

register = template.Library()


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


@register.filter
def relative(value: datetime | None, now: datetime) -> str:
    """``in 12 s`` / ``3 min ago`` from ``now``; ``-`` for none."""
    if not isinstance(value, datetime):
        return "-"
    delta = (value - now).total_seconds()
    return f"in {_span(delta)}" if delta > 0 else f"{_span(delta)} ago"


@register.filter
def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


@register.filter
def of_limit(value: int | None, limit: int | None) -> str:
    """``12 / 60`` (``12`` when there is no limit, ``-`` when unknown: a template gives an
    unread figure as "")."""
    if not isinstance(value, int):
        return "-"
    return f"{value:,} / {limit:,}" if limit else f"{value:,}"


@register.filter
def number(value: int | None) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


@register.filter
def total(overview: object, name: str) -> int:
    """The overview's total of one figure over its upstreams."""
    return overview.total(name)  # type: ignore[attr-defined,no-any-return]


@register.filter
def freshness(worker: WorkerStatus) -> str:
    return freshness_of(worker)


@register.filter
def meaning(state: str) -> str:
    """What a freshness state means (a cell's title; the legend lists them all)."""
    return FRESHNESS.get(state, "")


@register.filter
def age(value: datetime | None, now: datetime) -> str:
    """How long ago: ``12 s``; ``-`` for none."""
    if not isinstance(value, datetime):
        return "-"
    return _span(max(0.0, (now - value).total_seconds()))


@register.filter
def ref(snapshot: object) -> str:
    """A snapshot reference: ``v12 e40 3fa2b1c4``; ``-`` for none."""
    if snapshot is None or not hasattr(snapshot, "version"):
        return "-"
    return f"v{snapshot.version} e{snapshot.epoch} {snapshot.checksum[:8]}"  # type: ignore[attr-defined]
