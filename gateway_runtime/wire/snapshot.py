"""A worker's snapshot on the wire: encoded and sealed by the control plane, decoded and
verified by the worker, by this one code.

The checksum is SHA-256 (hex) of the canonical encoding of the snapshot without its
``checksum`` field; it is also what the snapshot's ACK and its drain tickets name.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from datetime import timedelta
from types import MappingProxyType

from gateway_runtime.wire import _fields as f
from gateway_runtime.wire import limits
from gateway_runtime.wire.errors import WireBoundError, WireChecksumError, WireFormatError
from gateway_runtime.wire.types import Credential, GatewayClient, Snapshot, SnapshotProxy
from gateway_runtime.wire.verifier import is_verifier

_SECOND = timedelta(seconds=1)

_SNAPSHOT = frozenset(
    {
        "wire",
        "version",
        "epoch",
        "issued_at_ms",
        "max_staleness_s",
        "proxies",
        "credentials",
        "clients",
        "checksum",
    }
)
_PROXY = frozenset(
    {
        "proxy_id",
        "host",
        "port",
        "protocol",
        "region",
        "carrier",
        "upstream",
        "labels",
        "max_concurrency",
        "assignment_epoch",
        "lease_expires_at_ms",
        "usable_until_ms",
        "credential_ref",
    }
)
_CREDENTIAL = frozenset({"ref", "username", "password"})
_CLIENT = frozenset(
    {
        "name",
        "verifiers",
        "allowed_upstreams",
        "allowed_regions",
        "allowed_protocols",
        "max_connections",
        "requests_per_second",
    }
)


@dataclass(frozen=True, slots=True)
class SealedSnapshot:
    """A snapshot as the worker will decode it (checksum set), and the bytes to send."""

    snapshot: Snapshot
    data: bytes

    @property
    def checksum(self) -> str:
        assert self.snapshot.checksum is not None  # a sealed snapshot always has one
        return self.snapshot.checksum


def seal_snapshot(snapshot: Snapshot) -> SealedSnapshot:
    """Check ``snapshot`` as the worker will, compute its checksum and encode it. A snapshot
    that already carries a checksum must carry the right one (``WireChecksumError``)."""
    f.require(snapshot, Snapshot, "snapshot")
    tree = _snapshot_tree(snapshot)
    tree["checksum"] = "0" * 64  # checked below, once computed
    sealed = _parse_snapshot(tree)
    del tree["checksum"]
    checksum = _checksum(tree)
    if snapshot.checksum is not None and snapshot.checksum != checksum:
        raise WireChecksumError("checksum", "does not match the snapshot's content")
    tree["checksum"] = checksum
    data = f.canonical(tree)
    if len(data) > limits.MAX_SNAPSHOT_BYTES:
        raise WireBoundError("snapshot", f"is longer than {limits.MAX_SNAPSHOT_BYTES} bytes")
    return SealedSnapshot(replace(sealed, checksum=checksum), data)


def encode_snapshot(snapshot: Snapshot) -> bytes:
    return seal_snapshot(snapshot).data


def decode_snapshot(data: bytes) -> Snapshot:
    """The snapshot ``data`` holds, checked field by field and against its checksum."""
    tree = f.load(data, limits.MAX_SNAPSHOT_BYTES, "snapshot")
    snapshot = _parse_snapshot(tree)
    content = {k: v for k, v in tree.items() if k != "checksum"}
    if not hmac.compare_digest(_checksum(content), str(snapshot.checksum)):
        raise WireChecksumError("checksum", "does not match the snapshot's content")
    return snapshot


def canonical_clients(clients: tuple[GatewayClient, ...]) -> bytes:
    """The canonical encoding of a snapshot's ``clients`` alone: what changes when they do (the
    control plane's entity tag), checked as a snapshot's are."""
    trees = [_client_tree(c, f"clients[{i}]") for i, c in enumerate(clients)]
    for index, tree in enumerate(trees):
        _parse_client(tree, f"clients[{index}]")
    return f.canonical({"clients": trees})


def _checksum(content: f.Tree) -> str:
    return hashlib.sha256(f.canonical(content)).hexdigest()


def _snapshot_tree(s: Snapshot) -> f.Tree:
    staleness = s.max_staleness
    return {
        "wire": s.wire,
        "version": s.version,
        "epoch": s.epoch,
        "issued_at_ms": f.to_ms(s.issued_at, "issued_at"),
        "max_staleness_s": staleness // _SECOND if isinstance(staleness, timedelta) else staleness,
        "proxies": f.to_list(s.proxies, _proxy_tree, "proxies"),
        "credentials": f.to_list(s.credentials, _credential_tree, "credentials"),
        "clients": f.to_list(s.clients, _client_tree, "clients"),
    }


def _proxy_tree(p: SnapshotProxy, path: str) -> f.Tree:
    f.require(p, SnapshotProxy, path)
    return {
        "proxy_id": p.proxy_id,
        "host": p.host,
        "port": p.port,
        "protocol": p.protocol,
        "region": p.region,
        "carrier": p.carrier,
        "upstream": p.upstream,
        "labels": f.mapping_to_dict(p.labels),
        "max_concurrency": p.max_concurrency,
        "assignment_epoch": p.assignment_epoch,
        "lease_expires_at_ms": f.to_ms(p.lease_expires_at, f"{path}.lease_expires_at"),
        "usable_until_ms": f.to_ms(p.usable_until, f"{path}.usable_until"),
        "credential_ref": p.credential_ref,
    }


def _credential_tree(c: Credential, path: str) -> f.Tree:
    return f.attributes(c, Credential, path, _CREDENTIAL)


def _client_tree(c: GatewayClient, path: str) -> f.Tree:
    f.require(c, GatewayClient, path)
    return {
        "name": c.name,
        "verifiers": list(c.verifiers) if isinstance(c.verifiers, tuple) else c.verifiers,
        "allowed_upstreams": f.set_to_list(c.allowed_upstreams),
        "allowed_regions": f.set_to_list(c.allowed_regions),
        "allowed_protocols": f.set_to_list(c.allowed_protocols),
        "max_connections": c.max_connections,
        "requests_per_second": c.requests_per_second,
    }


def _parse_snapshot(value: object) -> Snapshot:
    t = f.fields(value, "", _SNAPSHOT)
    wire = f.wire_version(t["wire"])
    version = f.integer(t["version"], "version", 1, limits.MAX_COUNTER)
    epoch = f.integer(t["epoch"], "epoch", 0, limits.MAX_COUNTER)
    issued_at = f.instant(t["issued_at_ms"], "issued_at_ms")
    staleness = f.integer(t["max_staleness_s"], "max_staleness_s", 1, limits.MAX_STALENESS_S)
    checksum = f.checksum(t["checksum"], "checksum")
    proxies = f.parsed_items(t["proxies"], "proxies", limits.MAX_PROXIES, _parse_proxy)
    f.unique([p.proxy_id for p in proxies], "proxies", "proxy_id")
    credentials = f.parsed_items(
        t["credentials"], "credentials", limits.MAX_PROXIES, _parse_credential
    )
    _check_references(proxies, credentials)
    clients = f.parsed_items(t["clients"], "clients", limits.MAX_CLIENTS, _parse_client)
    f.unique([c.name for c in clients], "clients", "name")
    return Snapshot(
        version=version,
        epoch=epoch,
        issued_at=issued_at,
        max_staleness=staleness * _SECOND,
        proxies=proxies,
        credentials=credentials,
        clients=clients,
        checksum=checksum,
        wire=wire,
    )


def _check_references(proxies: tuple[SnapshotProxy, ...], creds: tuple[Credential, ...]) -> None:
    """Each reference a proxy names is sent once, and no credential a proxy does not name is
    sent at all (a worker gets no password it has no use for)."""
    f.unique([c.ref for c in creds], "credentials", "ref")
    sent = {c.ref for c in creds}
    for index, proxy in enumerate(proxies):
        if proxy.credential_ref is not None and proxy.credential_ref not in sent:
            raise WireFormatError(f"proxies[{index}].credential_ref", "names no credential")
    named = {p.credential_ref for p in proxies}
    for index, credential in enumerate(creds):
        if credential.ref not in named:
            raise WireFormatError(f"credentials[{index}].ref", "is named by no proxy")


def _parse_proxy(value: object, path: str) -> SnapshotProxy:
    t = f.fields(value, path, _PROXY)
    ref = t["credential_ref"]
    return SnapshotProxy(
        proxy_id=f.text(t["proxy_id"], f"{path}.proxy_id"),
        host=f.text(t["host"], f"{path}.host", limits.MAX_HOST),
        port=f.integer(t["port"], f"{path}.port", 1, 65_535),
        protocol=_protocol(t["protocol"], f"{path}.protocol"),
        region=f.optional_label(t["region"], f"{path}.region"),
        carrier=f.optional_label(t["carrier"], f"{path}.carrier"),
        upstream=f.token(t["upstream"], f"{path}.upstream"),
        labels=_labels(t["labels"], f"{path}.labels"),
        max_concurrency=f.integer(
            t["max_concurrency"], f"{path}.max_concurrency", 1, limits.MAX_CONCURRENCY
        ),
        assignment_epoch=f.integer(
            t["assignment_epoch"], f"{path}.assignment_epoch", 1, limits.MAX_COUNTER
        ),
        lease_expires_at=f.instant(t["lease_expires_at_ms"], f"{path}.lease_expires_at_ms"),
        usable_until=f.instant(t["usable_until_ms"], f"{path}.usable_until_ms"),
        credential_ref=None if ref is None else f.text(ref, f"{path}.credential_ref"),
    )


def _protocol(value: object, path: str) -> str:
    if not isinstance(value, str) or value not in limits.PROTOCOLS:
        raise WireFormatError(path, f"must be one of {', '.join(sorted(limits.PROTOCOLS))}")
    return value


def _labels(value: object, path: str) -> MappingProxyType[str, str]:
    if not isinstance(value, dict):
        raise WireFormatError(path, "must be an object")
    if len(value) > limits.MAX_LABELS:
        raise WireBoundError(path, f"has more than {limits.MAX_LABELS} labels")
    for key, label in value.items():
        f.text(key, f"{path} key", limits.MAX_TEXT)
        f.text(label, f"{path}.{key}" if f.is_nameable(key) else path, spaces=True, empty=True)
    return MappingProxyType(dict(value))


def _parse_credential(value: object, path: str) -> Credential:
    t = f.fields(value, path, _CREDENTIAL)
    return Credential(
        ref=f.text(t["ref"], f"{path}.ref"),
        username=f.text(t["username"], f"{path}.username", spaces=True),
        password=f.text(t["password"], f"{path}.password", spaces=True, empty=True),
    )


def _parse_client(value: object, path: str) -> GatewayClient:
    t = f.fields(value, path, _CLIENT)
    verifiers = f.parsed_items(
        t["verifiers"], f"{path}.verifiers", limits.MAX_CLIENT_KEYS, _parse_verifier
    )
    if not verifiers:
        raise WireFormatError(f"{path}.verifiers", "must hold at least one verifier")
    if len(set(verifiers)) != len(verifiers):
        raise WireFormatError(f"{path}.verifiers", "must not repeat a verifier")
    return GatewayClient(
        name=f.token(t["name"], f"{path}.name"),
        verifiers=verifiers,
        max_connections=f.integer(
            t["max_connections"], f"{path}.max_connections", 1, limits.MAX_CLIENT_CONNECTIONS
        ),
        requests_per_second=f.integer(
            t["requests_per_second"], f"{path}.requests_per_second", 1, limits.MAX_CLIENT_RPS
        ),
        allowed_upstreams=f.sorted_set(
            t["allowed_upstreams"], f"{path}.allowed_upstreams", f.token
        ),
        allowed_regions=f.sorted_set(
            t["allowed_regions"],
            f"{path}.allowed_regions",
            lambda v, p: f.text(v, p, limits.MAX_LABEL, spaces=True),
        ),
        allowed_protocols=f.sorted_set(
            t["allowed_protocols"], f"{path}.allowed_protocols", _protocol
        ),
    )


def _parse_verifier(value: object, path: str) -> str:
    if not is_verifier(value):
        raise WireFormatError(path, "must be a verifier (make_verifier)")
    assert isinstance(value, str)  # is_verifier checked it
    return value
