"""Small helpers shared by the operator commands: strict numbers, one-line errors, tables."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import redis
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import DatabaseError

from activity.errors import ActivityError


def parse_int(text: str | int | None, option: str, low: int, high: int) -> int | None:
    """``text`` as an int in ``[low, high]``, or a one-line ``CommandError`` naming ``option``."""
    if text is None:
        return None
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        raise CommandError(f"{option} must be a whole number, got {str(text)!r}") from None
    if not low <= value <= high:
        raise CommandError(f"{option} must be between {low} and {high}, got {value}")
    return value


def validation_text(exc: ValidationError) -> str:
    """A ValidationError as one line: ``field: message; field: message``."""
    if hasattr(exc, "error_dict"):
        parts = [f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()]
        return "; ".join(parts)
    return " ".join(exc.messages)


@contextmanager
def one_line_errors(nothing_changed: bool = True) -> Iterator[None]:
    """Turn database, validation, Redis and pool errors into a one-line ``CommandError``."""
    tail = "; nothing changed" if nothing_changed else ""
    try:
        yield
    except ValidationError as exc:
        raise CommandError(f"invalid: {validation_text(exc)}{tail}") from None
    except DatabaseError as exc:
        # No SQL or parameters: they may hold values an operator should not see in a log.
        raise CommandError(f"database error: {type(exc).__name__}{tail}") from None
    except redis.RedisError as exc:
        raise CommandError(f"store_unavailable: Redis error {type(exc).__name__}{tail}") from None
    except ActivityError as exc:
        raise CommandError(f"{exc.code}: {exc}{tail}") from None


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain left-aligned text table ("-" for None)."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)
