"""Credential references for proxies.

A provider parser never hands a password to the pool directly: it stores the secret in a
credentials store and passes a :class:`SecretRef`. The pool resolves the reference *before*
writing anything (ADR-005, "凭据"), so a failed resolution drops the candidate instead of
committing a proxy nobody can use. ``repr`` of every type here hides the secret material.
"""

from __future__ import annotations

import threading
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
