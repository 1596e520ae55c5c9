"""What the wire tests build and generate: documents with one field changed, hypothesis
strategies for whole snapshots, reports and ACKs, and the refusal helpers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import strategies as st

from gateway_runtime.wire import (
    TRAFFIC_COUNTS,
    ClientTraffic,
    Credential,
    GatewayClient,
    ReportEntry,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
    WireError,
    decode_snapshot,
    encode_snapshot,
    limits,
    make_verifier,
)

NOW = datetime(2026, 7, 29, 12, 0, tzinfo=UTC)
KEY = "pp_0123456789ab_" + "k" * 43
PASSWORD = "hunter2-Secret"
VERIFIER = make_verifier(KEY, b"s" * 16)


def proxy(proxy_id: str = "p1", **changes: object) -> SnapshotProxy:
    values: dict[str, object] = {
        "proxy_id": proxy_id,
        "host": "10.0.0.1",
        "port": 8080,
        "protocol": "http",
        "region": "US",
        "carrier": None,
        "upstream": "u1",
        "labels": {"pool": "a", "city": "广州"},
        "max_concurrency": 4,
        "assignment_epoch": 3,
        "lease_expires_at": NOW + timedelta(seconds=30),
        "usable_until": NOW + timedelta(seconds=60),
        "credential_ref": "c1",
    }
    return SnapshotProxy(**{**values, **changes})


def client(name: str = "demo", **changes: object) -> GatewayClient:
    values: dict[str, object] = {
        "name": name,
        "verifiers": (VERIFIER,),
        "max_connections": 100,
        "requests_per_second": 50,
        "allowed_upstreams": frozenset({"u1", "u2"}),
        "allowed_regions": frozenset({"US", "cn-gd"}),
        "allowed_protocols": frozenset({"http"}),
    }
    return GatewayClient(**{**values, **changes})


def snapshot(**changes: object) -> Snapshot:
    values: dict[str, object] = {
        "version": 7,
        "epoch": 42,
        "issued_at": NOW,
        "max_staleness": timedelta(seconds=30),
        "proxies": (proxy("p1"), proxy("p2", credential_ref=None, protocol="socks5")),
        "credentials": (Credential("c1", "user", PASSWORD),),
        "clients": (client(),),
    }
    return Snapshot(**{**values, **changes})


def report(**changes: object) -> RuntimeReportBody:
    values: dict[str, object] = {
        "report_sequence": 3,
        "snapshot_version": 7,
        "epoch": 42,
        "entries": (ReportEntry("p1", 40, 2, 1),),
        "traffic": (
            ClientTraffic("shop", "u1", 10, 2, 1_000, 20_000, 1, 0, 2, 1),
            ClientTraffic(limits.OTHER, "u1", requests=1),
        ),
        "refused_snapshots": 1,
    }
    return RuntimeReportBody(**{**values, **changes})


def tree_of(data: bytes) -> dict:
    return json.loads(data)


def resealed(tree: dict) -> bytes:
    """``tree`` encoded with the checksum its content has, so a decode fails on the field."""
    content = {k: v for k, v in tree.items() if k != "checksum"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    tree = {**tree, "checksum": hashlib.sha256(canonical.encode()).hexdigest()}
    return json.dumps(tree).encode()


def refusal(change: Callable[[dict], None], error: type[WireError]) -> WireError:
    """What decoding the sample snapshot raises once ``change`` has changed it (and it is
    resealed, so the refusal is the change's, not the checksum's)."""
    tree = tree_of(encode_snapshot(snapshot()))
    change(tree)
    with pytest.raises(error) as caught:
        decode_snapshot(resealed(tree))
    return caught.value


def assert_refused(error: WireError, path: str) -> None:
    message = str(error)
    assert message.startswith(f"{path}: "), message
    for secret in (PASSWORD, VERIFIER, VERIFIER.split("$")[-1], KEY):
        assert secret not in message


# --- generated documents ------------------------------------------------------------------

_ids = st.text(st.characters(categories=("L", "M", "N", "P", "S")), min_size=1, max_size=12)
_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,12}", fullmatch=True)
_regions = st.text(st.characters(categories=("L", "N", "Zs")), min_size=1, max_size=12).filter(
    str.isprintable
)
_counters = st.integers(0, limits.MAX_COUNTER)
_instants = st.integers(0, limits.MAX_MS).map(
    lambda ms: datetime.fromtimestamp(0, UTC) + ms * timedelta(milliseconds=1)
)
_protocols = st.sampled_from(sorted(limits.PROTOCOLS))
_printable = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=20).filter(
    str.isprintable
)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    ids = draw(st.lists(_ids, unique=True, max_size=6))
    refs = draw(st.lists(_ids, unique=True, max_size=3))
    proxies = tuple(
        SnapshotProxy(
            proxy_id=pid,
            host=draw(_ids),
            port=draw(st.integers(1, 65_535)),
            protocol=draw(_protocols),
            region=draw(st.none() | _regions),
            carrier=draw(st.none() | _regions),
            upstream=draw(_names),
            labels=draw(st.dictionaries(_ids, _printable, max_size=3)),
            max_concurrency=draw(st.integers(1, limits.MAX_CONCURRENCY)),
            assignment_epoch=draw(st.integers(1, limits.MAX_COUNTER)),
            lease_expires_at=draw(_instants),
            usable_until=draw(_instants),
            credential_ref=draw(st.none() | st.sampled_from(refs)) if refs else None,
        )
        for pid in ids
    )
    named = {p.credential_ref for p in proxies}
    credentials = tuple(
        Credential(ref, draw(_regions), draw(_printable)) for ref in refs if ref in named
    )
    clients = tuple(
        GatewayClient(
            name=name,
            verifiers=tuple(
                {
                    make_verifier(key, draw(st.binary(min_size=16, max_size=64)))
                    for key in draw(st.lists(_ids, min_size=1, max_size=3))
                }
            ),
            max_connections=draw(st.integers(1, limits.MAX_CLIENT_CONNECTIONS)),
            requests_per_second=draw(st.integers(1, limits.MAX_CLIENT_RPS)),
            allowed_upstreams=draw(st.frozensets(_names, max_size=3)),
            allowed_regions=draw(st.frozensets(_regions, max_size=3)),
            allowed_protocols=draw(st.frozensets(_protocols)),
        )
        for name in draw(st.lists(_names, unique=True, max_size=3))
    )
    return Snapshot(
        version=draw(st.integers(1, limits.MAX_COUNTER)),
        epoch=draw(_counters),
        issued_at=draw(_instants),
        max_staleness=timedelta(seconds=draw(st.integers(1, limits.MAX_STALENESS_S))),
        proxies=proxies,
        credentials=credentials,
        clients=clients,
    )


reports = st.builds(
    RuntimeReportBody,
    report_sequence=st.integers(1, limits.MAX_COUNTER),
    snapshot_version=_counters,
    epoch=_counters,
    entries=st.lists(
        st.builds(
            ReportEntry,
            proxy_id=_ids,
            epoch=_counters,
            active=st.integers(0, limits.MAX_CONCURRENCY),
            reserved=st.integers(0, limits.MAX_CONCURRENCY),
        ),
        unique_by=lambda e: e.proxy_id,
        max_size=5,
    ).map(tuple),
    traffic=st.lists(
        st.builds(
            ClientTraffic,
            client=_names | st.just(limits.OTHER),
            upstream=_names | st.just(limits.OTHER),
            **dict.fromkeys(TRAFFIC_COUNTS, _counters),
        ),
        unique_by=lambda u: (u.client, u.upstream),
        max_size=3,
    ).map(tuple),
    refused_snapshots=_counters,
)
acks = st.builds(
    SnapshotAck,
    version=st.integers(1, limits.MAX_COUNTER),
    epoch=_counters,
    checksum=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
)


def set_at(path: list, value: object):
    def change(tree: dict) -> None:
        target = tree
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def drop_at(path: list):
    def change(tree: dict) -> None:
        target = tree
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change
