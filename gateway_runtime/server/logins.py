"""Who is asking: a gateway client's login (``Proxy-Authorization: Basic``, or SOCKS5's
username and password) checked against the served snapshot's clients, never anything remote.

The username is the client's name and its parameters (gateway_runtime/username.py); the
password is one of the client's API keys, checked against the snapshot's verifiers. A login
that verified is remembered for the snapshot it verified against (a bounded table cleared when
the snapshot changes), so a keep-alive connection's next request costs a dictionary lookup, not
an HMAC; a key revoked upstream stops working with the snapshot that no longer lists it.
"""

from __future__ import annotations

import base64
import binascii

from gateway_runtime.snapshot_store import View
from gateway_runtime.username import ClientRequest, UsernameError, parse_username
from gateway_runtime.wire import GatewayClient
from gateway_runtime.wire.verifier import MAX_API_KEY_LENGTH, verify

#: ``Basic `` and the base64 of the longest username and key.
MAX_CREDENTIALS = 2 * (256 + MAX_API_KEY_LENGTH)


class LoginRefused(Exception):
    """A login the worker cannot accept; ``reason`` is what the 407 says (never the key)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Logins:
    def __init__(self, cache_size: int = 10_000) -> None:
        self._cache_size = cache_size
        self._view: View | None = None
        self._clients: dict[str, GatewayClient] = {}
        self._accepted: dict[tuple[str, str], tuple[GatewayClient, ClientRequest]] = {}

    def basic(self, view: View, header: bytes | None) -> tuple[GatewayClient, ClientRequest]:
        """The client and what it asks for, from a ``Proxy-Authorization`` header's value."""
        if not header:
            raise LoginRefused("proxy authentication required: Basic, client name and API key")
        if len(header) > MAX_CREDENTIALS:
            raise LoginRefused("the credentials are too long")
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            raise LoginRefused("only Basic proxy authentication is accepted")
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise LoginRefused("the Basic credentials are not base64 of UTF-8") from None
        username, colon, password = decoded.partition(":")
        if not colon:
            raise LoginRefused("the Basic credentials have no ':' between name and key")
        return self.check(view, username, password)

    def check(
        self, view: View, username: str, password: str
    ) -> tuple[GatewayClient, ClientRequest]:
        """The client and what it asks for, from a username and an API key."""
        if view is not self._view:
            self._view = view
            self._clients = {c.name: c for c in view.snapshot.clients}
            self._accepted = {}
        found = self._accepted.get((username, password))
        if found is not None:
            return found
        try:
            request = parse_username(username, self._clients)
        except UsernameError as exc:
            raise LoginRefused(exc.reason) from None
        client = self._clients[request.client]
        if not any(verify(password, verifier) for verifier in client.verifiers):
            raise LoginRefused("wrong API key for this client")
        if len(self._accepted) >= self._cache_size:
            self._accepted.clear()  # rare: as many distinct logins as the table holds
        if self._cache_size:
            self._accepted[(username, password)] = (client, request)
        return client, request
