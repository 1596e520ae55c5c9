"""What a refused wire document raises: one base class, a subclass per kind of refusal.

A message names the document or the field path (``proxies[3].port``) and what is wrong with
it, never the value: a value may be a provider's password, a client's verifier or a credential
reference, and these messages reach logs and problem responses.
"""

from __future__ import annotations


class WireError(ValueError):
    """A snapshot, ACK or report this code cannot accept (or would not emit)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        #: Where: the document's name (``snapshot``) or a field path (``proxies[3].port``).
        self.path = path
        self.problem = problem


class WireFormatError(WireError):
    """Not the shape: not UTF-8 JSON, a wrong type, a missing, unknown or repeated field, a
    value outside its domain (a port of 0, an unknown protocol, a dangling reference)."""


class WireBoundError(WireError):
    """Over a stated limit (``gateway_runtime.wire.limits``): bytes, entries, text length."""


class WireVersionError(WireError):
    """A ``wire`` version this code does not speak: the two sides run different releases."""


class WireChecksumError(WireError):
    """The snapshot's content does not match its checksum: corrupted, or edited after sealing."""
