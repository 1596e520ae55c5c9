"""The served snapshot's proxies that a client's restrictions and a username's parameters allow,
found once per snapshot and kept: the request path then starts from a ready list instead of
testing every proxy of the snapshot on every connection.

A ``CandidateIndex`` belongs to one view, which never changes, so a list it found stays right
for the view's life; whether a listed proxy has room or is still usable changes from moment to
moment and is checked when it is chosen (``SnapshotStore.take``). Lists are kept per key (the
client's three restrictions and the request's four parameters, region and carrier case-folded
as they are matched), at most ``max_keys`` of them and ``max_entries`` proxies in all, the
oldest dropped first: the memory they take stays bounded whatever usernames a worker is sent.
A list is built from the smallest of the per-field lists the key names (per region, carrier,
upstream and protocol, made on first use), so a parameter no proxy has costs nothing and a
narrow one costs its own size, not the snapshot's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway_runtime.snapshot_store import Hold
from gateway_runtime.username import ClientRequest
from gateway_runtime.wire import GatewayClient, SnapshotProxy

#: Lists kept per view: every (restrictions, parameters) a busy worker sees, with room to spare;
#: bounded so that usernames made up by the thousand cannot grow it.
MAX_KEYS = 4_096
#: Proxies in all the lists of a view (8 bytes each: 8 MB), however broad the lists.
MAX_ENTRIES = 1_000_000

_Key = tuple[
    frozenset[str], frozenset[str], frozenset[str], str | None, str | None, str | None, str | None
]


def _folded(value: str | None) -> str | None:
    return None if value is None else value.casefold()


def allowed(client: GatewayClient, request: ClientRequest) -> bool:
    """Whether what the username asks for is within the client's restrictions."""
    regions = {r.casefold() for r in client.allowed_regions}
    if request.region and regions and request.region.casefold() not in regions:
        return False
    upstreams, protocols = client.allowed_upstreams, client.allowed_protocols
    if request.upstream and upstreams and request.upstream not in upstreams:
        return False
    return not (request.protocol and protocols and request.protocol not in protocols)


def matches(proxy: SnapshotProxy, client: GatewayClient, request: ClientRequest) -> bool:
    """Whether the proxy is one the client may use and the request asks for."""
    regions = {r.casefold() for r in client.allowed_regions}
    if client.allowed_upstreams and proxy.upstream not in client.allowed_upstreams:
        return False
    if regions and _folded(proxy.region) not in regions:
        return False
    if client.allowed_protocols and proxy.protocol not in client.allowed_protocols:
        return False
    return (
        (request.region is None or _folded(proxy.region) == request.region.casefold())
        and (request.protocol is None or proxy.protocol == request.protocol)
        and (request.carrier is None or _folded(proxy.carrier) == request.carrier.casefold())
        and (request.upstream is None or proxy.upstream == request.upstream)
    )


class CandidateIndex:
    """One view's candidate lists (``holds``: the view's, from ``SnapshotStore.holds``)."""

    def __init__(
        self, holds: Mapping[str, Hold], max_keys: int = MAX_KEYS, max_entries: int = MAX_ENTRIES
    ) -> None:
        self.holds = holds
        self._max_keys, self._max_entries = max_keys, max_entries
        self._entries = 0
        #: None: the request asks for something outside the client's restrictions.
        self._lists: dict[_Key, Sequence[Hold] | None] = {}
        self._fields: dict[str, dict[str | None, list[Hold]]] | None = None

    def candidates(self, client: GatewayClient, request: ClientRequest) -> Sequence[Hold] | None:
        """The holds the client may use and the request asks for (maybe none); None when the
        request is outside the client's restrictions (forbidden)."""
        region, carrier = request.region, request.carrier
        key = (
            client.allowed_upstreams, client.allowed_regions, client.allowed_protocols,
            None if region is None else region.casefold(), request.protocol,
            None if carrier is None else carrier.casefold(), request.upstream,
        )  # fmt: skip
        try:
            return self._lists[key]
        except KeyError:
            pass
        found = self._find(client, request) if allowed(client, request) else None
        size = 0 if found is None else len(found)
        while self._lists and (
            len(self._lists) >= self._max_keys or self._entries + size > self._max_entries
        ):
            oldest = self._lists.pop(next(iter(self._lists)))  # the oldest key
            self._entries -= 0 if oldest is None else len(oldest)
        self._lists[key] = found
        self._entries += size
        return found

    def _find(self, client: GatewayClient, request: ClientRequest) -> Sequence[Hold]:
        fields = self._fields if self._fields is not None else self._index_fields()
        # Each of the key's constraints narrows to a union of per-field lists: start from the
        # smallest and test the rest on its members only.
        sources: list[Sequence[Hold]] = [fields["all"][None]]
        for name, wanted in (
            ("region", _folded(request.region)),
            ("protocol", request.protocol),
            ("carrier", _folded(request.carrier)),
            ("upstream", request.upstream),
        ):
            if wanted is not None:
                sources.append(fields[name].get(wanted, []))
        for name, allowed_values in (
            ("upstream", client.allowed_upstreams),
            ("region", frozenset(r.casefold() for r in client.allowed_regions)),
            ("protocol", client.allowed_protocols),
        ):
            if allowed_values:
                sources.append([h for v in allowed_values for h in fields[name].get(v, [])])
        smallest = min(sources, key=len)
        return tuple(h for h in smallest if matches(h.proxy, client, request))

    def _index_fields(self) -> dict[str, dict[str | None, list[Hold]]]:
        fields: dict[str, dict[str | None, list[Hold]]] = {
            "region": {}, "protocol": {}, "carrier": {}, "upstream": {},
            "all": {None: list(self.holds.values())},
        }  # fmt: skip
        for hold in self.holds.values():
            p = hold.proxy
            fields["region"].setdefault(_folded(p.region), []).append(hold)
            fields["protocol"].setdefault(p.protocol, []).append(hold)
            fields["carrier"].setdefault(_folded(p.carrier), []).append(hold)
            fields["upstream"].setdefault(p.upstream, []).append(hold)
        self._fields = fields
        return fields
