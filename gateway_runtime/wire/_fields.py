"""The strict readers every document's decoder uses, and the one canonical JSON encoding.

Each reader takes a parsed JSON value and the field path it came from, and returns the value
or raises a ``WireError`` naming that path, never the value.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from gateway_runtime.wire import limits
from gateway_runtime.wire.errors import (
    WireBoundError,
    WireFormatError,
    WireVersionError,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_NAME = re.compile(limits.NAME_PATTERN)
_NO_SPACE = re.compile(r"\S+")
_CHECKSUM = re.compile(r"[0-9a-f]{64}")
#: A field name short and plain enough to repeat in a message (an unknown one may be anything).
_NAMEABLE = re.compile(r"[a-z_][a-z0-9_]{0,39}")

Tree = dict[str, Any]
T = TypeVar("T")


class _NotAnInteger:
    """What a JSON float or NaN/Infinity parses to: no field accepts it, and parsing it does
    not fail before the ``wire`` version is read (a newer format may carry one)."""


_NOT_AN_INTEGER = _NotAnInteger()


def canonical(tree: Tree) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the bytes a document is sent as and hashed in."""
    return json.dumps(
        tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def load(data: object, max_bytes: int, document: str) -> Tree:
    """``data`` parsed as one JSON object of wire version ``WIRE_VERSION``. The byte length is
    checked first, then UTF-8 and JSON, then the version, before any field."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireFormatError(document, "must be bytes")
    if len(data) > max_bytes:
        raise WireBoundError(document, f"is longer than {max_bytes} bytes")
    try:
        tree = json.loads(
            bytes(data).decode("utf-8"),
            object_pairs_hook=_object_without_repeats,
            parse_float=_not_an_integer,
            parse_constant=_not_an_integer,
        )
    except _RepeatedField:
        raise WireFormatError(document, "repeats a field name in an object") from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, a 5,000-digit integer, nesting
        raise WireFormatError(document, "is not UTF-8 JSON") from None
    if not isinstance(tree, dict):
        raise WireFormatError(document, "must be a JSON object")
    wire_version(tree.get("wire"))
    return tree


def wire_version(value: object) -> int:
    if type(value) is not int:
        raise WireFormatError("wire", "must be the integer wire format version")
    if value != limits.WIRE_VERSION:
        raise WireVersionError(
            "wire", f"version {value} is not {limits.WIRE_VERSION}, the one this code speaks"
        )
    return value


class _RepeatedField(ValueError):
    pass


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> Tree:
    tree = dict(pairs)
    if len(tree) != len(pairs):
        raise _RepeatedField
    return tree


def _not_an_integer(_text: str) -> _NotAnInteger:
    return _NOT_AN_INTEGER


def fields(value: object, path: str, names: frozenset[str]) -> Tree:
    """``value`` as an object with exactly the fields ``names``."""
    if not isinstance(value, dict):
        raise WireFormatError(path, "must be an object")
    if value.keys() != names:
        missing = sorted(names - value.keys())
        if missing:
            raise WireFormatError(_join(path, missing[0]), "is missing")
        unknown = sorted(str(k) for k in value.keys() - names)
        named = [k for k in unknown if is_nameable(k)]
        where = _join(path, named[0]) if named else path
        raise WireFormatError(
            where, "is not a field of this format" if named else "has an unknown field"
        )
    return value


def is_nameable(name: str) -> bool:
    return _NAMEABLE.fullmatch(name) is not None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def to_list(value: object, convert: Callable[[Any, str], Tree], path: str) -> object:
    """A tuple (or list) of dataclasses as a list of trees; anything else is left for the
    decoder's check."""
    if isinstance(value, tuple | list):
        return [convert(item, f"{path}[{index}]") for index, item in enumerate(value)]
    return value


def items(value: object, path: str, maximum: int) -> list[Any]:
    """``value`` as a JSON array of at most ``maximum`` items (counted before any is read)."""
    if not isinstance(value, list):
        raise WireFormatError(path, "must be an array")
    if len(value) > maximum:
        raise WireBoundError(path, f"has more than {maximum} entries")
    return value


def parsed_items(
    value: object, path: str, maximum: int, parse: Callable[[object, str], T]
) -> tuple[T, ...]:
    """``value`` as an array of at most ``maximum`` items, each read by ``parse``."""
    return tuple(parse(item, f"{path}[{i}]") for i, item in enumerate(items(value, path, maximum)))


def integer(value: object, path: str, low: int, high: int) -> int:
    """An integer (a JSON true or false is not one) from ``low`` to ``high``."""
    if type(value) is not int or not low <= value <= high:
        raise WireFormatError(path, f"must be an integer from {low} to {high}")
    return value


def instant(value: object, path: str) -> datetime:
    """Milliseconds since the epoch, as an aware UTC datetime."""
    return _EPOCH + timedelta(milliseconds=integer(value, path, 0, limits.MAX_MS))


def to_ms(value: object, path: str) -> object:
    """An aware datetime as integer milliseconds since the epoch (floored); anything else is
    left for the decoder's check to refuse."""
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise WireFormatError(path, "must be a timezone-aware datetime")
        return (value - _EPOCH) // _MS
    return value


def text(
    value: object,
    path: str,
    maximum: int = limits.MAX_TEXT,
    *,
    spaces: bool = False,
    empty: bool = False,
) -> str:
    """Printable text of at most ``maximum`` characters; by default not empty and without
    whitespace (an ID, a host, a reference)."""
    if not isinstance(value, str):
        raise WireFormatError(path, "must be a string")
    if len(value) > maximum:
        raise WireBoundError(path, f"is longer than {maximum} characters")
    if not value:
        if empty:
            return value
        raise WireFormatError(path, "must not be empty")
    if not value.isprintable() or not (spaces or _NO_SPACE.fullmatch(value)):
        what = "printable" if spaces else "printable, without whitespace"
        raise WireFormatError(path, f"must be {what}")
    return value


def checksum(value: object, path: str) -> str:
    """A SHA-256 digest in lowercase hex."""
    if not isinstance(value, str) or _CHECKSUM.fullmatch(value) is None:
        raise WireFormatError(path, "must be 64 lowercase hexadecimal digits")
    return value


def optional_label(value: object, path: str) -> str | None:
    """A region or carrier as vendors write it, or null."""
    return None if value is None else text(value, path, limits.MAX_LABEL, spaces=True)


def token(value: object, path: str) -> str:
    """An upstream ID or client name: a token of the pool's key names."""
    if isinstance(value, str) and len(value) > limits.MAX_NAME:
        raise WireBoundError(path, f"is longer than {limits.MAX_NAME} characters")
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise WireFormatError(path, f"must be 1-{limits.MAX_NAME} characters of [A-Za-z0-9._:@+-]")
    return value


def traffic_name(value: object, path: str) -> str:
    """A traffic entry's client or upstream: a token, or ``OTHER`` (the worker's table of pairs
    was full)."""
    return limits.OTHER if value == limits.OTHER else token(value, path)


def sorted_set(value: object, path: str, read: Callable[[object, str], str]) -> frozenset[str]:
    """A set, sent as an array sorted without repeats (so one set has one encoding)."""
    values = parsed_items(value, path, limits.MAX_ALLOWED, read)
    if any(a >= b for a, b in itertools.pairwise(values)):
        raise WireFormatError(path, "must be sorted, without repeats")
    return frozenset(values)


def set_to_list(value: object) -> object:
    """A set as its sorted list; anything else is left for the decoder's check."""
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:  # mixed types: the decoder names the first wrong one
            return list(value)
    return value


def mapping_to_dict(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def unique(values: list[str], path: str, what: str) -> None:
    """Refuse a repeated ``what`` (at its own index)."""
    seen: set[str] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise WireFormatError(f"{path}[{index}].{what}", "repeats an earlier entry's")
        seen.add(value)


def attributes(instance: object, cls: type, path: str, names: frozenset[str]) -> Tree:
    """The attributes ``names`` of ``instance`` (a ``cls``) as a tree: the documents whose
    wire names are their attribute names; ``wire`` is this code's version."""
    require(instance, cls, path)
    tree = {name: getattr(instance, name) for name in names if name != "wire"}
    if "wire" in names:
        tree["wire"] = limits.WIRE_VERSION
    return tree


def require(instance: object, cls: type, path: str) -> None:
    if not isinstance(instance, cls):
        raise WireFormatError(path, f"must be a {cls.__name__}")
