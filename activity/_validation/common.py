"""Checks every port family shares that depend on the pool's options (text length, limits)."""

from __future__ import annotations

import re

from activity._checks import MAX_COUNTER, count
from activity.errors import InvalidBatch, InvalidRequest
from activity.labels import MAX_LABEL, BadLabel, label_key
from activity.types import PoolOptions

_NO_SPACE = re.compile(r"\S+")  # C-speed: text() runs several times per upserted proxy
#: Most connections one proxy may declare, and one runtime entry may count.
MAX_CONCURRENCY = 100_000


def text(
    value: object, what: str, options: PoolOptions, error: type[InvalidRequest] = InvalidRequest
) -> str:
    if not isinstance(value, str) or not value:
        raise error(f"{what} must be a non-empty string")
    if len(value) > options.max_text:
        raise error(f"{what} is longer than {options.max_text} characters")
    if not value.isprintable() or not _NO_SPACE.fullmatch(value):
        raise error(f"{what} must be printable without spaces")
    return value


def is_text(value: object, max_text: int) -> bool:
    """What ``text`` accepts, without building a message."""
    return (
        type(value) is str
        and 0 < len(value) <= max_text
        and value.isprintable()
        and _NO_SPACE.fullmatch(value) is not None
    )


def once(value: str, seen: set[str], items: str, index: int, what: str, scope: str) -> None:
    """Add ``value`` to ``seen``; InvalidBatch when it is there already (``items[index]: what
    appears twice in the scope``): a batch names each proxy, each unique key, once."""
    if value in seen:
        raise InvalidBatch(f"{items}[{index}]: {what} appears twice in the {scope}")
    seen.add(value)


def limit(value: object, options: PoolOptions, what: str = "limit") -> int:
    return count(value, what, low=1, high=options.max_sweep_limit)


def epoch(value: object, what: str = "epoch") -> int:
    return count(value, what, low=0, high=MAX_COUNTER)


def filter_key(value: object, what: str) -> str:
    """A region or carrier asked for, in its matching form (activity/labels.py): ``us`` finds
    proxies labelled ``US``."""
    try:
        if isinstance(value, str):
            return label_key(value)
    except BadLabel:
        pass
    raise InvalidRequest(f"{what} must be a label: 1-{MAX_LABEL} printable characters")
