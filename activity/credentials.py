"""Credential references for proxies.

A provider parser never hands a password to the pool directly: it stores the secret in a
credentials store and passes a :class:`SecretRef`. The pool resolves the reference *before*
writing anything (ADR-005, "凭据"), so a failed resolution drops the candidate instead of
committing a proxy nobody can use. ``repr`` of every type here hides the secret material.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SecretRef:
    """Opaque pointer to a secret in a credentials store. Never logged or put in a key."""

    ref: str = field(repr=False)

    def __repr__(self) -> str:
        return "SecretRef(<hidden>)"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class CredentialVersion:
    """Which version of a secret a reference resolves to (for rotation)."""

    ref: SecretRef
    version: int


@dataclass(frozen=True, slots=True)
class Credential:
    """Resolved proxy credentials; only the extract response and snapshot carry them."""

    username: str
    password: str = field(repr=False)


class CredentialUnavailable(LookupError):
    """The reference cannot be resolved (unknown, revoked, store down)."""


class CredentialResolver(Protocol):
    """Turns a reference into usable credentials, or raises :class:`CredentialUnavailable`."""

    def resolve(self, ref: SecretRef) -> Credential: ...


class NoCredentials:
    """Resolver for pools whose proxies carry no credentials: every lookup fails."""

    def resolve(self, ref: SecretRef) -> Credential:
        raise CredentialUnavailable("no credentials store configured")


class StaticCredentials:
    """An in-process credentials store: tests, benchmarks, and single-process tools."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Credential] = {}
        self._counter = 0

    def put(self, username: str, password: str) -> CredentialVersion:
        with self._lock:
            self._counter += 1
            ref = SecretRef(f"static:{self._counter}")
            self._items[ref.ref] = Credential(username, password)
            return CredentialVersion(ref, 1)

    def revoke(self, ref: SecretRef) -> None:
        with self._lock:
            self._items.pop(ref.ref, None)

    def resolve(self, ref: SecretRef) -> Credential:
        with self._lock:
            try:
                return self._items[ref.ref]
            except KeyError:
                raise CredentialUnavailable("unknown secret reference") from None


class FetchCredentials:
    """The passwords of proxies being fetched, held in this process only while their batch is
    upserted, in front of ``fallback`` (the account-wide credentials store).

    A vendor that hands out a password per proxy gives it to the fetch; the pool must resolve it
    when it upserts the proxy (the record then carries it), and nowhere may it be stored on the
    way: PostgreSQL never holds a proxy's credential, and a reference is never the secret. So
    ``put`` keeps it in memory under a fresh ``fetch:<n>`` reference, the fetch's upsert resolves
    it in the same process, and ``discard`` forgets it once the batch is written. References of
    another form go to ``fallback``. Bound: at most ``max_items`` at once (``put`` raises
    ``OverflowError`` past it: a fetch that never discards is a bug, not a reason to grow).
    """

    def __init__(self, fallback: CredentialResolver, max_items: int = 200_000) -> None:
        self.fallback = fallback
        self.max_items = max_items
        self._lock = threading.Lock()
        self._items: dict[str, Credential] = {}
        self._counter = 0

    def put(self, username: str, password: str) -> CredentialVersion:
        with self._lock:
            if len(self._items) >= self.max_items:
                raise OverflowError(f"more than {self.max_items} fetched credentials held")
            self._counter += 1
            ref = SecretRef(f"fetch:{self._counter}")
            self._items[ref.ref] = Credential(username, password)
            return CredentialVersion(ref, 1)

    def discard(self, refs: Iterable[SecretRef]) -> None:
        with self._lock:
            for ref in refs:
                self._items.pop(ref.ref, None)

    def held(self) -> int:
        with self._lock:
            return len(self._items)

    def resolve(self, ref: SecretRef) -> Credential:
        raw = getattr(ref, "ref", None)
        if isinstance(raw, str) and raw.startswith("fetch:"):
            with self._lock:
                found = self._items.get(raw)
            if found is None:
                raise CredentialUnavailable("unknown secret reference")
            return found
        return self.fallback.resolve(ref)
